"""Prefect events tcl emits, and how a command reacts to them with or without a server.

``tcl device add`` emits ``tcl.device.added`` (resource id: the device name; payload: the
params file). With a Prefect server (``PREFECT_API_URL``, or the one ``tcl serve`` starts on
loopback when none is configured: ``local_server``), the add-device deployment that
``tcl serve`` serves reacts to the event; on the embedded default with nothing serving, nothing
listens, so the command runs the add-device flow itself.
"""
from __future__ import annotations

import json
import os
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

DEVICE_ADDED = "tcl.device.added"


def serve_file() -> Path:
    """Where ``tcl serve`` in ephemeral mode says which server it started (in PREFECT_HOME)."""
    from prefect.settings import PREFECT_HOME

    return Path(PREFECT_HOME.value()) / "tcl-serve.json"


def local_server() -> str | None:
    """The API URL of the server a running ``tcl serve`` started here, if it still answers."""
    f = serve_file()
    try:
        info = json.loads(f.read_text())
        os.kill(int(info["pid"]), 0)           # the serving process is alive
        url = str(info["api_url"])
        with urllib.request.urlopen(f"{url}/health", timeout=2) as r:
            return url if r.status == 200 else None
    except (OSError, ValueError, KeyError, TypeError):
        return None


def server_configured() -> bool:
    from prefect.settings import PREFECT_API_URL

    return bool(PREFECT_API_URL.value()) or local_server() is not None


@contextmanager
def api_of_local_server() -> Iterator[None]:
    """Talk to ``local_server()`` in this block when no PREFECT_API_URL is set."""
    from prefect.settings import PREFECT_API_URL, temporary_settings

    url = None if PREFECT_API_URL.value() else local_server()
    if url is None:
        yield
        return
    with temporary_settings(updates={PREFECT_API_URL: url}):
        yield


def emit_device_added(device: str, params_file: str) -> bool:
    """Emit the event; True when it was sent (an event client is configured)."""
    from prefect.events import emit_event

    with api_of_local_server():
        event = emit_event(event=DEVICE_ADDED, resource={"prefect.resource.id": device,
                                                         "tcl.device": device},
                           payload={"params_file": str(params_file)})
    return event is not None
