"""Add-device flow: a newly registered device gets selected, measured, distilled, evaluated and
registered, one Prefect task per step of ``tcl.add_device`` (select, measure, evaluation set,
featurize, distill, register: each with its own state and log lines; the steps that resume from
the store retry after an infrastructure failure), and the result is published as a Markdown
artifact (table, step times and plot). Triggered by ``tcl device add`` (directly, or through
the ``tcl.device.added`` event and the deployment ``tcl serve`` serves)."""
from __future__ import annotations

import sys
import time

from flows._common import main, refuse  # first: sets Prefect's defaults before it is imported
from prefect import flow, get_run_logger, task
from prefect.artifacts import create_markdown_artifact
from prefect.cache_policies import NONE
from prefect.exceptions import MissingContextError

from tcl import add_device as steps
from tcl.add_device import check_device
from tcl.config import TclError
from tcl.events import served_params
from tcl.measure.interrupt import InfrastructureFailure


def _infrastructure(task_, task_run, state) -> bool:
    """Retry only what the tracker or runner failed (what was stored is kept and skipped);
    bad input and interrupts fail at once."""
    return isinstance(state.data, InfrastructureFailure)


def _step(name: str, fn, retries: bool = False):
    """A Prefect task running ``fn`` (a step of ``tcl.add_device``). Its inputs are the run's
    shared state (in-process objects): no caching, no result persistence."""
    return task(fn, name=name, cache_policy=NONE, persist_result=False,
                retry_condition_fn=_infrastructure if retries else None)


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
    event named) is only compared with it (``tcl.events.served_params``). ``started``: when
    the command started (epoch seconds; 0: the flow's start), for the table of step times."""
    try:
        params = served_params(params_file, event_params_file)
        check_device(params, device)
    except TclError as e:
        return refuse(e)
    run = steps.start_run(params, device, say=_say(get_run_logger()),
                          started=started or time.time())
    m = params.measure
    retry = {"retries": m.retries, "retry_delay_seconds": m.retry_delay_s}
    r, chosen = 0, select_task.with_options(**retry)(run, 0)
    while chosen is not None:
        measure_task.with_options(**retry)(run, r, chosen)
        r += 1
        chosen = select_task.with_options(**retry)(run, r) if r < steps.rounds(run) else None
    evaluation_task.with_options(**retry)(run)
    featurize_task(run)
    distill_task(run)
    result = register_task(run)
    plot = params.paths.reports_dir / "add-device" / f"{device}.png"
    text = result.markdown() + _embedded(_plot(result, plot))
    create_markdown_artifact(key=f"add-device-{_key(device)}", markdown=text,
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


def _plot(result, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    devices = list(result.metrics.get("devices", {}))
    top1 = [result.metrics["devices"][d].get("top1", 0) for d in devices]
    forgot = [(result.metrics.get("forgetting", {}).get(d) or {}).get("pairwise", {})
              .get("overall") or 0 for d in devices]
    fig, axes = plt.subplots(1, 2, figsize=(8, 3))
    axes[0].bar(devices, top1, color=["C1" if d == result.device else "C0" for d in devices])
    axes[0].set_ylabel("top-1, held-out networks")
    axes[0].set_ylim(0, 1)
    axes[1].bar(devices, forgot)
    axes[1].set_ylabel("forgetting (pairwise)")
    for ax in axes:
        ax.tick_params(axis="x", labelsize=7, rotation=20)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def _embedded(path) -> str:
    import base64

    data = base64.b64encode(path.read_bytes()).decode()
    return f"\n![scores](data:image/png;base64,{data})\n"


if __name__ == "__main__":
    sys.exit(main(add_device))
