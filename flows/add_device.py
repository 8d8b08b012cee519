"""Add-device flow: a newly registered device gets selected, measured, distilled, evaluated and
registered, one Prefect task per step of ``tcl.pipeline.add_device`` (select, measure,
evaluation set, featurize, distill, register: each with its own state and log lines; the steps
that measure retry after a transient failure, resuming from the store), and the result is
published as a Markdown artifact (table, step times and plot).

``python -m flows.add_device --device NAME`` runs it; ``tcl device add`` runs it when no server
listens, and ``tcl serve`` serves it on the ``tcl.device.added`` event
(``tcl.pipeline.deployments``); both find it by its name (pyproject.toml's ``tcl.flows``)."""
from __future__ import annotations

import sys
import time

from flows._common import main, refuse, transient  # first: sets Prefect's defaults
from prefect import flow, get_run_logger, task
from prefect.artifacts import create_markdown_artifact
from prefect.cache_policies import NONE
from prefect.exceptions import MissingContextError

from tcl.config import TclError
from tcl.pipeline import add_device as steps
from tcl.pipeline.events import served_params
from tcl.pipeline.inputs import retry_options


def _step(name: str, fn, retries: bool = False):
    """A Prefect task running ``fn`` (a step of ``tcl.pipeline.add_device``). Its inputs are the
    run's shared state (in-process objects): no caching, no result persistence."""
    return task(fn, name=name, cache_policy=NONE, persist_result=False,
                retry_condition_fn=transient if retries else None)


select_task = _step("select", steps.select_step, retries=True)
measure_task = _step("measure", steps.measure_step, retries=True)
evaluation_task = _step("evaluation set", steps.evaluation_step, retries=True)
featurize_task = _step("featurize", steps.featurize_step)
distill_task = _step("distill", steps.distill_step)
register_task = _step("register", steps.register_step)


@flow(name="add-device", log_prints=True)
def add_device(device: str = "", params_file: str = "params.yaml",
               event_params_file: str = "", started: float = 0.0) -> dict:
    """Select, measure, distill, evaluate and register ``device``'s model. Served, it uses only
    the params file ``tcl serve`` bound; ``event_params_file`` (what a ``tcl.device.added``
    event named) is only compared with it (``tcl.pipeline.events.served_params``). ``started``: when
    the command started (epoch seconds; 0: the flow's start), for the table of step times."""
    try:
        params = served_params(params_file, event_params_file)
        steps.check_device(params, device)
    except TclError as e:
        return refuse(e)
    run = steps.start_run(params, device, say=_say(get_run_logger()),
                          started=started or time.time())
    retry = retry_options(params)
    steps.select_and_measure_rounds(run, select_task.with_options(**retry),
                                    measure_task.with_options(**retry))
    evaluation_task.with_options(**retry)(run)
    featurize_task(run)
    distill_task(run)
    result = register_task(run)
    create_markdown_artifact(key=f"add-device-{_key(device)}",
                             markdown=result.report(params.paths.add_device_plot(device)),
                             description=f"Device {device} added")
    print(result.markdown())
    return {"device": device, "model": result.model, "new_model": result.new_model,
            "selected": result.selected, "measured_now": result.measured_now,
            "secs": result.secs, "total_secs": result.total_secs}


def _say(flow_logger):
    """A log line in the task run it comes from (each step logs as itself), else the flow's."""
    def say(message: str) -> None:
        try:
            get_run_logger().info(message)
        except MissingContextError:
            flow_logger.info(message)
    return say


def _key(name: str) -> str:   # artifact keys: lowercase letters, digits and dashes
    return "".join(c if c.isalnum() else "-" for c in name.lower())


if __name__ == "__main__":
    sys.exit(main(add_device))
