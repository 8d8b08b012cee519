"""The model commands: predict (rank a database's programs), score (a model on a device's own
records) and the model registry (models list, models convert)."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import polars as pl

from ..config import atomic_write
from ..store.devices import DeviceRegistry
from ..pipeline.params import DEFAULT_FILE, load_params
from ..predict import predict_database
from ..registry import ModelRegistry
from ..resolve import SPEC_HELP
from ..score import score_records
from .common import _paths, _print_frame, any_device_flag, out_path, print_table


def cmd_predict(args) -> int:
    paths = _paths(args)
    DeviceRegistry(paths).get(args.device)   # an unknown device: a clear error
    if args.out:
        out_path(args.out, "file")
    scores, what, skipped = predict_database(paths, args.device, args.dir, args.model,
                                             any_device=args.any_device)
    for p in skipped:
        print(f"warning: skipped {p}", file=sys.stderr)
    if args.out:
        with atomic_write(Path(args.out), "scores file") as tmp:
            scores.write_csv(tmp)
    else:
        sys.stdout.write(scores.write_csv())
    print(f"scored {len(scores)} programs of {scores['task_id'].n_unique()} tasks with {what}"
          + (f"; written to {args.out}" if args.out else ""), file=sys.stderr)
    return 0


def cmd_score(args) -> int:
    paths = _paths(args)
    DeviceRegistry(paths).get(args.device)
    if args.out:
        out_path(args.out, "directory")
    got = score_records(paths, args.device, args.model, task_ids=args.tasks, source=args.source,
                        networks=args.networks, weights_file=args.weights,
                        any_device=args.any_device)
    print(f"{args.device}: {got['model']} on {len(got['tasks'])} tasks "
          f"({int(got['tasks']['n_programs'].sum())} programs)")
    parts = [("tasks", "per task"), ("classes", "per operator class"), ("networks", "per network")]
    for name, title in parts:
        if got[name] is not None:
            print(f"\n{title}:")
            _print_frame(got[name])
    if args.out:
        out = Path(args.out)
        for name, _ in parts:
            if got[name] is not None:
                with atomic_write(out / f"{name}.csv", "scores file") as tmp:
                    got[name].write_csv(tmp, float_precision=4)
        print(f"\nwritten to {out}/ (tasks.csv, classes.csv"
              + (", networks.csv" if got["networks"] is not None else "") + ")")
    return 0


def cmd_models(args) -> int:
    # --data names the data root; without it, the params file's
    paths = _paths(args, only_reads=True) if args.data is not None else \
        load_params(args.params, check_models=False).paths
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
    def figure(key: str) -> pl.Expr:
        return pl.col("metrics").str.json_path_match(f"$.new.{key}").cast(pl.Float64) \
            .round(3).alias(key)

    if args.format == "csv":
        sys.stdout.write(frame.select(
            "id", "device", pl.col("devices").list.join(",").alias("serves"), "parent", "method",
            "backbone", "n_records", "newest_measured_at", "params_shared", "params_per_device",
            figure("top1"), figure("pairwise"), "created_at").write_csv())
        return 0
    # the terminal's table fits 100 columns: what tells versions apart (the rest: --format csv)
    print_table(frame.select(
        "id", "device", pl.col("parent").fill_null("-"), "method",
        pl.col("n_records").alias("records"), figure("top1"), figure("pairwise"),
        pl.col("created_at").cast(pl.String).str.slice(0, 16).alias("created")))
    print("(serving devices, backbone, parameters, data snapshot: --format csv or json)")
    return 0


def cmd_models_convert(args) -> int:
    """Rewrite an older tcl's model files, read as data only; a registry file only against its
    row's hash (``registry_entry``)."""
    from ..models import convert_file   # lazy: torch costs ~2.6 s at import
    from ..registry import registry_entry

    for f in args.files:
        entry = registry_entry(Path(f))
        print(convert_file(f, entry.content_hash if entry else None))
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    pr = sub.add_parser("predict", help="rank a JSONDatabase's programs with a cost model "
                                        "(CSV: task, program, score, rank within the task)")
    pr.add_argument("dir", help="a MetaSchedule JSONDatabase directory")
    pr.add_argument("--device", required=True)
    pr.add_argument("--model", help=f"{SPEC_HELP} (default: latest)")
    any_device_flag(pr)
    pr.add_argument("--out", help="write the CSV here (default: standard output)")
    pr.set_defaults(func=cmd_predict)

    sc = sub.add_parser("score", help="score a model on a device's own measured records (imported "
                                      "logs, your networks): per task, class and network")
    sc.add_argument("--device", required=True)
    sc.add_argument("--model", help=f"{SPEC_HELP} (default: latest)")
    sc.add_argument("--tasks", nargs="+", help="only these task ids")
    sc.add_argument("--source", help="only records of this source: collect, import, tune")
    sc.add_argument("--networks", nargs="+", help="per-network scores with the zoo's weights "
                                                  "(network names or instance keys)")
    sc.add_argument("--weights", help="per-network scores with weights from a CSV file: "
                                      "network, task_id, weight")
    any_device_flag(sc)
    sc.add_argument("--out", help="also write tasks.csv, classes.csv, networks.csv here")
    sc.set_defaults(func=cmd_score)

    m = sub.add_parser("models", help="the model registry")
    msub = m.add_subparsers(dest="models_cmd", required=True)
    ml = msub.add_parser("list", help="every registered model version, oldest first")
    ml.add_argument("--device", help="only versions made for this device")
    ml.add_argument("--format", choices=["table", "csv", "json"], default="table")
    ml.add_argument("--params", default=DEFAULT_FILE,
                    help="its data root is read without --data (default: params.yaml)")
    ml.set_defaults(func=cmd_models)
    mc = msub.add_parser("convert", help="rewrite model files of an older tcl (numpy values), "
                                         "read as data only, so they load; a file holding other "
                                         "Python objects is refused (nothing of it runs)")
    mc.add_argument("files", nargs="+", metavar="FILE")
    mc.set_defaults(func=cmd_models_convert)
