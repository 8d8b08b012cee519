"""``tcl tune``: tune a network with MetaSchedule driven by a cost model, compile it, check it
against PyTorch and time it."""
from __future__ import annotations

import argparse
import sys

from ..tune import (AUTO, AUTO_HELP, CONV_ALGORITHMS, CONV_HELP, LAYOUT_HELP, LAYOUTS, METASCHEDULE_SEARCH, MODELS_HELP, SCHEDULERS,
                    TCL_SEARCH, TCL_UPDATE, UPDATE_MODES, plan_tuning, report_lines, tune_network,
                    versus_line)
from ..store.devices import DeviceRegistry
from .common import MAX_SEED, _paths, any_device_flag, int_in, optional_params, out_path


def cmd_tune(args) -> int:
    if args.dry_run:   # the zoo's tables and earlier runs only: no TVM, no model, no writes
        print(plan_tuning(_paths(args), args.network, args.device, args.model,
                          trials=args.trials, population=args.population,
                          generations=args.generations, layout=args.layout,
                          fast_math=args.fast_math, fuse=args.fuse, conv=args.conv,
                          scheduler=args.scheduler).describe())
        return 0
    if args.out:
        out_path(args.out, "directory")
    paths = _paths(args)
    r = tune_network(paths, args.network, args.device, args.model, trials=args.trials,
                     update=args.update, seed=args.seed, population=args.population,
                     generations=args.generations, scheduler=args.scheduler,
                     layout=args.layout, fast_math=args.fast_math, fuse=args.fuse,
                     conv=args.conv, out=args.out,
                     progress=sys.stderr.isatty(), any_device=args.any_device,
                     sources=_refit_sources(args, paths) if args.update == "refit" else None)
    per_task = ", ".join(f"{n}" for n in r.trials_per_task.values())
    print(f"{r.network} on {r.device} with {r.model}: {r.trials} trials over {r.tasks} tasks "
          f"(per task: {per_task}); tuning {r.tune_s:.0f}s (building {r.build_s:.0f}s, running "
          f"{r.run_s:.0f}s, search overhead {r.overhead_share:.0%}), compile {r.compile_s:.0f}s")
    print(f"compiled network: {r.latency_ms:.3f} ms (std {r.latency_std_ms:.3f}), end to end; "
          f"outputs match PyTorch's within {r.max_abs_err:.2g}")
    print(f"{r.records_added} tuning records added to the store (source tune:{r.network}); "
          f"files in {r.out}/ "
          "(network.so, database/, curve.csv, curve.png, summary.json)")
    print("\n".join(report_lines(r)))
    print(versus_line(r, DeviceRegistry(_paths(args)).get(r.device).num_cores))
    return 0


def _refit_sources(args, paths):
    """The records a refit learns from besides the search's: the params file's train.sources,
    what the device's models learned from, where the file names this data root; else None
    (every record)."""
    params = optional_params(args.params, paths)
    return None if params is None else params.train.sources


def register(sub: argparse._SubParsersAction) -> None:
    tu = sub.add_parser("tune", help="tune a network with MetaSchedule driven by a cost model, "
                                     "compile it, check it against PyTorch and time it")
    tu.add_argument("--network", required=True, help="a zoo network or instance key (tcl zoo list)")
    tu.add_argument("--device", required=True)
    tu.add_argument("--model", default="latest", help=MODELS_HELP)
    any_device_flag(tu)
    # bounds: about 10x the largest documented run (1500 trials) and MetaSchedule's search
    # defaults (population 512, 4 generations); past them a run takes days, or never ends
    tu.add_argument("--trials", type=int_in(1, 20_000), default=1000,
                    help="MetaSchedule trials over the whole network (at least one per task)")
    tu.add_argument("--update", choices=UPDATE_MODES,
                    help="a tcl model frozen (none), refit on what the search measures (refit, "
                         f"slow), or kept as a prior that an online XGBoost corrects (residual; "
                         f"default {TCL_UPDATE} for tcl's models: docs/results.md, \"tcl tune's "
                         "defaults\", says why)")
    tu.add_argument("--params",
                    help="with --update refit: its train.sources are the records the refit "
                         "learns from besides the search's (default: params.yaml, where it "
                         "exists and names this data root; else every record)")
    tu.add_argument("--seed", type=int_in(0, MAX_SEED), default=0)
    tu.add_argument("--population", type=int_in(2, 8192),
                    help="evolutionary search: schedules the model scores per generation "
                         f"(default {TCL_SEARCH[0]} for tcl's models, MetaSchedule's "
                         f"{METASCHEDULE_SEARCH[0]} for xgb-online and random)")
    tu.add_argument("--generations", type=int_in(0, 100),
                    help="evolutionary search: generations per round (default "
                         f"{TCL_SEARCH[1]} for tcl's models, MetaSchedule's "
                         f"{METASCHEDULE_SEARCH[1]} for xgb-online and random)")
    tu.add_argument("--scheduler", choices=SCHEDULERS, default="gradient",
                    help="MetaSchedule's task scheduler: gradient (the default, as "
                         "MetaSchedule's) collects no result before every task had its first "
                         "round, so online models learn nothing then; round-robin collects each "
                         "task's as it finishes; auto: round-robin at a budget of one round per "
                         "task, else gradient")
    tu.add_argument("--layout", choices=(AUTO, *LAYOUTS), default=AUTO,
                    help=LAYOUT_HELP + f"; {AUTO} (the default): {AUTO_HELP}")
    tu.add_argument("--fast-math", action="store_true",
                    help="erf, exp, tanh, softmax and gelu as fast approximations (TOPI's "
                         "fast_erf, fast_exp, fast_tanh: within 1e-6 or so), as onnxruntime "
                         "computes gelu; the default keeps Relax's exact functions")
    tu.add_argument("--no-fuse", dest="fuse", action="store_false",
                    help="leave out Relax's operator fusion: every operator its own kernel and "
                         "task (what fusion is worth, or a per-operator profile); the default "
                         "fuses elementwise operators into their producer")
    tu.add_argument("--conv", choices=(AUTO, *CONV_ALGORITHMS), default=AUTO,
                    help=CONV_HELP + f"; {AUTO} (the default): {AUTO_HELP}")
    tu.add_argument("--out", help="output directory (default: <data>/tuning/<network>-<device>-...)")
    tu.add_argument("--dry-run", action="store_true",
                    help="print the tasks, trials per task and estimated time; tune nothing")
    tu.set_defaults(func=cmd_tune)
