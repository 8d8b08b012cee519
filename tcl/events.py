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
from pathlib import Path

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


def emit_device_added(device: str, params_file: str) -> bool:
    """Emit the event; True when it was sent (an event client is configured). With no
    PREFECT_API_URL but a running ``tcl serve``, it goes to that server, sent here and now
    (Prefect's background events worker would read the settings again in its own thread)."""
    import asyncio

    from prefect.events import Event, emit_event
    from prefect.events.clients import PrefectEventsClient
    from prefect.settings import PREFECT_API_URL

    resource = {"prefect.resource.id": device, "tcl.device": device}
    payload = {"params_file": str(params_file)}
    url = None if PREFECT_API_URL.value() else local_server()
    if url is None:
        return emit_event(event=DEVICE_ADDED, resource=resource, payload=payload) is not None

    async def send() -> None:
        async with PrefectEventsClient(api_url=url) as client:
            await client.emit(Event(event=DEVICE_ADDED, resource=resource, payload=payload))
    asyncio.run(send())
    return True
