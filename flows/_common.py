"""What every flow module shares: Prefect's defaults (``tcl.pipeline.prefect_setup``, set on import,
before Prefect is imported), the ``python -m flows.<name> --params FILE`` entry point and the
one retry rule of the flows' tasks (``transient``)."""
from __future__ import annotations

import inspect
import os
import sys

from tcl.config import TclError
from tcl.measure.interrupt import InfrastructureFailure
from tcl.pipeline.prefect_setup import prefect_defaults, refuse, run_flow, run_flow_command

__all__ = ["main", "map_over_tasks", "prefect_defaults", "refuse", "run_flow", "transient"]


def main(flow, argv: list[str] | None = None) -> int:
    """``python -m flows.<name> [--params FILE] [--device NAME]``: run ``flow``; a failure is
    one line (the traceback goes to the flow's log file, which the line names). The params
    file (and the device, for a flow that takes one) is validated before the flow starts, so
    bad input never reaches Prefect (which would log a traceback)."""
    from tcl.config import Parser, one_line
    from tcl.pipeline.add_device import check_device
    from tcl.pipeline.params import load_params

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
    except TclError as e:
        print(f"{flow.name}: error: {one_line(e)}", file=sys.stderr)
        return 2
    return run_flow_command(flow, params.paths, params_file=args.params, **extra)


def map_over_tasks(task_fn, params, task_ids: list[str]) -> int:
    """``task_fn(params, chunk)`` once per chunk of ``task_ids`` (the stage's own tasks: the
    same ones its ``tcl stage`` command covers), on the flow's task runner
    (``tcl.pipeline.scale_out``); the sum of what the runs return."""
    from prefect import unmapped

    from tcl.pipeline import scale_out

    futures = task_fn.map(unmapped(params), scale_out.chunks(task_ids, params))
    return sum(f.result() for f in futures)


def transient(_task, _task_run, state) -> bool:
    """The retry condition of every flow task that measures: retry a failure that is not the
    input's, the tracker's or runner's (``InfrastructureFailure``) or an unexpected error; what
    was stored is kept, and the step resumes from the store. Bad input, a host that cannot run
    the device and an interrupt (each a ``TclError``) fail at once."""
    try:
        state.result()
    except InfrastructureFailure:
        return True
    except TclError:
        return False
    except Exception:
        return True
    return False
