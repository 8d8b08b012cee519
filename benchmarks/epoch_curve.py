"""How a model's ranking quality moves from one training epoch to the next.

Trains each configuration for ``--epochs`` epochs without early stopping on the fit tasks of ``select_hyper.py``'s split and prints, after each epoch, the early-stopping loss
and top-1 / pairwise accuracy on the selection tasks (never the held-out networks). Shows how
much of a seed's score is the luck of the epoch at which training stops.

    python benchmarks/epoch_curve.py --data data --device cpu-avx2 --config mamba --epochs 40
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import polars as pl

from _common import pipeline_task_ids
from select_hyper import parse_config, selection_split
from tcl.config import Paths
from tcl.evaluate import evaluate, markdown_table
from tcl.models import make_model
from tcl.models.nn import NeuralCostModel


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--device", required=True)
    ap.add_argument("--config", action="append", required=True, help="KIND[:KEY=VALUE,...]")
    ap.add_argument("--seeds", default="0,1")
    ap.add_argument("--epochs", type=int, default=40)
    ap.add_argument("--params", default="params.yaml")
    args = ap.parse_args(argv)
    paths = Paths(args.data.resolve())
    selected = pipeline_task_ids(paths.root, args.params)
    rows = []
    for seed in [int(s) for s in args.seeds.split(",")]:
        fit, stop, select, nets, tasks = selection_split(paths, args.device, seed, selected)
        for name in args.config:
            kind, hyper = parse_config(name)
            model = make_model(kind, **({"seed": seed} | hyper | {"epochs": args.epochs}))
            if not isinstance(model, NeuralCostModel):
                raise SystemExit(f"--config {name!r}: only the neural models train in epochs")

            def record(epoch: int) -> None:
                mean = evaluate({name: model}, select, None, nets, tasks).filter(
                    pl.col("scope") == "mean").row(0, named=True)
                rows.append({"config": name, "seed": seed, "epoch": epoch,
                             "stop_loss": model.loss(stop), "top1": mean["top1"],
                             "pairwise": mean["pairwise"]})
            model.fit(fit, on_epoch=record)
    frame = pl.DataFrame(rows)
    late = frame.filter(pl.col("epoch") > args.epochs // 2)
    swing = late.sort("epoch").group_by(["config", "seed"], maintain_order=True).agg(
        pl.col("top1").mean().round(3).alias("top1_mean"),
        pl.col("top1").min().round(3).alias("top1_min"),
        pl.col("top1").max().round(3).alias("top1_max"),
        pl.col("top1").diff().abs().mean().round(3).alias("top1_step_change"),
        pl.col("pairwise").mean().round(3).alias("pairwise_mean"))
    print(f"device {args.device}; per-epoch rows, then the second half of training "
          f"(epochs {args.epochs // 2 + 1}-{args.epochs}) summarized\n")
    print(markdown_table(frame.with_columns(pl.col(c).round(3) for c in
                                            ("stop_loss", "top1", "pairwise"))))
    print()
    print(markdown_table(swing))
    return 0


if __name__ == "__main__":
    sys.exit(main())
