"""How a model's ranking quality moves from one training epoch to the next.

Trains each configuration for ``--epochs`` epochs without early stopping on the fit tasks of
``select_hyper.py``'s split and records, after each epoch, the loss on the early-stopping tasks
and top-1 / pairwise accuracy on the selection tasks (never the held-out networks). Prints the
means over windows of epochs: where ranking stops improving, whether the loss says so, and how
much top-1 moves from one epoch to the next (the luck of the epoch at which training stops).

    python benchmarks/epoch_curve.py --data data --device cpu-avx2 --config mamba \
        --config tenset-mlp --epochs 120
"""
from __future__ import annotations

import sys

import polars as pl

from _common import pipeline_task_ids
from select_hyper import parse_config, selection_parser, selection_split
from tcl.config import Paths
from tcl.evaluate import evaluate, markdown_table
from tcl.models import make_model
from tcl.models.nn import NeuralCostModel


def main(argv: list[str] | None = None) -> int:
    ap = selection_parser(__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=40)
    ap.add_argument("--window", type=int, default=20, help="epochs per summary row")
    ap.add_argument("--rows", action="store_true", help="also print every epoch's row")
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
    windows = frame.with_columns(((pl.col("epoch") - 1) // args.window).alias("w")).group_by(
        ["config", "seed", "w"], maintain_order=True).agg(
        pl.format("{}-{}", pl.col("epoch").min(), pl.col("epoch").max()).alias("epochs"),
        *[pl.col(c).mean().round(3) for c in ("stop_loss", "top1", "pairwise")],
        pl.col("top1").diff().abs().mean().round(3).alias("top1_step_change")).drop("w")
    print(f"device {args.device}; mean over windows of {args.window} epochs; stop_loss: the "
          f"training loss on the early-stopping tasks; top1, pairwise: on the selection tasks; "
          f"top1_step_change: mean |change| of top-1 from one epoch to the next\n")
    print(markdown_table(windows))
    if args.rows:
        print()
        print(markdown_table(frame.with_columns(pl.col(c).round(3) for c in
                                                ("stop_loss", "top1", "pairwise"))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
