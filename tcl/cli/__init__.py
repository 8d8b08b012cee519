"""The ``tcl`` command. Each subcommand is a thin wrapper over one library function."""
from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
from pathlib import Path

from ..budget import budget_from_text
from .pipeline import register as register_pipeline_commands
from ..config import Paths, TclError


def _paths(args) -> Paths:
    paths = Paths(Path(args.data).resolve()) if args.data else Paths.default()
    if paths.root.exists() and not paths.root.is_dir():
        raise TclError(f"data root {paths.root} is a file; --data (or $TCL_DATA) names a "
                       "directory")
    out_path(str(paths.root), "directory", "--data")   # a file above it
    return paths


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


def int_in(low: int, high: int | None = None):
    """An argparse type: an integer in [low, high], with a message naming the range."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < low or (high is not None and value > high):
            span = f"[{low}, {high}]" if high is not None else f">= {low}"
            raise argparse.ArgumentTypeError(f"must be {span}, got {value}")
        return value
    return parse


def float_in(low: float, high: float, low_open: bool = False):
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        if not (low < value if low_open else low <= value) or not value <= high:
            raise argparse.ArgumentTypeError(
                f"must lie in {'(' if low_open else '['}{low}, {high}], got {text}")
        return value
    return parse


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line naming the problem (and where to read more)."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


def _print_frame(frame) -> None:
    import polars as pl

    with pl.Config(tbl_rows=200, tbl_cols=30, fmt_str_lengths=60, tbl_width_chars=200):
        print(frame)


def _zoo_tasks(paths: Paths, networks: list[str] | None, split: str = "all",
               max_tasks: int | None = None, small: bool = False, extract: bool = True):
    """Tasks of the selected networks (extracted into the zoo first where needed), heaviest
    first; ``max_tasks`` caps each split, as ``sample.max_*_tasks`` do in params.yaml.
    ``extract=False`` (a dry run) writes nothing: networks not extracted yet are named and left
    out."""
    import polars as pl

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


def cmd_device(args) -> int:
    from ..device import DeviceRegistry, MeasureSettings, check_runnable

    reg = DeviceRegistry(_paths(args))
    if args.action == "add":
        measure = MeasureSettings(number=args.number, repeat=args.repeat,
                                  min_repeat_ms=args.min_repeat_ms, timeout_sec=args.timeout)
        if args.dry_run:
            return _dry_run_add_device(args, measure)
        params = None
        if args.run:   # before anything is registered or emitted: the definition, the params
            reg.add(args.name, args.target, rpc_key=args.rpc_key, tracker=args.tracker,
                    measure=measure, replace=args.replace, dry_run=True)
            params = _add_device_params(args)   # and a served run that would refuse them
        if reg.is_registered(args.name, args.target, args.rpc_key, args.tracker, measure):
            print(f"device {args.name} is already registered with this definition; "
                  "nothing changed")
        else:
            d = reg.add(args.name, args.target, rpc_key=args.rpc_key, tracker=args.tracker,
                        measure=measure, replace=args.replace, check=_tracker_check(args))
            print(f"added device {d.name}: {json.dumps(d.target)}")
        if args.run:
            return _trigger_add_device(args, params)
        return 0
    for d in reg.all().values():
        try:
            check_runnable(d)
            ok = "runs here" if not d.is_remote else f"remote via {d.tracker}"
        except TclError as e:
            ok = f"NOT runnable here: {e}"
        print(f"{d.name:<14} {json.dumps(d.target):<60} {ok}")
    return 0


def _tracker_check(args):
    """A remote device is registered only once its tracker answers (retried by the params
    file's measure.retries / measure.retry_delay_s): nothing is half-registered."""
    if args.tracker is None:
        return None
    from ..measure.runner import wait_for_tracker
    from ..params import load_params

    m = load_params(args.params, check_models=False).measure if Path(args.params).exists() \
        else None
    retries, delay = (m.retries, m.retry_delay_s) if m else (2, 5.0)

    def check(device) -> None:
        try:
            wait_for_tracker(device, retries, delay, say=lambda s: print(s, file=sys.stderr))
        except TclError as e:
            raise TclError(f"{e}; device {device.name!r} is not registered (start the tracker "
                           "and its RPC server, then add the device again)") from None
    return check


def _add_device_params(args):
    """The add-device run's params, checked before the device is registered: the params file
    (validated), its data root (the one --data names, if given) and, where a Prefect server is
    to run it, the params file that server's add-device deployment is bound to (a served run
    with another one would be refused after the event was emitted)."""
    from .. import prefect_setup  # noqa: F401  (Prefect's defaults, before Prefect loads)

    from ..events import check_served_params, server_configured
    from ..params import load_params

    params = load_params(args.params)   # validated before anything runs
    if args.data and Path(args.data).resolve() != params.paths.root:
        raise TclError(f"--data {args.data} is not {args.params}'s data root "
                       f"({params.paths.root}); the add-device run uses the params file's")
    if server_configured():
        check_served_params(args.params)
    return params


def _trigger_add_device(args, params) -> int:
    """Emit ``tcl.device.added``; with no Prefect server to react to it, run the flow here and
    print the table of its steps' times."""
    import psutil

    from ..add_device import step_table
    from ..events import emit_device_added, server_configured

    if server_configured():
        emit_device_added(args.name, args.params)
        print(f"emitted {args.name!r} as tcl.device.added: the add-device deployment that "
              "`tcl serve` serves runs it (watch it in the Prefect UI)")
        return 0
    from ..deployments import add_device
    from ..prefect_setup import run_flow

    emit_device_added(args.name, args.params)   # recorded by the ephemeral API, if any
    out = run_flow(add_device, device=args.name, params_file=args.params,
                   started=psutil.Process().create_time())
    if isinstance(out, dict) and out.get("secs"):
        print(f"time from the command to the registered model ({args.name}):")
        print(step_table(out["secs"], out["total_secs"]))
    return 0


def _dry_run_add_device(args, measure) -> int:
    """``tcl device add --dry-run``: the plan of the add-device run (pool, budget, evaluation
    set, estimated time); nothing registered, sampled, measured or written but caches."""
    from ..add_device import plan_add_device
    from ..device import DeviceRegistry
    from ..params import load_params

    params = load_params(args.params)
    if args.data and Path(args.data).resolve() != params.paths.root:
        raise TclError(f"--data {args.data} is not {args.params}'s data root "
                       f"({params.paths.root}); the add-device run uses the params file's")
    device = DeviceRegistry(params.paths).add(args.name, args.target, rpc_key=args.rpc_key,
                                              tracker=args.tracker, measure=measure,
                                              replace=args.replace, dry_run=True)
    print(plan_add_device(params, device, say=lambda s: print(s, file=sys.stderr)).describe())
    return 0


def cmd_status(args) -> int:
    from ..params import load_params
    from ..status import device_status

    paths = _paths(args)
    # The params file says which tasks the models train on; it speaks for its own data root.
    params = load_params(args.params, check_models=False) if Path(args.params).exists() \
        else None
    if params is not None and params.paths.root != paths.root:
        params = None
    frame = device_status(paths, params)
    if args.format == "csv":
        sys.stdout.write(frame.write_csv())
    elif args.format == "json":
        sys.stdout.write(frame.write_ndjson())
    else:
        _print_frame(frame.drop("not_used"))
        for device, model, text in frame.select("device", "model", "not_used").iter_rows():
            if text:  # too long for a table cell
                print(f"{device}: {'newer ' if model else ''}records that no model trains "
                      f"on: {text}")
    return 0


def cmd_serve(args) -> int:
    from .pipeline import _no_data
    from ..deployments import serve

    _no_data(args)
    serve(args.params)
    return 0


def cmd_zoo(args) -> int:
    if args.zoo_command == "add":
        from ..zoo.user import UserNetworks

        users = UserNetworks(_paths(args), _factory_timeout(args))
        inst, new = users.add(args.name, args.model, args.input, args.holdout)
        if not new:
            print(f"{inst.key} is already in the zoo: nothing to add")
            return 0
        print(f"added {inst.key} ({inst.input_shape}{', held out' if inst.holdout else ''}); "
              f"name it in params.yaml's zoo.networks as {inst.network!r}")
        return 0
    if args.zoo_command == "list":
        _print_frame(_zoo_listing(_paths(args)))
        return 0
    tasks = _zoo_tasks(_paths(args), args.networks, small=args.small)
    print(f"{len(tasks)} tasks in the selected networks")
    return 0


def _factory_timeout(args) -> float:
    """``zoo add``: --timeout, else the params file's zoo.factory_timeout_s where the file
    exists, else the default."""
    from ..params import DEFAULT_FACTORY_TIMEOUT_S, load_params

    if args.timeout is not None:
        return args.timeout
    if Path(args.params).exists():
        return load_params(args.params, check_models=False).zoo.factory_timeout_s
    return DEFAULT_FACTORY_TIMEOUT_S


def _zoo_listing(paths: Paths):
    """One row per network variant: built-in, long-tail family or the user's, and its tasks
    when extracted."""
    import polars as pl

    from ..zoo.extract import load_networks
    from ..zoo.networks import NETWORKS, zoo_instances
    from ..zoo.user import user_networks

    users = user_networks(paths)
    tasks = dict(load_networks(paths).group_by("network_key").len().iter_rows())
    rows = []
    for inst in zoo_instances(list(NETWORKS) + list(users), user=users):
        origin = "user" if inst.source is not None else \
            "long tail" if NETWORKS[inst.network].long_tail else "built in"
        rows.append({"network": inst.network, "family": inst.family, "origin": origin,
                     "key": inst.key, "inputs": inst.input_shape, "holdout": inst.holdout,
                     "tasks": tasks.get(inst.key)})
    return pl.DataFrame(rows, schema_overrides={"tasks": pl.Int64})


def cmd_collect(args) -> int:
    from ..device import DeviceRegistry, check_runnable
    from ..measure.collect import collect, plan

    paths = _paths(args)
    device = DeviceRegistry(paths).get(args.device)
    check_runnable(device)
    tasks = _zoo_tasks(paths, args.networks, args.split, args.max_tasks, args.small,
                       extract=not args.dry_run)
    if args.deploy:
        if not args.select:
            raise TclError("--deploy adds networks to a sampler's pool: use it with --select")
        import polars as pl

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
    if args.select:
        return _active_collect(args, paths, device, tasks)
    if args.dry_run:
        print(plan(paths, device, tasks, args.programs_per_task).describe())
        return 0
    stats = collect(paths, device, tasks, args.programs_per_task, seed=args.seed,
                    batch_size=args.batch_size)
    print(f"measured {stats.measured} programs ({stats.errors} errors: {stats.per_status}), "
          f"{stats.skipped} already stored; wall {stats.wall_secs:.0f}s = build "
          f"{stats.build_secs:.0f}s + run {stats.run_secs:.0f}s + other {stats.other_secs:.0f}s")
    if stats.dropped:
        print(f"{stats.dropped} programs failed for reasons outside them (runner or RPC) and "
              "were not stored; the next run measures them")
    return 0


def _active_collect(args, paths: Paths, device, tasks) -> int:
    from ..measure.active import Selection, plan_active, select_and_measure, teacher_model

    options = {} if args.per_task is None else {"per_task": args.per_task == "yes"}
    selection = Selection(args.select, args.budget, args.rounds, options, seed=args.seed,
                          first_tasks=getattr(args, "first_tasks", ()))
    if args.dry_run:  # counts only: no model is loaded, nothing sampled or featurized
        print(plan_active(paths, device, tasks, args.programs_per_task, selection).describe())
        return 0
    model, name = (None, "none")
    if args.model:
        from ..models import load_model

        model, name = load_model(args.model), args.model
    elif args.select != "random":
        model, name = teacher_model(paths, device.name)
    stats = select_and_measure(paths, device, tasks, args.programs_per_task, selection,
                               model=model, model_name=name, batch_size=args.batch_size)
    c = stats.collect
    print(f"selected and measured {c.measured} programs in {len(stats.rounds)} round(s) "
          f"({c.errors} errors), {c.skipped} measured before; wall {c.wall_secs:.0f}s")
    return 0


def budget_arg(text: str) -> int | float:
    """``--budget``: a count or a share of the pool (``tcl.budget``'s rule)."""
    try:
        return budget_from_text(text)
    except TclError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def cmd_featurize(args) -> int:
    from ..features import featurize

    # progress bars on a terminal only, as for tune: a log or a pipe gets the result line
    print(f"featurized {featurize(_paths(args), progress=sys.stderr.isatty())} new programs")
    return 0


def cmd_query(args) -> int:
    from ..store.catalog import query

    frame = query(_paths(args), args.sql)
    if args.format == "csv":
        sys.stdout.write(frame.write_csv())
    elif args.format == "json":  # one JSON object per row (NDJSON), for jq and friends
        sys.stdout.write(frame.write_ndjson())
    else:
        _print_frame(frame)
    return 0


def cmd_import(args) -> int:
    from ..device import DeviceRegistry
    from ..store.msjson import import_database

    paths = _paths(args)
    device = DeviceRegistry(paths).get(args.device)
    stats = import_database(paths, args.dir, device, strict=args.strict)
    for p in stats.problems:
        print(f"warning: skipped {p}", file=sys.stderr)
    if stats.target_mismatches:
        print(f"warning: {stats.target_mismatches} lines were measured for another target than "
              f"{device.name}'s {json.dumps(device.target)}; their records keep the target of "
              "their lines (--strict refuses such a database)", file=sys.stderr)
    print(f"read {stats.lines} lines: {stats.programs} distinct programs, {stats.records} new "
          f"records, {len(stats.problems)} malformed lines skipped ({stats.tasks} new tasks)")
    return 0


def cmd_predict(args) -> int:
    from ..device import DeviceRegistry
    from ..predict import predict_database

    paths = _paths(args)
    DeviceRegistry(paths).get(args.device)   # an unknown device: a clear error
    if args.out:
        out_path(args.out, "file")
    scores, what, skipped = predict_database(paths, args.device, args.dir, args.model,
                                             any_device=args.any_device)
    for p in skipped:
        print(f"warning: skipped {p}", file=sys.stderr)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        scores.write_csv(args.out)
    else:
        sys.stdout.write(scores.write_csv())
    print(f"scored {len(scores)} programs of {scores['task_id'].n_unique()} tasks with {what}"
          + (f"; written to {args.out}" if args.out else ""), file=sys.stderr)
    return 0


def cmd_score(args) -> int:
    from ..device import DeviceRegistry
    from ..score import score_records

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
        out.mkdir(parents=True, exist_ok=True)
        for name, _ in parts:
            if got[name] is not None:
                got[name].write_csv(out / f"{name}.csv", float_precision=4)
        print(f"\nwritten to {out}/ (tasks.csv, classes.csv"
              + (", networks.csv" if got["networks"] is not None else "") + ")")
    return 0


def cmd_tune(args) -> int:
    from ..tune import plan_tuning, report_lines, tune_network

    if args.dry_run:   # the zoo's tables and earlier runs only: no TVM, no model, no writes
        print(plan_tuning(_paths(args), args.network, args.device, args.model,
                          trials=args.trials, population=args.population,
                          generations=args.generations).describe())
        return 0
    if args.out:
        out_path(args.out, "directory")
    r = tune_network(_paths(args), args.network, args.device, args.model, trials=args.trials,
                     update=args.update, seed=args.seed, population=args.population,
                     generations=args.generations, out=args.out,
                     progress=sys.stderr.isatty(), any_device=args.any_device)
    per_task = ", ".join(f"{n}" for n in r.trials_per_task.values())
    print(f"{r.network} on {r.device} with {r.model}: {r.trials} trials over {r.tasks} tasks "
          f"(per task: {per_task}); tuning {r.tune_s:.0f}s (building {r.build_s:.0f}s, running "
          f"{r.run_s:.0f}s, search overhead {r.overhead_share:.0%}), compile {r.compile_s:.0f}s")
    print(f"compiled network: {r.latency_ms:.3f} ms (std {r.latency_std_ms:.3f}), end to end; "
          f"PyTorch eager {r.torch_ms:.3f} ms on the same cores; outputs match PyTorch's within "
          f"{r.max_abs_err:.2g}")
    print(f"{r.records_added} tuning records added to the store (source tune); files in {r.out}/ "
          "(network.so, database/, curve.csv, curve.png, summary.json)")
    print("\n".join(report_lines(r)))
    return 0


def cmd_export(args) -> int:
    from ..device import DeviceRegistry
    from ..store.msjson import export_database

    paths = _paths(args)
    done = export_database(paths, DeviceRegistry(paths).get(args.device), args.dir, args.tasks)
    print(f"exported {done.written} new records to {args.dir}"
          + (f" ({done.present} already there)" if done.present else ""))
    return 0


def cmd_retire(args) -> int:
    from datetime import datetime

    from ..device import DeviceRegistry
    from ..store.records import RecordStore

    def when(option: str, text: str | None):
        if text is None:
            return None
        try:
            return datetime.fromisoformat(text)
        except ValueError:
            raise TclError(f"--{option} {text!r} is not an ISO time such as "
                           "2026-11-29T21:00Z") from None

    before, after = when("before", args.before), when("after", args.after)
    paths = _paths(args)
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
    from .. import datacard
    from ..device import DeviceRegistry

    paths = _paths(args)
    out = out_path(args.out, "directory") if args.out else paths.reports_dir / "datacard"
    for dev in args.remeasure:
        DeviceRegistry(paths).get(dev)
    remeasure = None
    if args.remeasure:
        remeasure = {dev: datacard.remeasure_correlation(
            datacard.remeasure_sample(paths, dev, args.fraction)) for dev in args.remeasure}
    text = datacard.render(datacard.build(paths, out, remeasure))
    out.mkdir(parents=True, exist_ok=True)
    (out / "datacard.md").write_text(text)
    print(text, end="")   # the card as written, byte for byte
    return 0


def any_device_flag(parser: argparse.ArgumentParser) -> None:
    """--any-device, the same on every command that takes a model (tcl.predict's
    check_model_device refuses another device's model without it)."""
    parser.add_argument("--any-device", action="store_true",
                        help="accept a model made for another device (its scores rank by "
                             "that device's latencies)")


def build_parser() -> argparse.ArgumentParser:
    from ..params import DEFAULT_FACTORY_TIMEOUT_S, FACTORY_TIMEOUT_RANGE
    from ..sampling import MAX_PROGRAMS_PER_TASK

    p = Parser(prog="tcl", description=__doc__)
    p.add_argument("--data", help="data root (default: $TCL_DATA or ./data)")
    sub = p.add_subparsers(dest="command", required=True, parser_class=Parser)

    d = sub.add_parser("device", help="list or add devices")
    dsub = d.add_subparsers(dest="action", required=True, parser_class=Parser)
    dsub.add_parser("list", help="built-in profiles and your devices")
    add = dsub.add_parser("add", help="register a device")
    add.add_argument("name")
    add.add_argument("--target", required=True, help='TVM target as JSON, e.g. {"kind": "llvm"}')
    add.add_argument("--rpc-key")
    add.add_argument("--tracker", help="HOST:PORT of a TVM RPC tracker")
    add.add_argument("--number", type=int_in(1, 1000), default=3,
                     help="kernel runs per repeat (MetaSchedule evaluator)")
    add.add_argument("--repeat", type=int_in(1, 100), default=3, help="repeats kept per record")
    add.add_argument("--min-repeat-ms", type=int_in(0, 60_000), default=40)
    add.add_argument("--timeout", type=float_in(0.1, 3600), default=10.0,
                     help="seconds before a run counts as a timeout")
    add.add_argument("--no-run", dest="run", action="store_false",
                     help="only register: do not trigger the add-device run")
    add.add_argument("--params", default="params.yaml",
                     help="the add-device run's params file (default: params.yaml)")
    add.add_argument("--replace", action="store_true",
                     help="redefine an existing device (refused while it has records)")
    add.add_argument("--dry-run", action="store_true",
                     help="print the add-device run's plan and estimated time; register, "
                          "sample and measure nothing")
    d.set_defaults(func=cmd_device)

    def selection(sp):
        sp.add_argument("--networks", nargs="+", help="network names (default: the whole zoo)")
        sp.add_argument("--small", action="store_true", help="reduced input shapes (tests)")

    z = sub.add_parser("zoo", help="extract tuning tasks of the networks; add your own (zoo add)")
    selection(z)
    z.set_defaults(func=cmd_zoo, zoo_command=None)
    zsub = z.add_subparsers(dest="zoo_command", metavar="{add,list}")
    za = zsub.add_parser("add", help="add your own PyTorch network to the zoo")
    za.add_argument("name", help="its name in params.yaml (lower case, digits, '_')")
    za.add_argument("--model", required=True, metavar="MODULE:FACTORY",
                    help="an importable module or a .py file, and a callable in it that "
                         "returns the nn.Module")
    za.add_argument("--input", required=True, action="append", metavar="SHAPE[:DTYPE]",
                    help="one input tensor of forward(), e.g. 1x3x224x224 or 1x128:int64; "
                         "repeat for each input")
    za.add_argument("--holdout", action="store_true",
                    help="evaluate on its tasks, never train on them")
    za.add_argument("--timeout", type=float_in(*FACTORY_TIMEOUT_RANGE), metavar="SECONDS",
                    help="seconds MODULE:FACTORY may take to import and return (default: the "
                         "params file's zoo.factory_timeout_s, else "
                         f"{DEFAULT_FACTORY_TIMEOUT_S:g})")
    za.add_argument("--params", default="params.yaml",
                    help="where zoo.factory_timeout_s is read (default: params.yaml, if any)")
    zsub.add_parser("list", help="the networks: built in, long-tail families and your own")

    c = sub.add_parser("collect", help="sample and measure programs on a device")
    c.add_argument("--device", required=True)
    c.add_argument("--programs-per-task", type=int_in(1, MAX_PROGRAMS_PER_TASK), default=32)
    c.add_argument("--split", choices=["all", "train", "holdout"], default="all")
    c.add_argument("--max-tasks", type=int_in(1),
                   help="only N tasks of each split (stratified by operator class)")
    c.add_argument("--seed", type=int_in(0, 2**31 - 1), default=0)
    c.add_argument("--batch-size", type=int_in(1, 4096), default=64)
    c.add_argument("--dry-run", action="store_true", help="print the plan and estimated time")
    c.add_argument("--select", choices=["rdu", "random", "kcenter", "uncertainty",
                                        "representative", "balto", "typiclust"],
                   help="measure only what this sampler picks from the pool "
                        "(--programs-per-task candidates per task)")
    c.add_argument("--budget", type=budget_arg, default=0.1,
                   help="with --select: programs to measure, a count or a share of the pool")
    c.add_argument("--rounds", type=int_in(1, 100), default=1,
                   help="with --select: later rounds take uncertainty from a model trained on "
                        "the rounds so far")
    c.add_argument("--model", help="with --select: a model file for round 0's uncertainty "
                                   "(default: another device's trained model, if any)")
    c.add_argument("--deploy", nargs="+", metavar="NETWORK",
                   help="with --select: networks the device will run; their candidates join "
                        "the pool (target-aware selection)")
    c.add_argument("--deploy-first", action="store_true",
                   help="with --deploy: the budget goes to the deployed networks' tasks first "
                        "(per task, by zoo weight), the other tasks get what is left")
    c.add_argument("--per-task", choices=["yes", "no"],
                   help="with --select: split the budget over tasks by zoo weight first")
    selection(c)
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

    pr = sub.add_parser("predict", help="rank a JSONDatabase's programs with a cost model "
                                        "(CSV: task, program, score, rank within the task)")
    pr.add_argument("dir", help="a MetaSchedule JSONDatabase directory")
    pr.add_argument("--device", required=True)
    pr.add_argument("--model", help="a model kind trained for the device, 'continual' (the "
                                    "registry's latest), or a model file (default: the "
                                    "registry's latest, else the first trained kind)")
    any_device_flag(pr)
    pr.add_argument("--out", help="write the CSV here (default: standard output)")
    pr.set_defaults(func=cmd_predict)

    sc = sub.add_parser("score", help="score a model on a device's own measured records (imported "
                                      "logs, your networks): per task, class and network")
    sc.add_argument("--device", required=True)
    sc.add_argument("--model", help="a model kind trained for the device, 'continual', or a "
                                    "model file (default: as for predict)")
    sc.add_argument("--tasks", nargs="+", help="only these task ids")
    sc.add_argument("--source", help="only records of this source: collect, import, tune")
    sc.add_argument("--networks", nargs="+", help="per-network scores with the zoo's weights "
                                                  "(network names or instance keys)")
    sc.add_argument("--weights", help="per-network scores with weights from a CSV file: "
                                      "network, task_id, weight")
    any_device_flag(sc)
    sc.add_argument("--out", help="also write tasks.csv, classes.csv, networks.csv here")
    sc.set_defaults(func=cmd_score)

    from ..tune import MODELS_HELP, UPDATE_MODES

    tu = sub.add_parser("tune", help="tune a network with MetaSchedule driven by a cost model, "
                                     "compile it, check it against PyTorch and time it")
    tu.add_argument("--network", required=True, help="a zoo network or instance key (tcl zoo list)")
    tu.add_argument("--device", required=True)
    tu.add_argument("--model", default="latest", help=MODELS_HELP)
    any_device_flag(tu)
    tu.add_argument("--trials", type=int_in(1), default=1000,
                    help="MetaSchedule trials over the whole network (at least one per task)")
    tu.add_argument("--update", choices=UPDATE_MODES, default="none",
                    help="a tcl model frozen (none), refit on what the search measures (refit, "
                         "slow), or kept as a prior that an online XGBoost corrects (residual)")
    tu.add_argument("--seed", type=int_in(0), default=0)
    tu.add_argument("--population", type=int_in(2), default=512,
                    help="evolutionary search: schedules the model scores per generation "
                         "(MetaSchedule's default 512; smaller searches faster on small hosts)")
    tu.add_argument("--generations", type=int_in(0), default=4,
                    help="evolutionary search: generations per round (MetaSchedule's default 4)")
    tu.add_argument("--out", help="output directory (default: <data>/tuning/<network>-<device>-...)")
    tu.add_argument("--dry-run", action="store_true",
                    help="print the tasks, trials per task and estimated time; tune nothing")
    tu.set_defaults(func=cmd_tune)

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

    st = sub.add_parser("status", help="per device: records, hosts, latest model, what is "
                                       "pending")
    st.add_argument("--format", choices=["table", "csv", "json"], default="table")
    st.add_argument("--params", default="params.yaml",
                    help="which tasks the models train on: its zoo.networks and sample caps "
                         "(default: params.yaml, where it exists and names this data root)")
    st.set_defaults(func=cmd_status)
    sv = sub.add_parser("serve", help="serve the add-device (event-triggered) and refresh "
                                      "(scheduled) deployments until interrupted")
    sv.add_argument("--params", default="params.yaml")
    sv.set_defaults(func=cmd_serve)

    dc = sub.add_parser("datacard", help="dataset statistics, noise and device landscapes")
    dc.add_argument("--out", help="directory of datacard.md (default: <data>/reports/datacard)")
    dc.add_argument("--remeasure", nargs="*", default=[],
                    help="devices whose records to re-measure in part (noise check)")
    dc.add_argument("--fraction", type=float_in(0.0, 1.0, low_open=True), default=0.01)
    dc.set_defaults(func=cmd_datacard)

    register_pipeline_commands(sub)   # train, evaluate, distill, models, params, stage
    return p


def _one_line(text: str) -> str:
    return " | ".join(line.strip() for line in str(text).strip().splitlines() if line.strip())


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
    from ..measure.interrupt import Interrupted

    try:
        code = args.func(args) or 0
        # a library that caught the KeyboardInterrupt and carried on (MetaSchedule's search
        # does, in places): the user still asked to stop, and the result may be cut short
        return _interrupted() if seen else code
    except Interrupted as e:
        print(f"tcl: {_one_line(e)}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        return _interrupted()
    except BrokenPipeError:  # output piped into `head` and the like
        return 0
    except Exception as e:
        if seen:   # whatever a library made of the interrupt
            return _interrupted()
        if isinstance(e, TclError):
            print(f"tcl: error: {_one_line(e)}", file=sys.stderr)
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
    print(f"tcl: internal error: {type(e).__name__}: {_one_line(e)[:500]} "
          "(set TCL_DEBUG=1 for the traceback)", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
