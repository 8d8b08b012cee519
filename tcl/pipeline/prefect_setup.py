"""What tcl needs around Prefect, for its own commands and for ``flows/``: Prefect's defaults
(set on import, before Prefect is imported), running a flow, and refusing bad input in a
served run. Import this module before ``prefect``.

``PREFECT_HOME``, unless set, is ``.prefect/`` under the default data root (``$TCL_DATA``, else
``data/`` of the working directory): Prefect's local state (the ephemeral API's database, logs,
``tcl serve``'s note) lives beside the data it ran on, never inside the installed package.
Where that cannot be written (a data root that is a file, a read-only directory), Prefect's own
default (``~/.prefect``) stays.
"""
from __future__ import annotations

import os
from typing import TYPE_CHECKING

from ..config import Paths, TclError
from .events import serving

if TYPE_CHECKING:   # Prefect is imported only after prefect_defaults()
    from prefect.states import State


def prefect_defaults() -> None:
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")
    # Prefect retries a request 5 times with 2**n s back-off: a server that went away held a
    # run for about 5 minutes of retries before it failed. Every stage resumes from the store,
    # so 2 retries (6 s: a restart blip) and a clear error serve better.
    os.environ.setdefault("PREFECT_CLIENT_MAX_RETRIES", "2")
    if "PREFECT_HOME" not in os.environ:
        home = Paths.default().prefect_home
        try:
            home.mkdir(parents=True, exist_ok=True)
            ignore = home / ".gitignore"
            if not ignore.exists():
                ignore.write_text("# Prefect's local state (ephemeral API database, logs)\n*\n")
        except OSError:   # no writable data root here: Prefect's own default (~/.prefect)
            return
        os.environ["PREFECT_HOME"] = str(home)


prefect_defaults()


def refuse(error: Exception) -> State:
    """What a flow does with bad input it was given: in a run ``tcl serve`` started, a Failed
    state whose message is the refusal, also logged as one error line (the run did nothing, so
    no traceback); anywhere else the error is raised for the caller to print."""
    from prefect import get_run_logger
    from prefect.states import Failed

    if not serving():
        raise error
    message = f"refused: {error}"
    get_run_logger().error(message)
    return Failed(message=message)


def run_flow(flow, **parameters):
    """``flow(**parameters)``; a Prefect API that goes away mid-run is a TclError that names it
    (what the run measured is in the store already: running again resumes)."""
    import httpx

    try:
        return flow(**parameters)
    except httpx.TransportError as e:
        from prefect.settings import PREFECT_API_URL

        api = PREFECT_API_URL.value() or "the ephemeral Prefect API"
        raise TclError(f"flow {flow.name}: the Prefect API at {api} went away mid-run "
                       f"({type(e).__name__}: {e}); what it stored is kept: run it again to "
                       "resume (with no PREFECT_API_URL it runs without a server)") from e
