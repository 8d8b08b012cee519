"""Prefect events tcl emits, and how a command reacts to them with or without a server.

``tcl device add`` emits ``tcl.device.added`` (resource id: the device name; payload: the
params file). With a Prefect server configured (``PREFECT_API_URL``), the add-device deployment
that ``tcl serve`` serves reacts to the event; on the embedded default (no server) nothing
listens, so the command runs the add-device flow itself.
"""
from __future__ import annotations

DEVICE_ADDED = "tcl.device.added"


def server_configured() -> bool:
    from prefect.settings import PREFECT_API_URL

    return bool(PREFECT_API_URL.value())


def emit_device_added(device: str, params_file: str) -> bool:
    """Emit the event; True when it was sent (an event client is configured)."""
    from prefect.events import emit_event

    event = emit_event(event=DEVICE_ADDED, resource={"prefect.resource.id": device,
                                                     "tcl.device": device},
                       payload={"params_file": str(params_file)})
    return event is not None
