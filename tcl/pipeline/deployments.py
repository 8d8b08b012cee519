"""``tcl serve``'s deployments and server: the add-device flow (triggered by the
``tcl.device.added`` event) and the refresh flow (on ``add_device.refresh_cron``), bound to one
params file, and a Prefect server on loopback for as long as they are served when none is
configured. The flows themselves live in ``flows/`` (``flows.add_device``, ``flows.refresh``);
``tcl serve`` passes them in, found by their names (``prefect_setup.flow_named``), so this
module never imports ``flows``.
"""
from __future__ import annotations

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

from . import prefect_setup  # noqa: F401,I001  (first: sets Prefect's defaults before it loads)
from prefect import Flow
from prefect import serve as prefect_serve
from prefect.events import DeploymentEventTrigger
from prefect.settings import PREFECT_API_URL, temporary_settings
from prefect.types.entrypoint import EntrypointType
from prefect.utilities.callables import ParameterSchema

from ..config import TclError, write_text
from .events import DEVICE_ADDED, TRIGGER_PARAMETERS, bind_params, serve_file


def deployments(params_file: str, add_device: Flow, refresh: Flow) -> list:
    """The deployments of the two flows, bound to ``params_file``
    (``tcl.pipeline.events.bind_params``): ``add_device`` on the ``tcl.device.added`` event,
    which sets only the device (``TRIGGER_PARAMETERS``), ``refresh`` on
    ``add_device.refresh_cron``; the runs refuse any other params file."""
    params = bind_params(params_file)
    bound = {"params_file": str(params.source.resolve())}
    trigger = DeploymentEventTrigger(expect={DEVICE_ADDED}, parameters=dict(TRIGGER_PARAMETERS))
    # By module path: a run imports the flow's module (flows.add_device) as such. By file path
    # Prefect would load the file as a package of its own, so every module it imports would
    # load a second time beside the installed ones (two Pool classes, two registries...).
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


def serve(params_file: str, add_device: Flow, refresh: Flow) -> None:
    """Serve the two flows' deployments until interrupted. With no PREFECT_API_URL (the embedded
    default) an ephemeral API would run no scheduler and hear no other process's events, so a
    Prefect server is started on loopback for as long as this serves, and
    ``tcl.pipeline.events.local_server`` tells the other tcl commands of this PREFECT_HOME where
    it is."""
    deps = deployments(params_file, add_device, refresh)   # params validated before anything
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
        write_text(serve_file(), json.dumps({"api_url": url, "pid": os.getpid()}) + "\n",
                   "served-server file")
        yield url
    finally:
        serve_file().unlink(missing_ok=True)
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGTERM)
            try:
                server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(server.pid, signal.SIGKILL)
