"""The ``tcl`` command. Each subcommand is a thin wrapper over one library function."""
from __future__ import annotations

import argparse
import os

# Every command group is imported here, at the top: a group whose import fails stops the
# command with its traceback, rather than leaving its commands out of `tcl --help`.
from . import data, device, models, pipeline, serve, status, tune, zoo
from .common import Parser, _interrupted, _note_sigint, _run, _zoo_tasks

# what benchmarks/ import from tcl.cli, beside main and build_parser
__all__ = ["_zoo_tasks", "build_parser", "main"]

# the command groups, in the order `tcl --help` lists their commands
GROUPS = (device, zoo, data, models, tune, status, serve, pipeline)


def build_parser() -> argparse.ArgumentParser:
    p = Parser(prog="tcl", description=__doc__)
    p.add_argument("--data", help="data root (default: $TCL_DATA or ./data)")
    sub = p.add_subparsers(dest="command", required=True, parser_class=Parser)
    for group in GROUPS:
        group.register(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    """Run the CLI. Every failure ends in one line on stderr and a non-zero exit code: 2 for a
    problem the user can fix, 128 + signal for an interrupt, 1 for an internal error (set
    TCL_DEBUG=1 for its traceback)."""
    os.environ.setdefault("TVM_LOG_LEVEL", "WARNING")
    seen: list[int] = []
    restore = _note_sigint(seen)
    try:
        return _run(build_parser().parse_args(argv), seen)
    except KeyboardInterrupt:   # while parsing or importing, before _run
        return _interrupted()
    finally:
        restore()
