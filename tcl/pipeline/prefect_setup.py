"""What tcl needs around Prefect, for its own commands and for ``flows/``: Prefect's defaults
(set on import, before Prefect is imported), a flow by its name (``flow_named``), running a
flow, and refusing bad input in a served run. Import this module before ``prefect``.

``PREFECT_HOME``, unless set, is ``.prefect/`` under the default data root (``$TCL_DATA``, else
``data/`` of the working directory): Prefect's local state (the ephemeral API's database, logs,
``tcl serve``'s note) lives beside the data it ran on, never inside the installed package.
Where that cannot be written (a data root that is a file, a read-only directory), Prefect's own
default (``~/.prefect``) stays.
"""
from __future__ import annotations

import logging
import os
import traceback
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

from ..config import Paths, TclError, one_line, write_text
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
        try:
            home = Paths.default().prefect_home
            home.mkdir(parents=True, exist_ok=True)
            ignore = home / ".gitignore"
            if not ignore.exists():
                write_text(ignore, "# Prefect's local state (ephemeral API database, logs)\n*\n",
                           "Prefect home's .gitignore")
        except (OSError, TclError):   # no writable data root here (or an empty TCL_DATA, which
            return                    # the command refuses itself): Prefect's own ~/.prefect
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
    for name in ("prefect.flow_runs", "prefect.engine"):   # once per logger (same function)
        logging.getLogger(name).addFilter(_not_a_refusal)
    return Failed(message=message)


def _not_a_refusal(record: logging.LogRecord) -> bool:
    """False for Prefect's record of a refusal (``refuse``): the engine raises the Failed
    state's message once more after the flow returned it and logs it with a 40-line traceback
    ("Engine execution exited with unexpected exception"), which `tcl serve` printed for every
    run it refused. The refusal has its one line already."""
    from prefect.exceptions import FailedRun

    error = record.exc_info[1] if record.exc_info else None
    return not (isinstance(error, FailedRun) and str(error).startswith("refused: "))


FLOWS = "tcl.flows"   # the entry-point group of the flows (pyproject.toml)


def flow_named(name: str):
    """The Prefect flow registered as ``name`` ("add-device", "refresh", ...): the registry of
    flows by name is the installed package's ``tcl.flows`` entry points (pyproject.toml lists
    every flow of ``flows/``). So the library and its CLI start a flow without importing
    ``flows/``, which sits above them and imports them."""
    from importlib.metadata import entry_points

    found = list(entry_points(group=FLOWS, name=name))
    if not found:
        installed = sorted({e.name for e in entry_points(group=FLOWS)})
        raise TclError(f"no flow named {name!r} is installed (installed: "
                       f"{', '.join(installed) or 'none'}): the flows are pyproject.toml's "
                       f"{FLOWS!r} entry points; install tcl again (pip install -e .)")
    return found[0].load()


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


class _WithoutTraceback(logging.Formatter):
    """A console handler's own formatter, minus the traceback: the log file keeps it."""

    def __init__(self, inner: logging.Formatter | None):
        super().__init__()
        self.inner = inner or logging.Formatter()

    def format(self, record: logging.LogRecord) -> str:
        saved = record.exc_info, record.exc_text, record.stack_info
        record.exc_info = record.exc_text = record.stack_info = None
        try:
            return self.inner.format(record)
        finally:
            record.exc_info, record.exc_text, record.stack_info = saved


def _console_handlers() -> list[tuple[logging.Logger, logging.Handler]]:
    loggers = [logging.getLogger()] + [logging.getLogger(name)
                                       for name in list(logging.root.manager.loggerDict)]
    return [(lg, h) for lg in loggers for h in lg.handlers
            if isinstance(h, logging.StreamHandler) and not isinstance(h, logging.FileHandler)]


@contextmanager
def tracebacks_to(log: Path) -> Iterator[None]:
    """Within: every console log handler prints its records without their tracebacks, and
    every record goes in full to ``log`` (rewritten: it holds the last run)."""
    import prefect.logging.configuration   # Prefect's console handlers exist once it is set up

    prefect.logging.configuration.setup_logging()
    log.parent.mkdir(parents=True, exist_ok=True)
    to_file = logging.FileHandler(log, mode="w", encoding="utf-8")
    to_file.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    consoles = _console_handlers()
    formatters = [h.formatter for _, h in consoles]
    for lg in {id(lg): lg for lg, _ in consoles}.values():
        lg.addHandler(to_file)
    for _, handler in consoles:
        handler.setFormatter(_WithoutTraceback(handler.formatter))
    try:
        yield
    finally:
        for (lg, handler), formatter in zip(consoles, formatters):
            handler.setFormatter(formatter)
            if to_file in lg.handlers:
                lg.removeHandler(to_file)
        to_file.close()


def run_flow_command(flow, paths: Paths, **parameters) -> int:
    """``run_flow`` for a command line (``python -m flows.<name>``): a failure is one line on
    stderr that says what failed and what to do, with the traceback in the flow's log file
    (``Paths.logs_dir``), which the line names. Exit 0, 2 (a TclError: the user can act on
    it) or 1 (an internal error)."""
    import sys

    log = paths.logs_dir / f"{flow.name}.log"
    with tracebacks_to(log):
        try:
            run_flow(flow, **parameters)
            return 0
        except Exception as e:
            with log.open("a", encoding="utf-8") as f:
                f.write("".join(traceback.format_exception(e)))
            if isinstance(e, TclError):
                print(f"{flow.name}: error: {one_line(e)} (log: {log})", file=sys.stderr)
                return 2
            print(f"{flow.name}: internal error: {type(e).__name__}: {one_line(e)[:500]} "
                  f"(traceback in {log}; please report it with that file)", file=sys.stderr)
            return 1
