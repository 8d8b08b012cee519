"""What every command group of the ``tcl`` command shares: the parser class and argument types,
the data root and output paths, tables, and how a command's failure ends (one line, an exit
code). The bottom of tcl/cli/: it imports no command group."""
from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Callable

import polars as pl

from ..budget import budget_from_text
# MAX_SEED (tcl.config): the bound of every --seed, and Parser (tcl.config: flows/ parses with it
# too), which the command groups import from here
from ..config import (MAX_SEED, Parser, Paths, TclError, check_writable, data_root,  # noqa: F401
                      one_line)
from ..measure.interrupt import Interrupted
from ..pipeline.params import DEFAULT_FILE, load_params


def _paths(args, writes: bool = False, only_reads: bool = False) -> Paths:
    """The data root of --data, else $TCL_DATA, else ./data; a command that ``writes`` to it
    is refused a read-only one before any work (``check_writable``), and a command that
    ``only_reads`` it (query, status, the lists) one that does not exist: a mistyped root
    would answer with empty tables (and query made it, to write its catalog there)."""
    paths = Paths(data_root(args.data, "--data")) if args.data is not None else Paths.default()
    if paths.root.exists() and not paths.root.is_dir():
        raise TclError(f"data root {paths.root} is a file; --data (or $TCL_DATA) names a "
                       "directory")
    out_path(str(paths.root), "directory", "--data")   # a file above it
    if writes:
        check_writable(paths.root)
    if only_reads and not paths.root.is_dir():
        given = "--data" if args.data is not None else \
            "$TCL_DATA" if os.environ.get("TCL_DATA") is not None else "the default, ./data"
        raise TclError(f"data root {paths.root} does not exist (from {given}): check the path; "
                       "this command only reads a data root (commands that write one, such as "
                       "zoo, collect and import, make it)")
    return paths


def optional_params(given: str | None, paths: Paths | None = None):
    """The params file a command reads only for defaults: the one ``--params`` names, which
    must then exist, else params.yaml where it exists (None where not). Models unchecked. With
    ``paths``: None unless the file names that data root (a params file speaks for its own)."""
    if given is None and not Path(DEFAULT_FILE).exists():
        return None
    params = load_params(given or DEFAULT_FILE, check_models=False)
    return None if paths is not None and params.paths.root != paths.root else params


def out_path(text: str, kind: str, option: str = "--out") -> Path:
    """An output path given as ``option``, checked before any work: ``kind`` "file" or
    "directory", refused when the path (or a folder above it) is the other kind."""
    out = Path(text)
    if kind == "file" and out.is_dir():
        raise TclError(f"{option} {out} is a directory; it names the file to write")
    if kind == "directory" and out.exists() and not out.is_dir():
        raise TclError(f"{option} {out} is a file; it names the directory to write into")
    for above in out.parents:
        if above.exists():
            if not above.is_dir():
                raise TclError(f"{option} {out}: {above} is a file, not a directory")
            break
    return out


def int_in(low: int, high: int) -> Callable[[str], int]:
    """An argparse type: an integer in [low, high], with a message naming the range. Every
    number an option takes has both ends (``low`` and ``high`` stay on the function)."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be [{low}, {high}], got {value}")
        return value
    parse.low, parse.high = low, high
    return parse


def float_in(low: float, high: float, low_open: bool = False) -> Callable[[str], float]:
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        if not (low < value if low_open else low <= value) or not value <= high:
            raise argparse.ArgumentTypeError(
                f"must lie in {'(' if low_open else '['}{low}, {high}], got {text}")
        return value
    parse.low, parse.high = low, high
    return parse


def _print_frame(frame) -> None:
    with pl.Config(tbl_rows=200, tbl_cols=30, fmt_str_lengths=60, tbl_width_chars=200):
        print(frame)


def csv_text(frame: pl.DataFrame) -> str:
    """``frame`` as CSV. CSV holds no nested values: a list, array or struct column becomes its
    values as JSON text (a null stays an empty field)."""
    def as_json(column: str) -> pl.Series:
        values = frame[column].to_list()
        return pl.Series(column, [None if v is None else json.dumps(v, default=str)
                                  for v in values], dtype=pl.String)

    nested = [c for c, t in frame.schema.items() if t.is_nested()]
    return frame.with_columns(as_json(c) for c in nested).write_csv()


def print_table(frame: pl.DataFrame) -> None:
    """``frame`` as plain aligned columns, no borders or types: every row, every column."""
    text = [[str(c) for c in frame.columns]] + \
        [["-" if v is None else str(v) for v in row] for row in frame.iter_rows()]
    widths = [max(len(r[i]) for r in text) for i in range(len(frame.columns))]
    for r in text:
        print("  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip())


def _zoo_tasks(paths: Paths, networks: list[str] | None, split: str = "all",
               max_tasks: int | None = None, small: bool = False, extract: bool = True):
    """Tasks of the selected networks (extracted into the zoo first where needed), heaviest
    first; ``max_tasks`` caps each split, as ``sample.max_*_tasks`` do in params.yaml.
    ``extract=False`` (a dry run) writes nothing: networks not extracted yet are named and left
    out."""
    # lazy: torch (the zoo's networks) costs ~2.6 s at import; `tcl --help` needs none
    from ..zoo.extract import build_zoo, load_networks, select_tasks
    from ..zoo.networks import zoo_instances
    from ..zoo.user import user_networks

    instances = zoo_instances(networks, small=small, user=user_networks(paths))
    if extract:
        build_zoo(paths, instances=instances)
    else:
        done = set(load_networks(paths)["network_key"].to_list())
        missing = [i.key for i in instances if i.key not in done]
        if missing:
            print(f"not counted: {len(missing)} network instances not extracted yet "
                  f"({', '.join(missing[:5])}{', ...' if len(missing) > 5 else ''}); "
                  "the run extracts them first (or `tcl zoo`)")
        instances = [i for i in instances if i.key in done]
    tasks = select_tasks(paths, [i.key for i in instances], max_tasks, max_tasks)
    if split != "all":
        tasks = tasks.filter(pl.col("holdout") == (split == "holdout"))
    return tasks


def budget_arg(text: str) -> int | float:
    """``--budget``: a count or a share of the pool (``tcl.budget``'s rule)."""
    try:
        return budget_from_text(text)
    except TclError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def any_device_flag(parser: argparse.ArgumentParser) -> None:
    """--any-device, the same on every command that takes a model (tcl.predict's
    check_model_device refuses another device's model without it)."""
    parser.add_argument("--any-device", action="store_true",
                        help="accept a model made for another device (its scores rank by "
                             "that device's latencies)")

def network_selection(sp: argparse.ArgumentParser) -> None:
    """--networks and --small: which networks' tasks a command takes (zoo, collect)."""
    sp.add_argument("--networks", nargs="+", help="network names (default: the whole zoo)")
    sp.add_argument("--small", action="store_true", help="reduced input shapes (tests)")


def _note_sigint(seen: list[int]):
    """Ctrl-C raises KeyboardInterrupt as usual, and is noted in ``seen``: TVM hands a
    KeyboardInterrupt raised inside its callbacks (a cost model, a measure callback: `tcl
    tune`) back as a bare RuntimeError, which the note turns into the interrupt it was.
    Returns the function that restores the previous handler."""
    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        return lambda: None   # SIGINT ignored (nohup) or handled by an embedding program

    def handle(signum: int, _frame) -> None:
        seen.append(signum)
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, handle)
    return lambda: signal.signal(signal.SIGINT, signal.default_int_handler)


def _interrupted() -> int:
    print("tcl: interrupted; finished work is stored, run the command again to resume",
          file=sys.stderr)
    return 130


def _run(args, seen: list[int]) -> int:
    try:
        code = args.func(args) or 0
        # a library that caught the KeyboardInterrupt and carried on (MetaSchedule's search
        # does, in places): the user still asked to stop, and the result may be cut short
        return _interrupted() if seen else code
    except Interrupted as e:
        print(f"tcl: {one_line(e)}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        return _interrupted()
    except BrokenPipeError:  # output piped into `head` and the like
        return 0
    except Exception as e:
        if seen:   # whatever a library made of the interrupt
            return _interrupted()
        if isinstance(e, TclError):
            print(f"tcl: error: {one_line(e)}", file=sys.stderr)
            return 2
        if isinstance(e, OSError) and e.filename is not None and \
                not os.environ.get("TCL_DEBUG"):
            # the file system refused a path: permissions, a full disk, a file for a folder
            print(f"tcl: error: {e.filename}: {e.strerror or e}", file=sys.stderr)
            return 2
        return _internal(e)


def _internal(e: Exception) -> int:
    if os.environ.get("TCL_DEBUG"):
        raise e
    print(f"tcl: internal error: {type(e).__name__}: {one_line(e)[:500]} "
          "(set TCL_DEBUG=1 for the traceback)", file=sys.stderr)
    return 1


def _no_data(args) -> None:
    """The pipeline's commands take the data root from the params file: --data is refused
    rather than ignored."""
    if args.data is not None:
        raise TclError(f"`tcl {args.command}` takes its data root from the params file's "
                       f"`data` key ({args.params}), not --data")
