"""Choose model hyperparameters without looking at the held-out networks.

The training tasks of one device are split by task: a quarter is the selection set, the rest
is trained on (10% of it kept for early stopping, as in training). Each configuration is scored
with TenSet's top-1 / top-5 and pairwise accuracy on the selection tasks, weighted by the
training networks that run them. Prints one Markdown table: mean (std) over seeds.

    python benchmarks/select_hyper.py --data data --device cpu-avx2 --seeds 0,1 \
        --config mamba --config mamba:lr=7e-4 --config tenset-mlp

A configuration is KIND[:KEY=VALUE,...]; values are numbers where they parse as numbers.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import polars as pl

from _common import mean_std, parse_value, pipeline_task_ids
from tcl.config import Paths, TclError
from tcl.dataset import load_program_set, training_records
from tcl.evaluate import evaluate, markdown_table
from tcl.models import MODEL_KINDS, make_model
from tcl.train import split_tasks


def parse_config(text: str) -> tuple[str, dict]:
    kind, _, rest = text.partition(":")
    if kind not in MODEL_KINDS:
        raise SystemExit(f"--config {text!r}: unknown kind {kind!r}; known: {', '.join(MODEL_KINDS)}")
    hyper = {}
    for item in filter(None, rest.split(",")):
        key, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"--config {text!r}: expected KEY=VALUE, got {item!r}")
        hyper[key] = parse_value(value)
    return kind, hyper


def selection_split(paths: Paths, device: str, seed: int, task_ids: set[str]):
    """(fit, early-stop, selection) program sets and the training networks frame, over the
    measured training tasks among ``task_ids``."""
    train_ids = sorted(set(training_records(paths, device)["task_id"].to_list()) & task_ids)
    rest, select_ids = split_tasks(train_ids, 0.25, seed)
    fit_ids, stop_ids = split_tasks(rest, 0.1, seed)
    if not fit_ids or not select_ids:
        raise TclError(f"device {device!r}: too few measured training tasks ({len(train_ids)})")
    nets = pl.read_parquet(paths.networks_file).filter(  # training networks, selection tasks
        ~pl.col("holdout") & pl.col("task_id").is_in(select_ids))
    sets = [load_program_set(paths, device, ids) if ids else None
            for ids in (fit_ids, stop_ids, select_ids)]
    return (*sets, nets.with_columns(pl.lit(True).alias("holdout")),
            pl.read_parquet(paths.tasks_file))


def selection_parser(description: str) -> argparse.ArgumentParser:
    """The arguments of a run over the selection split (this script and epoch_curve.py)."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--device", required=True)
    ap.add_argument("--config", action="append", required=True, help="KIND[:KEY=VALUE,...]")
    ap.add_argument("--seeds", default="0,1")
    ap.add_argument("--params", default="params.yaml",
                    help="use the training tasks this params file selects, as the pipeline does")
    return ap


def main(argv: list[str] | None = None) -> int:
    args = selection_parser(__doc__.splitlines()[0]).parse_args(argv)
    paths = Paths(args.data.resolve())
    configs = [(c, *parse_config(c)) for c in args.config]
    selected = pipeline_task_ids(paths.root, args.params)
    rows = []
    for seed in [int(s) for s in args.seeds.split(",")]:
        fit, stop, select, nets, tasks = selection_split(paths, args.device, seed, selected)
        for name, kind, hyper in configs:
            model = make_model(kind, **({"seed": seed} | hyper))
            start = time.perf_counter()
            model.fit(fit, stop)
            secs = time.perf_counter() - start
            frame = evaluate({name: model}, select, None, nets, tasks)
            mean = frame.filter(pl.col("scope") == "mean").row(0, named=True)
            rows.append({"config": name, "seed": seed, "top1": mean["top1"], "top5": mean["top5"],
                         "pairwise": mean["pairwise"], "train_s": secs})
            print(rows[-1], file=sys.stderr, flush=True)
    frame = pl.DataFrame(rows)
    table = mean_std(frame, ["config"], ["top1", "top5", "pairwise"]).join(
        frame.group_by("config").agg(pl.col("train_s").mean().round(1)), on="config")
    print(f"device {args.device}; selection tasks: a quarter of the training tasks; "
          f"fit: {len(fit)} programs, selection: {len(select)} programs (last seed); "
          f"mean (std) over seeds {args.seeds}\n")
    print(markdown_table(table))
    return 0


if __name__ == "__main__":
    sys.exit(main())
