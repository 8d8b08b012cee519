"""The pipeline's subcommands: ``tcl stage NAME`` (what each DVC stage runs), its shorthands
``train``, ``evaluate`` and ``distill``, and ``tcl params``.

Every knob comes from the params file (``--params``, default ``params.yaml``), validated as a
whole before the stage does anything; the work is one call into ``tcl.pipeline``.
"""
from __future__ import annotations

import argparse

from ..config import TclError, check_writable
from ..continual import DISTILLERS
from ..pipeline import STAGES
from ..pipeline import stages
from ..pipeline.params import DEFAULT_FILE, load_params
from ..store.devices import DeviceRegistry
from .common import _no_data


def cmd_stage(args) -> int:
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
        DeviceRegistry(params.paths).get(args.device)
    if not args.dry_run:   # every stage writes to its data root
        check_writable(params.paths.root)
    if args.name == "measure" and args.dry_run:
        todo = stages.measure_todo(params, args.device)
        print(todo)
        print(f"{int(todo['todo'].sum())} programs to measure on {args.device}")
        return 0
    if args.name in ("measure", "train") and args.device not in params.devices:
        raise TclError(f"device {args.device!r} is not in {args.params}'s devices "
                       f"({', '.join(params.devices)})")
    if args.name == "measure":
        stages.run_measure(params, args.device, progress=not args.quiet)
    elif args.name == "select":
        stages.run_select(params, args.device, progress=not args.quiet)
    elif args.name == "train":
        stages.run_train(params, args.device, args.model)
    elif args.name == "distill":
        stages.run_distill(params, args.device, getattr(args, "method", None))
    elif args.name in ("sample", "featurize"):
        getattr(stages, f"run_{args.name}")(params, progress=not args.quiet)
    else:
        getattr(stages, f"run_{args.name}")(params)
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

    d = sub.add_parser("distill", help="make a device's model from the previous device's "
                                       "(continual.first, continual.then; = tcl stage distill)")
    d.add_argument("--device", required=True)
    d.add_argument("--method", choices=list(DISTILLERS),
                   help="override continual.method (the first device is always trained "
                        "from scratch on its full data)")
    d.add_argument("--params", default=DEFAULT_FILE)
    d.set_defaults(func=cmd_stage, name="distill", model=None, dry_run=False, quiet=False)

    p = sub.add_parser("params", help="validate a params file and summarize it")
    p.add_argument("--params", default=DEFAULT_FILE, help="params file (default: params.yaml)")
    p.set_defaults(func=cmd_params)
