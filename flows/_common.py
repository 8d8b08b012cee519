"""What every flow module shares: Prefect defaults (set before Prefect is imported) and
the ``python -m flows.<name> --params FILE`` entry point."""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

PROJECT = Path(__file__).resolve().parent.parent


def prefect_defaults() -> None:
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")
    if "PREFECT_HOME" not in os.environ:
        home = PROJECT / ".prefect"
        home.mkdir(exist_ok=True)
        ignore = home / ".gitignore"
        if not ignore.exists():
            ignore.write_text("# Prefect's local state (ephemeral API database, logs)\n*\n")
        os.environ["PREFECT_HOME"] = str(home)


prefect_defaults()


def main(flow, argv: list[str] | None = None) -> int:
    """``python -m flows.<name> [--params FILE]``: run ``flow``; errors as one line, exit 2."""
    from tcl.config import TclError

    parser = argparse.ArgumentParser(prog=f"python -m flows.{flow.name}",
                                     description=(flow.description or "").split("\n")[0])
    parser.add_argument("--params", default="params.yaml", help="params file (default: params.yaml)")
    args = parser.parse_args(argv)
    os.environ.setdefault("TVM_LOG_LEVEL", "WARNING")
    try:
        flow(params_file=args.params)
    except TclError as e:
        print(f"{flow.name}: error: {e}", file=sys.stderr)
        return 2
    return 0


def map_over_tasks(task_fn, params) -> int:
    """``task_fn(params, task_ids)`` once per chunk of the pipeline's tasks, on the flow's task
    runner (``tcl.scale_out``); the sum of what the runs return."""
    from prefect import unmapped

    from tcl import pipeline, scale_out

    task_ids = pipeline.selected_tasks(params)["task_id"].to_list()
    futures = task_fn.map(unmapped(params), scale_out.chunks(task_ids, params))
    return sum(f.result() for f in futures)
