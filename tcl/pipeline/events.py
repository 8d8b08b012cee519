"""Prefect events tcl emits, and how a command reacts to them with or without a server.

``tcl device add`` emits ``tcl.device.added`` (resource id: the device name; payload: the
params file). With a Prefect server (``PREFECT_API_URL``, or the one ``tcl serve`` starts on
loopback when none is configured: ``local_server``), the add-device deployment that
``tcl serve`` serves reacts to the event; on the embedded default with nothing serving, nothing
listens, so the command runs the add-device flow itself.

A served run uses only the params file (and so the data root) ``tcl serve`` was started with
(``bind_params``, ``served_params``): the event names the device, nothing else it carries
becomes a parameter (``TRIGGER_PARAMETERS``), and a run that names another params file is
refused before it reads anything.
"""
from __future__ import annotations

import json
import os
import urllib.request
from pathlib import Path

from ..config import TclError
from .params import Params, load_params

DEVICE_ADDED = "tcl.device.added"
ADD_DEVICE_DEPLOYMENT = "add-device/add-device"   # flow name / deployment name (deployments)
# The params file `tcl serve` was started with (absolute); the flow runs it starts inherit it.
SERVED_PARAMS = "TCL_SERVED_PARAMS"
# What a tcl.device.added event sets in the served add-device run: the device (its resource id)
# and the params file it names, only so that a mismatch is refused (``served_params``); an
# event without one (``prefect event emit``) renders "" instead of failing Prefect's action.
TRIGGER_PARAMETERS = {"device": "{{ event.resource.id }}",
                      "event_params_file": "{{ event.payload.params_file | default('') }}"}


def bind_params(params_file: str | Path) -> Params:
    """``tcl serve``: validate the params file and bind it as the only one the runs it starts
    may use (their parameters' default, and ``SERVED_PARAMS`` in the environment they inherit)."""
    params = load_params(params_file)
    os.environ[SERVED_PARAMS] = str(params.source.resolve())
    return params


def serving() -> bool:
    """Whether this process is ``tcl serve`` or a run it started."""
    return bool(os.environ.get(SERVED_PARAMS))


def served_params(params_file: str, event_params_file: str = "") -> Params:
    """The params of a flow run. In a run ``tcl serve`` started, only its bound file: a run
    parameter or an event naming another one (another data root) is refused before anything is
    read; elsewhere ``params_file``."""
    bound = os.environ.get(SERVED_PARAMS)
    if not bound:
        return load_params(params_file)
    for what, given in (("the run's params_file", params_file),
                        ("the event's params file", event_params_file)):
        if given and not _same_file(given, bound):
            raise TclError(f"{what} {given!r} is not {bound}, the params file this `tcl serve` "
                           "was started with: a served run uses only its own params and data "
                           "root, and an event names only the device (serve another data root "
                           "with its own `tcl serve --params FILE`)")
    return load_params(bound)


def _same_file(given: str, bound: str) -> bool:
    try:
        return given == bound or Path(given).resolve() == Path(bound)
    except (OSError, ValueError):    # a NUL byte, a symlink loop: not the bound file
        return False


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


def check_served_params(params_file: str) -> None:
    """Refuse, before anything is emitted, an add-device run the served deployment would
    refuse: none is served at the configured (or ``tcl serve``'s local) server, or it is bound
    to another params file (``served_params``)."""
    from prefect.client.orchestration import get_client
    from prefect.exceptions import ObjectNotFound
    from prefect.settings import PREFECT_API_URL, temporary_settings

    import httpx

    url = PREFECT_API_URL.value() or local_server()
    try:
        with temporary_settings(updates={PREFECT_API_URL: url}), \
                get_client(sync_client=True) as client:
            bound = client.read_deployment_by_name(ADD_DEVICE_DEPLOYMENT).parameters \
                .get("params_file", "")
    except ObjectNotFound:
        raise TclError(f"no add-device deployment is served at {url}: start `tcl serve "
                       f"--params {params_file}` first (or unset PREFECT_API_URL to run "
                       "the add-device run here); nothing registered or emitted") from None
    except (httpx.HTTPError, OSError) as e:
        raise TclError(f"the Prefect API at {url} does not answer ({type(e).__name__}: {e}); "
                       "nothing registered or emitted") from None
    if not _same_file(params_file, bound):
        raise TclError(f"the add-device deployment served at {url} is bound to {bound}, not "
                       f"{params_file}: it would refuse this run (pass --params {bound}, or "
                       f"serve this file with `tcl serve --params {params_file}`); nothing "
                       "registered or emitted")


def emit_device_added(device: str, params_file: str) -> bool:
    """Emit the event; True when it was sent (an event client is configured). With no
    PREFECT_API_URL but a running ``tcl serve``, it goes to that server, sent here and now
    (Prefect's background events worker would read the settings again in its own thread)."""
    import asyncio

    from prefect.events import Event, emit_event
    from prefect.events.clients import PrefectEventsClient
    from prefect.settings import PREFECT_API_URL

    resource = {"prefect.resource.id": device, "tcl.device": device}
    payload = {"params_file": str(Path(params_file).resolve())}   # what `tcl serve` compares
    url = None if PREFECT_API_URL.value() else local_server()
    if url is None:
        return emit_event(event=DEVICE_ADDED, resource=resource, payload=payload) is not None

    async def send() -> None:
        async with PrefectEventsClient(api_url=url) as client:
            await client.emit(Event(event=DEVICE_ADDED, resource=resource, payload=payload))
    asyncio.run(send())
    return True
