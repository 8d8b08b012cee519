"""``tcl serve``: serve the add-device deployment (triggered by the ``tcl.device.added`` event)
and the refresh deployment (on ``add_device.refresh_cron``) until interrupted."""
from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

from flows._common import prefect_defaults

prefect_defaults()


def deployments(params_file: str) -> list:
    """The two deployments, bound to ``params_file`` (``tcl.events.bind_params``): an event
    sets only the device (``TRIGGER_PARAMETERS``), and the runs refuse any other params file."""
    from prefect.events import DeploymentEventTrigger

    from flows.add_device import add_device
    from flows.refresh import refresh
    from tcl.events import DEVICE_ADDED, TRIGGER_PARAMETERS, bind_params

    params = bind_params(params_file)
    bound = {"params_file": str(params.source.resolve())}
    trigger = DeploymentEventTrigger(expect={DEVICE_ADDED}, parameters=dict(TRIGGER_PARAMETERS))
    return [add_device.to_deployment(name="add-device", triggers=[trigger], parameters=bound),
            refresh.to_deployment(name="refresh", cron=params.add_device.refresh_cron,
                                  parameters=bound)]


def serve(params_file: str = "params.yaml") -> None:
    """Serve until interrupted. With no PREFECT_API_URL (the embedded default) an ephemeral API
    would run no scheduler and hear no other process's events, so a Prefect server is started
    on loopback for as long as this serves, and ``tcl.events.local_server`` tells the other
    tcl commands of this PREFECT_HOME where it is."""
    from prefect import serve as prefect_serve
    from prefect.settings import PREFECT_API_URL, temporary_settings

    deps = deployments(params_file)     # params validated before anything starts
    if PREFECT_API_URL.value():
        prefect_serve(*deps)
        return
    import signal
    import sys

    # SIGTERM ends serving like Ctrl-C does, so the server started here is stopped too
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    with local_prefect_server() as url, temporary_settings(updates={PREFECT_API_URL: url}):
        print(f"tcl serve: no PREFECT_API_URL; started a Prefect server at {url} "
              f"(UI: {url.removesuffix('/api')})", flush=True)
        prefect_serve(*deps)


@contextmanager
def local_prefect_server(timeout_s: float = 180.0) -> Iterator[str]:
    """``prefect server start`` on a free loopback port, stopped (and unregistered) on exit."""
    import json
    import os
    import signal
    import socket
    import subprocess
    import sys
    import time
    import urllib.request
    from pathlib import Path

    from tcl.config import TclError
    from tcl.events import serve_file

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
