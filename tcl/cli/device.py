"""``tcl device``: list the devices; add one, which triggers the add-device run (served by
Prefect where a server runs, else here)."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import psutil

from ..config import TclError
from ..hosts import check_this_host_may_measure, host_kind, measured_hosts, native_target
from ..store.devices import (Device, DeviceRegistry, MeasureSettings, check_cores,
                             host_identity)
from ..pipeline.events import check_served_params, emit_device_added, server_configured
from ..measure.devices import create
from ..pipeline.params import DEFAULT_FILE, load_params
from .common import Parser, _paths, float_in, int_in, optional_params


def cmd_device(args) -> int:
    # a dry run's data root is the params file's, read only
    reg = DeviceRegistry(_paths(args, writes=args.action == "add" and not args.dry_run,
                                only_reads=args.action == "list"))
    if args.action == "add":
        # --params as given (None: not given) for the tracker's retries, the file itself for the run
        given, args.params = args.params, args.params or DEFAULT_FILE
        if given is not None and not args.run:   # read by no run, yet named: it must exist
            optional_params(given)
        _name_and_target(args, reg)
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
                        measure=measure, replace=args.replace,
                        check=_tracker_check(args, given))
            print(f"added device {d.name}: {json.dumps(d.target)}")
        if args.run:
            return _trigger_add_device(args, params)
        return 0
    measured = measured_hosts(reg.paths)
    here = host_identity()
    for d in reg.all().values():
        kind = create(d)
        try:
            kind.check_runnable()
            ok = kind.where
        except TclError as e:
            ok = f"NOT runnable here: {e}"
        hosts = sorted(measured.get(d.name, ()))
        on = ", ".join(("this host kind" if h == here else host_kind(h)) for h in hosts)
        print(f"{d.name:<14} {json.dumps(d.target):<60} {ok}"
              + (f"; measured on {on}" if on else "; nothing measured yet"))
    return 0


def _name_and_target(args, reg: DeviceRegistry) -> None:
    """--target with a name, or --this-host: this host's native target at --cores, named
    <llvm cpu>-<cores>c unless named, or the registered device that is already exactly that."""
    if args.this_host == (args.target is not None):
        raise TclError("give --target (with a name) or --this-host, one of them")
    if not args.this_host:
        if args.name is None:
            raise TclError("name the device: tcl device add NAME --target JSON")
        return
    if args.rpc_key or args.tracker:
        raise TclError("--this-host is this machine: it takes no --rpc-key or --tracker")
    check_cores(args.cores, "--cores")   # before the name: no znver3-3c on a 2-core host
    target = native_target(args.cores)
    this = Device("this-host", target)   # what --this-host registers, but its name
    same = [d.name for d in reg.all().values() if (d.target, d.kind) == (target, this.kind)]
    args.target = json.dumps(target)
    if args.name is None:
        args.name = same[0] if same else f"{target['mcpu']}-{args.cores}c"
    check_this_host_may_measure(reg.paths, args.name)
    print(f"this host: {host_kind(host_identity())}, LLVM cpu {target['mcpu']}: device "
          f"{args.name} = {args.target}")


def _tracker_check(args, params_given: str | None):
    """A remote device is registered only once its tracker answers (retried by the params
    file's measure.retries / measure.retry_delay_s: the file --params names, which must exist,
    else params.yaml where it exists, else 2 retries 5 s apart): nothing is half-registered."""
    if args.tracker is None:
        return None

    params = optional_params(params_given)
    m = params.measure if params is not None else None
    retries, delay = (m.retries, m.retry_delay_s) if m else (2, 5.0)

    def check(device) -> None:
        try:
            create(device).wait_until_reachable(retries, delay,
                                                say=lambda s: print(s, file=sys.stderr))
        except TclError as e:
            raise TclError(f"{e}; device {device.name!r} is not registered (start the tracker "
                           "and its RPC server, then add the device again)") from None
    return check


def _add_device_params(args):
    """The add-device run's params, checked before the device is registered: the params file
    (validated), its data root (the one --data names, if given) and, where a Prefect server is
    to run it, the params file that server's add-device deployment is bound to (a served run
    with another one would be refused after the event was emitted)."""
    # not at the top: importing prefect_setup sets Prefect's defaults (and makes PREFECT_HOME
    # under the data root), which only `device add` needs, before server_configured loads Prefect
    from ..pipeline.prefect_setup import prefect_defaults

    prefect_defaults()   # idempotent: the import has set them already
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
    # lazy: torch and duckdb (the add-device steps) cost ~3.3 s at import
    from ..pipeline.add_device import step_table

    if server_configured():
        emit_device_added(args.name, args.params)
        print(f"emitted {args.name!r} as tcl.device.added: the add-device deployment that "
              "`tcl serve` serves runs it (watch it in the Prefect UI)")
        return 0
    from ..pipeline.prefect_setup import flow_named, run_flow

    add_device = flow_named("add-device")   # imports prefect (~6 s): only a run here needs it
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
    from ..pipeline.add_device import plan_add_device   # lazy: torch and duckdb, ~3.3 s at import

    params = load_params(args.params)
    if args.data and Path(args.data).resolve() != params.paths.root:
        raise TclError(f"--data {args.data} is not {args.params}'s data root "
                       f"({params.paths.root}); the add-device run uses the params file's")
    device = DeviceRegistry(params.paths).add(args.name, args.target, rpc_key=args.rpc_key,
                                              tracker=args.tracker, measure=measure,
                                              replace=args.replace, dry_run=True)
    print(plan_add_device(params, device, say=lambda s: print(s, file=sys.stderr)).describe())
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    d = sub.add_parser("device", help="list or add devices")
    dsub = d.add_subparsers(dest="action", required=True, parser_class=Parser)
    dsub.add_parser("list", help="built-in profiles and your devices")
    add = dsub.add_parser("add", help="register a device")
    add.add_argument("name", nargs="?",
                     help="the device's name (with --this-host: default <llvm cpu>-<cores>c)")
    add.add_argument("--target", help='TVM target as JSON, e.g. {"kind": "llvm"}')
    add.add_argument("--this-host", action="store_true",
                     help="this host at its native ISA: the target from LLVM's name for this "
                          "CPU (mcpu) and --cores; refused for a name another host kind measured")
    add.add_argument("--cores", type=int_in(1, 1024), default=1,
                     help="with --this-host: threads the device may use (default 1: one "
                          "measuring lane per core)")
    add.add_argument("--rpc-key")
    add.add_argument("--tracker", help="HOST:PORT of a TVM RPC tracker")
    ranges = MeasureSettings.RANGES   # the settings' own ranges, which a registry file meets too
    add.add_argument("--number", type=int_in(*ranges["number"]), default=3,
                     help="kernel runs per repeat (MetaSchedule evaluator)")
    add.add_argument("--repeat", type=int_in(*ranges["repeat"]), default=3,
                     help="repeats kept per record")
    add.add_argument("--min-repeat-ms", type=int_in(*ranges["min_repeat_ms"]), default=40)
    add.add_argument("--timeout", type=float_in(*ranges["timeout_sec"]), default=10.0,
                     help="seconds before a run counts as a timeout")
    add.add_argument("--no-run", dest="run", action="store_false",
                     help="only register: do not trigger the add-device run")
    add.add_argument("--params",
                     help="the add-device run's params file (default: params.yaml)")
    add.add_argument("--replace", action="store_true",
                     help="redefine an existing device (refused while it has records)")
    add.add_argument("--dry-run", action="store_true",
                     help="print the add-device run's plan and estimated time; register, "
                          "sample and measure nothing")
    d.set_defaults(func=cmd_device)
