"""The data commands: collect (measure programs on a device, or what a sampler selects),
featurize, query, import and export MetaSchedule databases, retire records, the datacard."""
from __future__ import annotations

import argparse
import json
import signal
import sys
from datetime import datetime

import polars as pl

from ..config import Paths, TclError, write_text
from ..store.devices import DeviceRegistry
from ..features import featurize
from ..measure.active import Selection, measure_selected, plan_active, select_and_measure
from ..measure.collect import collect, plan
from ..measure.devices import create
from ..measure.interrupt import Interrupted
from ..resolve import SPEC_HELP, cold_start_model, resolve_model
from ..sampling import MAX_PROGRAMS_PER_TASK
from ..store.catalog import records
from ..store.records import RecordStore
from .common import (MAX_SEED, _paths, _print_frame, _zoo_tasks, budget_arg, csv_text,
                     float_in, int_in, network_selection, out_path)


def cmd_collect(args) -> int:
    paths = _paths(args, writes=not args.dry_run)
    device = DeviceRegistry(paths).get(args.device)
    kind = create(device)
    kind.check_runnable()
    if args.pipelined:   # the run's own refusal, dry run or not, before the zoo is extracted
        kind.build_cpus()
    tasks = _zoo_tasks(paths, args.networks, args.split, args.max_tasks, args.small,
                       extract=not args.dry_run)
    if args.deploy:
        if not args.select:
            raise TclError("--deploy adds networks to a sampler's pool: use it with --select")
        # Target-aware selection: the networks the device will run join the pool, so the
        # sampler can spend budget on their tasks too.
        extra = _zoo_tasks(paths, args.deploy, "all", None, args.small,
                           extract=not args.dry_run)
        tasks = pl.concat([tasks, extra.join(tasks, on="task_id", how="anti")])
        args.first_tasks = tuple(extra["task_id"].to_list()) if args.deploy_first else ()
    elif args.deploy_first:
        raise TclError("--deploy-first needs --deploy NETWORK...: the networks whose tasks "
                       "come first")
    if args.deploy_first and args.per_task == "no":
        raise TclError("--deploy-first splits the budget per task: drop --per-task no")
    if args.new_tasks:
        # A task's programs then all come from one host: labels compare programs within a task.
        have = records(paths, device.name, ["task_id"])["task_id"].unique().to_list()
        tasks = tasks.filter(~pl.col("task_id").is_in(have))
    if args.pipelined and (args.select or args.selected):
        raise TclError("--pipelined applies to a plain collection, not to --select or "
                       "--selected: drop it")
    if args.selected:
        if args.select or args.dry_run:
            raise TclError("--selected measures earlier selections again: drop --select and "
                           "--dry-run")
        stats = measure_selected(paths, device, tasks, batch_size=args.batch_size)
        print(f"measured {stats.measured} selected programs again ({stats.errors} errors), "
              f"{stats.skipped} measured already")
        return 0
    if args.select:
        return _active_collect(args, paths, device, tasks)
    if args.dry_run:
        print(plan(paths, device, tasks, args.programs_per_task).describe())
        return 0
    stats = collect(paths, device, tasks, args.programs_per_task, seed=args.seed,
                    batch_size=args.batch_size, pipelined=args.pipelined)
    how = (f"build {stats.build_secs:.0f}s beside run {stats.run_secs:.0f}s" if args.pipelined
           else f"build {stats.build_secs:.0f}s + run {stats.run_secs:.0f}s + other "
                f"{stats.other_secs:.0f}s")
    print(f"measured {stats.measured} programs ({stats.errors} errors: {stats.per_status}), "
          f"{stats.skipped} already stored; wall {stats.wall_secs:.0f}s = {how}")
    if stats.dropped:
        print(f"{stats.dropped} programs failed for reasons outside them (runner or RPC) and "
              "were not stored; the next run measures them")
    return 0


def _active_collect(args, paths: Paths, device, tasks) -> int:
    selection = Selection.of(args.select, args.budget, args.rounds,
                             per_task=None if args.per_task is None else args.per_task == "yes",
                             seed=args.seed, first_tasks=getattr(args, "first_tasks", ()))
    if args.dry_run:  # counts only: no model is loaded, nothing sampled or featurized
        print(plan_active(paths, device, tasks, args.programs_per_task, selection).describe())
        return 0
    found = None
    if args.model:   # named on purpose, whatever device made it; none: no model, missing: an error
        found = resolve_model(paths, device.name, args.model, any_device=True,
                              optional=args.model == "none")
    elif args.select != "random":   # nothing measured on the device yet: another device's
        found = cold_start_model(paths, device.name)
    stats = select_and_measure(paths, device, tasks, args.programs_per_task, selection,
                               model=found.model if found else None,
                               model_name=found.what if found else "none",
                               batch_size=args.batch_size)
    c = stats.collect
    print(f"selected and measured {c.measured} programs in {len(stats.rounds)} round(s) "
          f"({c.errors} errors), {c.skipped} measured before; wall {c.wall_secs:.0f}s")
    return 0


def cmd_featurize(args) -> int:
    # progress bars on a terminal only, as for tune: a log or a pipe gets the result line
    print(f"featurized {featurize(_paths(args, writes=True), progress=sys.stderr.isatty())} "
          "new programs")
    return 0


def cmd_query(args) -> int:
    from ..store.catalog import query   # lazy: duckdb costs ~0.3 s at import

    try:
        frame = query(_paths(args, only_reads=True), args.sql)
    except KeyboardInterrupt:   # not the usual "finished work is stored ... resume"
        raise Interrupted(signal.SIGINT, "interrupted: the query stopped before its answer; a "
                          "query writes nothing, so nothing is lost (run it again for its "
                          "answer)") from None
    if args.format == "csv":
        sys.stdout.write(csv_text(frame))
    elif args.format == "json":  # one JSON object per row (NDJSON), for jq and friends
        sys.stdout.write(frame.write_ndjson())
    else:
        _print_frame(frame)
    return 0


def cmd_import(args) -> int:
    from ..measure.msjson import import_database   # lazy: torch costs ~2.5 s at import

    paths = _paths(args, writes=True)
    device = DeviceRegistry(paths).get(args.device)
    stats = import_database(paths, args.dir, device, strict=args.strict)
    for p in stats.skipped():
        print(f"warning: skipped {p}", file=sys.stderr)
    if stats.target_mismatches:
        print(f"warning: {stats.target_mismatches} lines were measured for another target than "
              f"{device.name}'s {json.dumps(device.target)}; their records keep the target of "
              "their lines (--strict refuses such a database)", file=sys.stderr)
    bad, malformed = len(stats.bad_run_secs), len(stats.problems)
    print(f"read {stats.lines} lines: {stats.programs} distinct programs, {stats.records} new "
          f"records, {bad + malformed} skipped ({malformed} malformed, {bad} without valid run "
          f"times) ({stats.tasks} new tasks)")
    return 0


def cmd_export(args) -> int:
    from ..measure.msjson import export_database   # lazy: torch costs ~2.5 s at import

    paths = _paths(args, writes=True)   # its lock lives under the data root
    done = export_database(paths, DeviceRegistry(paths).get(args.device), args.dir, args.tasks)
    print(f"exported {done.written} new records to {args.dir}"
          + (f" ({done.present} already there)" if done.present else ""))
    return 0


def cmd_retire(args) -> int:
    def when(option: str, text: str | None):
        if text is None:
            return None
        try:
            return datetime.fromisoformat(text)
        except ValueError:
            raise TclError(f"--{option} {text!r} is not an ISO time such as "
                           "2026-11-29T21:00Z") from None

    before, after = when("before", args.before), when("after", args.after)
    paths = _paths(args, writes=not args.dry_run)
    DeviceRegistry(paths).get(args.device)
    done = RecordStore(paths).retire(args.device, before, args.reason, args.dry_run,
                                            after=after)
    verb = "would retire" if args.dry_run else "retired"
    span = f"before {before.isoformat()}" if after is None else \
        f"from {after.isoformat()} to {before.isoformat()}"
    print(f"{verb} {done.records} records in {len(done.files)} files of {args.device} "
          f"measured {span}")
    for f in done.straddling:
        print(f"kept {f}: it has records on both sides of a bound of {span}")
    return 0


def cmd_datacard(args) -> int:
    from .. import datacard   # lazy: duckdb costs ~0.3 s at import

    paths = _paths(args)
    out = out_path(args.out, "directory") if args.out else paths.reports_dir / "datacard"
    for dev in args.remeasure:
        DeviceRegistry(paths).get(dev)
    remeasure = None
    if args.remeasure:
        remeasure = {dev: datacard.remeasure_correlation(
            datacard.remeasure_sample(paths, dev, args.fraction)) for dev in args.remeasure}
    text = datacard.render(datacard.build(paths, out, remeasure))
    write_text(out / "datacard.md", text, "data card")
    print(text, end="")   # the card as written, byte for byte
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    c = sub.add_parser("collect", help="sample and measure programs on a device")
    c.add_argument("--device", required=True)
    c.add_argument("--programs-per-task", type=int_in(1, MAX_PROGRAMS_PER_TASK), default=32)
    c.add_argument("--split", choices=["all", "train", "holdout"], default="all")
    c.add_argument("--max-tasks", type=int_in(1, 100_000),   # the zoo holds ~1600 tasks
                   help="only N tasks of each split (stratified by operator class)")
    c.add_argument("--seed", type=int_in(0, MAX_SEED), default=0)
    c.add_argument("--batch-size", type=int_in(1, 4096), default=64)
    c.add_argument("--pipelined", action="store_true",
                   help="build the next batch while this one runs, on the cores the device "
                        "does not use (a 1-core device on 2 cores)")
    c.add_argument("--dry-run", action="store_true", help="print the plan and estimated time")
    c.add_argument("--new-tasks", action="store_true",
                   help="only tasks that hold no record of this device yet, from any host "
                        "(another host's tasks are not measured again here)")
    c.add_argument("--select", choices=["rdu", "random", "kcenter", "uncertainty",
                                        "representative", "balto", "typiclust"],
                   help="measure only what this sampler picks from the pool "
                        "(--programs-per-task candidates per task)")
    c.add_argument("--budget", type=budget_arg, default=0.1,
                   help="with --select: programs to measure, a count or a share of the pool")
    c.add_argument("--rounds", type=int_in(1, 100), default=1,
                   help="with --select: later rounds take uncertainty from a model trained on "
                        "the rounds so far")
    c.add_argument("--model", help=f"with --select: round 0's model for uncertainty and the "
                                   f"embedding: {SPEC_HELP}, or none (default: the cold start's "
                                   "model, another device's: its newest registered continual "
                                   "model, else its trained tenset-mlp or mamba model, if any)")
    c.add_argument("--deploy", nargs="+", metavar="NETWORK",
                   help="with --select: networks the device will run; their candidates join "
                        "the pool (target-aware selection)")
    c.add_argument("--deploy-first", action="store_true",
                   help="with --deploy: the budget goes to the deployed networks' tasks first "
                        "(per task, by zoo weight), the other tasks get what is left")
    c.add_argument("--per-task", choices=["yes", "no"],
                   help="with --select: split the budget over tasks by zoo weight first")
    c.add_argument("--selected", action="store_true",
                   help="measure what was selected for the device earlier and holds no record "
                        "now (after `tcl retire`), so its model can be made again")
    network_selection(c)
    c.set_defaults(func=cmd_collect)

    f = sub.add_parser("featurize", help="compute and cache features of all known programs")
    f.set_defaults(func=cmd_featurize)

    q = sub.add_parser("query", help="read-only SQL over records, programs, tasks, networks, "
                                     "devices, selections, retired")
    q.add_argument("sql")
    q.add_argument("--format", choices=["table", "csv", "json"], default="table",
                   help="table (default), csv, or json (one object per row)")
    q.set_defaults(func=cmd_query)

    i = sub.add_parser("import", help="import a MetaSchedule JSONDatabase directory")
    i.add_argument("dir")
    i.add_argument("--device", required=True)
    i.add_argument("--strict", action="store_true",
                   help="refuse a database with lines measured for another target than the "
                        "device's (default: import them, keep their target, warn)")
    i.set_defaults(func=cmd_import)

    e = sub.add_parser("export", help="export records as a MetaSchedule JSONDatabase")
    e.add_argument("dir")
    e.add_argument("--device", required=True)
    e.add_argument("--tasks", nargs="+")
    e.set_defaults(func=cmd_export)

    r = sub.add_parser("retire", help="take a device's records measured before a time out of use "
                       "(kept under retired/; the next collection measures them again)")
    r.add_argument("--device", required=True)
    r.add_argument("--before", required=True, help="ISO time with zone, e.g. 2026-11-29T21:00Z")
    r.add_argument("--after", help="only records measured at or after this ISO time (a window)")
    r.add_argument("--reason", required=True, help="why, written to retired/log.jsonl")
    r.add_argument("--dry-run", action="store_true", help="only count what would move")
    r.set_defaults(func=cmd_retire)

    dc = sub.add_parser("datacard", help="dataset statistics, noise and device landscapes")
    dc.add_argument("--out", help="directory of datacard.md (default: <data>/reports/datacard)")
    dc.add_argument("--remeasure", nargs="*", default=[],
                    help="devices whose records to re-measure in part (noise check)")
    dc.add_argument("--fraction", type=float_in(0.0, 1.0, low_open=True), default=0.01)
    dc.set_defaults(func=cmd_datacard)
