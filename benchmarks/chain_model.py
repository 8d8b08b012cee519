"""A device's continual model made again, the way the registry made it, with one family left
out (issue 40, point 1: the budget curve's second network, whose family no training task may
come from) or from other record sources (point 3: with and without the tuning records).

The registry's model for a device (what ``tcl tune --model latest`` uses) comes down a chain:
params.yaml's continual sequence (``continual.first``, ``continual.then``), then the device,
distilled from the sequence's last model as ``tcl device add`` did. This script makes that chain
again. ``--family``: every task of the family's networks is left out of every step (their
records, the distillation pools), the way the long-tail benchmark leaves a family out: a task
the family shares with another network goes too. ``--sources``: what the models learn from
instead of ``train.sources`` (e.g. every source but ``tuning``). It runs in a scratch data root
beside ``--out`` that links to the real one's records, features, selections and zoo, with its
own registry, so the real registry gains nothing. The final model is written to ``--out``
(give it to ``tcl tune --model FILE``, or to budget_curve.py's ``--tcl-model``), with a JSON of
what it learned from.

    taskset -c 1 python benchmarks/chain_model.py --family bert --device zen4-1c \\
        --out data/.cache/chain-model/no-bert.model
    taskset -c 1 python benchmarks/chain_model.py --device zen4-1c \\
        --sources reference,families,user,imported --out data/.cache/chain-model/no-tune.model
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

import polars as pl
import yaml

from _common import report_errors
from tcl.config import TclError, atomic_write, write_text

OWN = ("models",)   # entries of the data root the scratch root keeps to itself


def family_task_ids(paths, family: str) -> set[str]:
    """Task ids of every extracted network of ``family`` (``NetworkSpec.family_name``)."""
    from tcl.zoo.extract import load_networks
    from tcl.zoo.networks import NETWORKS

    names = [n for n, spec in NETWORKS.items() if spec.family_name == family]
    if not names:
        families = sorted({s.family_name for s in NETWORKS.values()})
        raise TclError(f"family {family!r}: expected one of {', '.join(families)}")
    nets = load_networks(paths)
    return set(nets.filter(pl.col("network").is_in(names))["task_id"].to_list())


def scratch_root(data: Path, where: Path) -> Path:
    """A data root at ``where`` that shares ``data``'s every entry but ``OWN`` (links)."""
    if where.exists():
        shutil.rmtree(where)
    where.mkdir(parents=True)
    for entry in data.iterdir():
        if entry.name not in OWN:
            (where / entry.name).symlink_to(entry.resolve())
    return where


def build(args) -> None:
    from tcl.dataset import measured
    from tcl.pipeline.continual import distill_device
    from tcl.pipeline.params import load_params
    from tcl.registry import ModelRegistry

    params = load_params(args.params)
    out = Path(args.out)
    root = scratch_root(params.paths.root, out.with_suffix(".root"))
    raw = yaml.safe_load(Path(args.params).read_text())
    raw["data"] = str(root.resolve())
    if args.sources:
        raw["train"]["sources"] = args.sources.split(",")
    write_text(root.parent / f"{out.stem}.params.yaml", yaml.safe_dump(raw, sort_keys=False),
               "params file")
    params = load_params(root.parent / f"{out.stem}.params.yaml")
    left_out = family_task_ids(params.paths, args.family) if args.family else set()
    chain = list(params.continual.sequence)
    lineage = []
    for i, device in enumerate(chain + [args.device]):
        tasks = sorted(set(measured(params.paths, device)["task_id"].to_list()) - left_out)
        teacher = chain[-1] if device == args.device else None
        r = distill_device(params, device, tasks=tasks, teacher_device=teacher,
                           say=lambda m: print(m, file=sys.stderr))
        lineage.append({"device": device, "id": r.entry.id, "method": r.entry.method,
                        "records": r.entry.n_records, "new": r.metrics.get("new", {})})
    entry = ModelRegistry(params.paths).latest(args.device)
    with atomic_write(out, "model file") as tmp:
        shutil.copyfile(params.paths.root / entry.path, tmp)
    info = {"family": args.family, "sources": list(params.train.sources), "device": args.device,
            "tasks_left_out": len(left_out), "records": entry.n_records, "lineage": lineage,
            "model": str(out)}
    write_text(out.with_suffix(".json"), json.dumps(info, indent=1) + "\n", "model facts file")
    print(f"{out}: {args.device}'s model, family left out: {args.family or 'none'} "
          f"({len(left_out)} tasks), sources {', '.join(params.train.sources)}; "
          f"{entry.n_records} records on {args.device}; held-out: {lineage[-1]['new']}",
          file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--family", help="leave out this zoo family (tcl zoo list), e.g. bert")
    ap.add_argument("--sources", help="train.sources instead of params.yaml's, comma-separated")
    ap.add_argument("--device", required=True, help="the device the model is for, e.g. zen4-1c")
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--out", required=True, help="the model file to write")
    args = ap.parse_args(argv)
    return report_errors("chain_model", lambda: build(args))


if __name__ == "__main__":
    sys.exit(main())
