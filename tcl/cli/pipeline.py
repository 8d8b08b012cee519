"""The pipeline's subcommands: ``tcl stage NAME`` (what each DVC stage runs) and ``tcl params``.

Every knob comes from the params file (``--params``, default ``params.yaml``), validated as a
whole before the stage does anything; the work is one call into ``tcl.pipeline``.
"""
from __future__ import annotations

import argparse

from ..config import TclError
from ..params import DEFAULT_FILE, load_params
from ..pipeline import STAGES


def cmd_stage(args) -> int:
    from .. import pipeline

    _no_data(args)
    needs = {"measure": ["device"], "select": ["device"],
             "train": ["device", "model"]}.get(args.name, [])
    for opt in needs:
        if getattr(args, opt) is None:
            raise TclError(f"stage {args.name} needs --{opt}")
    for opt in ("device", "model"):
        if getattr(args, opt) is not None and opt not in needs and \
                not (args.name == "distill" and opt == "device"):
            raise TclError(f"stage {args.name} takes no --{opt}")
    if args.dry_run and args.name != "measure":
        raise TclError(f"stage {args.name} takes no --dry-run")
    params = load_params(args.params)
    if args.device is not None:   # unknown anywhere: an error listing the known devices
        from ..device import DeviceRegistry

        DeviceRegistry(params.paths).get(args.device)
    if args.name == "measure" and args.dry_run:
        todo = pipeline.measure_todo(params, args.device)
        print(todo)
        print(f"{int(todo['todo'].sum())} programs to measure on {args.device}")
        return 0
    if args.name in ("measure", "train") and args.device not in params.devices:
        raise TclError(f"device {args.device!r} is not in {args.params}'s devices "
                       f"({', '.join(params.devices)})")
    if args.name == "measure":
        pipeline.run_measure(params, args.device, progress=not args.quiet)
    elif args.name == "select":
        pipeline.run_select(params, args.device, progress=not args.quiet)
    elif args.name == "train":
        pipeline.run_train(params, args.device, args.model)
    elif args.name == "distill":
        pipeline.run_distill(params, args.device, getattr(args, "method", None))
    elif args.name in ("sample", "featurize"):
        getattr(pipeline, f"run_{args.name}")(params, progress=not args.quiet)
    else:
        getattr(pipeline, f"run_{args.name}")(params)
    return 0


def _no_data(args) -> None:
    """The pipeline's commands take the data root from the params file: --data is refused
    rather than ignored."""
    if args.data:
        raise TclError(f"`tcl {args.command}` takes its data root from the params file's "
                       f"`data` key ({args.params}), not --data")


def cmd_models(args) -> int:
    import sys

    from . import _paths
    from ..device import DeviceRegistry
    from ..registry import ModelRegistry

    # --data names the data root; without it, the params file's
    paths = _paths(args) if args.data else load_params(args.params, check_models=False).paths
    if args.device is not None:
        DeviceRegistry(paths).get(args.device)
    frame = ModelRegistry(paths).frame(args.device)
    if frame.is_empty():
        print("no registered model" + (f" of device {args.device}" if args.device else "")
              + " (make one with `tcl distill --device D`)")
        return 0
    if args.format == "json":
        sys.stdout.write(frame.write_ndjson())
        return 0
    import polars as pl

    show = frame.select("id", "device", pl.col("devices").list.join(",").alias("serves"),
                        "parent", "method", "backbone", "n_records", "newest_measured_at",
                        "params_shared", "params_per_device",
                        pl.col("metrics").str.json_path_match("$.new.top1").cast(pl.Float64)
                        .round(3).alias("top1"),
                        pl.col("metrics").str.json_path_match("$.new.pairwise").cast(pl.Float64)
                        .round(3).alias("pairwise"), "created_at")
    if args.format == "csv":
        sys.stdout.write(show.write_csv())
    else:
        with pl.Config(tbl_rows=-1, tbl_cols=-1, tbl_width_chars=200, fmt_str_lengths=40):
            print(show)
    return 0


def cmd_models_convert(args) -> int:
    """Rewrite model files the safe reader refuses; the user vouches for them by naming them."""
    from ..models.checkpoint import convert_file

    for f in args.files:
        print(convert_file(f))
    return 0


def cmd_params(args) -> int:
    _no_data(args)
    p = load_params(args.params)
    print(f"{args.params}: valid. data root {p.paths.root}; devices {', '.join(p.devices)}; "
          f"{len(p.zoo.networks)} networks{' (small)' if p.zoo.small else ''}; "
          f"{p.sample.programs_per_task} programs per task; models {', '.join(p.train.models)}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser("stage", help="run one pipeline stage with the knobs of params.yaml",
                       description="Run one stage of the pipeline (" + " -> ".join(STAGES) +
                       ") with every knob read from the params file.")
    s.add_argument("name", choices=STAGES)
    s.add_argument("--params", default=DEFAULT_FILE, help="params file (default: params.yaml)")
    s.add_argument("--device", help="measure, select, train, distill: the device")
    s.add_argument("--model", help="train: the model kind")
    s.add_argument("--dry-run", action="store_true",
                   help="measure: print what is left to measure per task, measure nothing")
    s.add_argument("--quiet", action="store_true", help="no progress bars")
    s.set_defaults(func=cmd_stage)

    # Shorthands for the stages a user runs by hand; the same calls as `tcl stage NAME`.
    t = sub.add_parser("train", help="train one model kind on one device (= tcl stage train)")
    t.add_argument("--device", required=True)
    t.add_argument("--model", required=True)
    t.add_argument("--params", default=DEFAULT_FILE)
    t.set_defaults(func=cmd_stage, name="train", dry_run=False, quiet=False)
    e = sub.add_parser("evaluate", help="evaluate the trained models on the held-out networks: "
                                        "Markdown table and PNG chart (= tcl stage evaluate)")
    e.add_argument("--params", default=DEFAULT_FILE)
    e.set_defaults(func=cmd_stage, name="evaluate", device=None, model=None, dry_run=False,
                   quiet=False)

    from ..continual import DISTILLERS

    d = sub.add_parser("distill", help="make a device's model from the previous device's "
                                       "(continual.first, continual.then; = tcl stage distill)")
    d.add_argument("--device", required=True)
    d.add_argument("--method", choices=list(DISTILLERS),
                   help="override continual.method (the first device is always trained "
                        "from scratch on its full data)")
    d.add_argument("--params", default=DEFAULT_FILE)
    d.set_defaults(func=cmd_stage, name="distill", model=None, dry_run=False, quiet=False)
    m = sub.add_parser("models", help="the model registry")
    msub = m.add_subparsers(dest="models_cmd", required=True)
    ml = msub.add_parser("list", help="every registered model version, oldest first")
    ml.add_argument("--device", help="only versions made for this device")
    ml.add_argument("--format", choices=["table", "csv", "json"], default="table")
    ml.add_argument("--params", default=DEFAULT_FILE,
                    help="its data root is read without --data (default: params.yaml)")
    ml.set_defaults(func=cmd_models)
    mc = msub.add_parser("convert", help="rewrite model files of an older tcl that need the full "
                                         "unpickler, so they load as data only; this TRUSTS the "
                                         "files named (the old format can run code)")
    mc.add_argument("files", nargs="+", metavar="FILE")
    mc.set_defaults(func=cmd_models_convert)

    p = sub.add_parser("params", help="validate a params file and summarize it")
    p.add_argument("--params", default=DEFAULT_FILE, help="params file (default: params.yaml)")
    p.set_defaults(func=cmd_params)
