"""``tcl zoo``: extract the networks' tuning tasks, list the networks, add the user's own."""
from __future__ import annotations

import argparse

import polars as pl

from ..config import Paths
from ..pipeline.params import DEFAULT_FACTORY_TIMEOUT_S, FACTORY_TIMEOUT_RANGE
from .common import _paths, _print_frame, _zoo_tasks, float_in, network_selection, optional_params


def cmd_zoo(args) -> int:
    if args.zoo_command == "add":
        from ..zoo.user import UserNetworks   # lazy: torch costs ~2.6 s at import

        users = UserNetworks(_paths(args, writes=True), _factory_timeout(args))
        inst, new = users.add(args.name, args.model, args.input, args.holdout)
        if not new:
            print(f"{inst.key} is already in the zoo: nothing to add")
            return 0
        print(f"added {inst.key} ({inst.input_shape}{', held out' if inst.holdout else ''}); "
              f"name it in params.yaml's zoo.networks as {inst.network!r}")
        return 0
    if args.zoo_command == "list":
        _print_frame(_zoo_listing(_paths(args, only_reads=True)))
        return 0
    tasks = _zoo_tasks(_paths(args, writes=True), args.networks, small=args.small)
    print(f"{len(tasks)} tasks in the selected networks")
    return 0


def _factory_timeout(args) -> float:
    """``zoo add``: --timeout, else the params file's zoo.factory_timeout_s where the file
    exists, else the default."""
    if args.timeout is not None:
        return args.timeout
    params = optional_params(args.params)
    return DEFAULT_FACTORY_TIMEOUT_S if params is None else params.zoo.factory_timeout_s


def _zoo_listing(paths: Paths):
    """One row per network variant: built-in, long-tail family or the user's, and its tasks
    when extracted."""
    # lazy: torch (the zoo's networks) costs ~2.6 s at import
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


def register(sub: argparse._SubParsersAction) -> None:
    z = sub.add_parser("zoo", help="extract tuning tasks of the networks; add your own (zoo add)")
    network_selection(z)
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
    za.add_argument("--params",
                    help="where zoo.factory_timeout_s is read (default: params.yaml, if any)")
    zsub.add_parser("list", help="the networks: built in, long-tail families and your own")
