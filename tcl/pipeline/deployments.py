"""The Prefect flows tcl itself runs or serves, and ``serve``: the add-device flow (run by
``tcl device add`` when no server listens, or by the ``tcl.device.added`` event), the refresh
flow (on ``add_device.refresh_cron``) and their deployments. ``flows/`` holds thin entry points
over these (``python -m flows.add_device``); tcl never imports ``flows``.

Add-device: a newly registered device gets selected, measured, distilled, evaluated and
registered, one Prefect task per step of ``tcl.pipeline.add_device`` (select, measure,
evaluation set, featurize, distill, register: each with its own state and log lines; the steps
that resume from the store retry after an infrastructure failure), and the result is published
as a Markdown artifact (table, step times and plot). Refresh: whatever is new gets its model;
every device of ``continual.sequence`` is re-distilled only when its records, teacher or
settings changed, and every device added later likewise from its own teacher; with nothing new,
nothing is trained and nothing is registered.
"""
from __future__ import annotations

import base64
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from .prefect_setup import refuse  # noqa: I001  (first: sets Prefect's defaults before it loads)
from prefect import flow, get_run_logger, task
from prefect import serve as prefect_serve
from prefect.artifacts import create_markdown_artifact
from prefect.cache_policies import NONE
from prefect.events import DeploymentEventTrigger
from prefect.exceptions import MissingContextError
from prefect.settings import PREFECT_API_URL, temporary_settings
from prefect.types.entrypoint import EntrypointType
from prefect.utilities.callables import ParameterSchema

from ..config import TclError
from ..measure.interrupt import InfrastructureFailure
from . import add_device as steps
from .add_device import check_device
from .events import (DEVICE_ADDED, TRIGGER_PARAMETERS, bind_params, serve_file,
                     served_params)
from .refresh import refresh_all


def _infrastructure(task_, task_run, state) -> bool:
    """Retry only what the tracker or runner failed (what was stored is kept and skipped);
    bad input and interrupts fail at once."""
    return isinstance(state.data, InfrastructureFailure)


def _step(name: str, fn, retries: bool = False):
    """A Prefect task running ``fn`` (a step of ``tcl.pipeline.add_device``). Its inputs are the
    run's shared state (in-process objects): no caching, no result persistence."""
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
    event named) is only compared with it (``tcl.pipeline.events.served_params``). ``started``: when
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
    steps.select_and_measure_rounds(run, select_task.with_options(**retry),
                                    measure_task.with_options(**retry))
    evaluation_task.with_options(**retry)(run)
    featurize_task(run)
    distill_task(run)
    result = register_task(run)
    plot = params.paths.add_device_plot(device)
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
    data = base64.b64encode(path.read_bytes()).decode()
    return f"\n![scores](data:image/png;base64,{data})\n"


@flow(name="refresh", log_prints=True)
def refresh(params_file: str = "params.yaml") -> dict:
    """Give whatever is new its model (``tcl.pipeline.refresh.refresh_all``)."""
    try:   # served: only the params file `tcl serve` bound
        params = served_params(params_file)
    except TclError as e:
        return refuse(e)
    return refresh_all(params)


def deployments(params_file: str) -> list:
    """The two deployments, bound to ``params_file`` (``tcl.pipeline.events.bind_params``): an event
    sets only the device (``TRIGGER_PARAMETERS``), and the runs refuse any other params file."""
    params = bind_params(params_file)
    bound = {"params_file": str(params.source.resolve())}
    trigger = DeploymentEventTrigger(expect={DEVICE_ADDED}, parameters=dict(TRIGGER_PARAMETERS))
    # By module path: a run imports tcl.pipeline.deployments as such. By file path Prefect would
    # load this file as a package of its own ("deployments"), so every tcl module it imports
    # relatively would load a second time beside tcl's (two Pool classes, two registries...).
    module = EntrypointType.MODULE_PATH
    return [_closed(add_device.to_deployment(name="add-device", triggers=[trigger],
                                             parameters=bound, entrypoint_type=module)),
            _closed(refresh.to_deployment(name="refresh", cron=params.add_device.refresh_cron,
                                          parameters=bound, entrypoint_type=module))]


class _ClosedSchema(ParameterSchema):
    additionalProperties: bool = False   # JSON Schema's name for it


def _closed(deployment):
    """``deployment`` with a parameter schema that admits its flow's parameters only. Prefect's
    schema admits any, and a run created through the API with a parameter the flow does not
    take crashed in the served process (Prefect's engine binds the parameters before the flow
    can refuse them); with ``enforce_parameter_schema`` (Prefect's default) the API now refuses
    to create such a run, naming the parameter. Prefect keeps the schema in a private
    attribute, with no public way to set it."""
    schema = deployment._parameter_openapi_schema
    deployment._parameter_openapi_schema = _ClosedSchema(**schema.model_dump(),
                                                         additionalProperties=False)
    return deployment


def serve(params_file: str = "params.yaml") -> None:
    """Serve until interrupted. With no PREFECT_API_URL (the embedded default) an ephemeral API
    would run no scheduler and hear no other process's events, so a Prefect server is started
    on loopback for as long as this serves, and ``tcl.pipeline.events.local_server`` tells the other
    tcl commands of this PREFECT_HOME where it is."""
    deps = deployments(params_file)     # params validated before anything starts
    if PREFECT_API_URL.value():
        prefect_serve(*deps)
        return
    # SIGTERM ends serving like Ctrl-C does, so the server started here is stopped too
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    with local_prefect_server() as url, temporary_settings(updates={PREFECT_API_URL: url}):
        print(f"tcl serve: no PREFECT_API_URL; started a Prefect server at {url} "
              f"(UI: {url.removesuffix('/api')})", flush=True)
        prefect_serve(*deps)


@contextmanager
def local_prefect_server(timeout_s: float = 180.0) -> Iterator[str]:
    """``prefect server start`` on a free loopback port, stopped (and unregistered) on exit."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}/api"
    log = serve_file().with_suffix(".log")
    with open(log, "ab") as out:
        server = subprocess.Popen([str(Path(sys.executable).parent / "prefect"), "server",
                                   "start", "--host", "127.0.0.1", "--port", str(port)],
                                  stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        end = time.time() + timeout_s
        while True:
            try:
                with urllib.request.urlopen(f"{url}/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if server.poll() is not None or time.time() > end:
                raise TclError(f"the Prefect server tcl serve started did not come up "
                               f"(see {log})")
            time.sleep(1)
        serve_file().write_text(json.dumps({"api_url": url, "pid": os.getpid()}) + "\n")
        yield url
    finally:
        serve_file().unlink(missing_ok=True)
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGTERM)
            try:
                server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(server.pid, signal.SIGKILL)
