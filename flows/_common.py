"""What every flow module shares: Prefect defaults (set before Prefect is imported) and
the ``python -m flows.<name> --params FILE`` entry point."""
from __future__ import annotations

import inspect
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:   # Prefect is imported only after prefect_defaults()
    from prefect.states import State

PROJECT = Path(__file__).resolve().parent.parent


def prefect_defaults() -> None:
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")
    # Prefect retries a request 5 times with 2**n s back-off: a server that went away held a
    # run for about 5 minutes of retries before it failed. Every stage resumes from the store,
    # so 2 retries (6 s: a restart blip) and a clear error serve better.
    os.environ.setdefault("PREFECT_CLIENT_MAX_RETRIES", "2")
    if "PREFECT_HOME" not in os.environ:
        home = PROJECT / ".prefect"
        home.mkdir(exist_ok=True)
        ignore = home / ".gitignore"
        if not ignore.exists():
            ignore.write_text("# Prefect's local state (ephemeral API database, logs)\n*\n")
        os.environ["PREFECT_HOME"] = str(home)


prefect_defaults()


def main(flow, argv: list[str] | None = None) -> int:
    """``python -m flows.<name> [--params FILE] [--device NAME]``: run ``flow``; errors as one
    line, exit 2. The params file (and the device, for a flow that takes one) is validated
    before the flow starts, so bad input never reaches Prefect (which would log a traceback)."""
    from tcl.add_device import check_device
    from tcl.cli import Parser, _one_line
    from tcl.config import TclError
    from tcl.params import load_params

    parser = Parser(prog=f"python -m flows.{flow.name.replace('-', '_')}",
                    description=(flow.description or "").split("\n")[0])
    parser.add_argument("--params", default="params.yaml", help="params file (default: params.yaml)")
    takes_device = "device" in inspect.signature(flow.fn).parameters
    if takes_device:
        parser.add_argument("--device", required=True, help="a registered device's name")
    args = parser.parse_args(argv)
    os.environ.setdefault("TVM_LOG_LEVEL", "WARNING")
    try:
        params = load_params(args.params)
        extra = {"device": check_device(params, args.device).name} if takes_device else {}
        run_flow(flow, params_file=args.params, **extra)
    except TclError as e:
        print(f"{flow.name}: error: {_one_line(e)}", file=sys.stderr)
        return 2
    return 0


def refuse(error: Exception) -> State:
    """What a flow does with bad input it was given: in a run ``tcl serve`` started, a Failed
    state whose message is the refusal, also logged as one error line (the run did nothing, so
    no traceback); anywhere else the error is raised for the caller to print."""
    from prefect import get_run_logger
    from prefect.states import Failed

    from tcl.events import serving

    if not serving():
        raise error
    message = f"refused: {error}"
    get_run_logger().error(message)
    return Failed(message=message)


def run_flow(flow, **parameters):
    """``flow(**parameters)``; a Prefect API that goes away mid-run is a TclError that names it
    (what the run measured is in the store already: running again resumes)."""
    import httpx

    from tcl.config import TclError

    try:
        return flow(**parameters)
    except httpx.TransportError as e:
        from prefect.settings import PREFECT_API_URL

        api = PREFECT_API_URL.value() or "the ephemeral Prefect API"
        raise TclError(f"flow {flow.name}: the Prefect API at {api} went away mid-run "
                       f"({type(e).__name__}: {e}); what it stored is kept: run it again to "
                       "resume (with no PREFECT_API_URL it runs without a server)") from e


def map_over_tasks(task_fn, params) -> int:
    """``task_fn(params, task_ids)`` once per chunk of the pipeline's tasks, on the flow's task
    runner (``tcl.scale_out``); the sum of what the runs return."""
    from prefect import unmapped

    from tcl import pipeline, scale_out

    task_ids = pipeline.selected_tasks(params)["task_id"].to_list()
    futures = task_fn.map(unmapped(params), scale_out.chunks(task_ids, params))
    return sum(f.result() for f in futures)
