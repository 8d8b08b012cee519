"""Benchmark the four cost models on the same split, per device; prints a Markdown table.

Training set: a device's measured programs of the tasks that no held-out network runs (10% of
those tasks kept aside for early stopping); test set: its programs of the held-out networks'
tasks; both among the tasks ``--params`` selects, as in the pipeline. Reported per device and
model: top-1 / top-5 (TenSet, mean over held-out networks), pairwise accuracy, parameters
(XGB: tree nodes), training seconds, scoring programs/s.

    python benchmarks/models.py --data data --devices cpu-avx2,cpu-sse42 --epochs 30 --seeds 0,1,2
    python benchmarks/models.py --synthetic          # plumbing check, no measured data needed

--synthetic draws random features whose latency follows a hidden per-program quality: it checks
that every model trains, scores and saves; its quality numbers MEAN NOTHING about real programs.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import polars as pl

from _common import mean_std, parse_value, pipeline_task_ids
from tcl.config import Paths, TclError, write_text
from tcl.evaluate import evaluate, markdown_table, synthetic_data
from tcl.models import MODEL_KINDS, make_model
from tcl.models.base import ProgramSet
from tcl.dataset import holdout_task_ids
from tcl.train import split_tasks  # the same split as the train stage

KINDS = ("mamba", "tenset-mlp", "tlp", "xgb")


def _select(programs: ProgramSet, task_ids: list[str]) -> ProgramSet | None:
    index = np.flatnonzero(np.isin(programs.task_ids.astype(str), task_ids))
    return programs.subset(index) if len(index) else None


def synthetic_split(device_index: int, seed: int):
    """(train, valid, test, networks, tasks) of synthetic data; one draw per device."""
    programs, _, nets, tasks = synthetic_data(n_tasks=15, programs_per_task=48, n_networks=5,
                                              n_holdout=2, seed=seed + 101 * device_index)
    held = set(nets.filter(pl.col("holdout"))["task_id"])
    train_ids, valid_ids = split_tasks([t for t in tasks["task_id"] if t not in held], 0.1, seed)
    return (_select(programs, train_ids), _select(programs, valid_ids),
            _select(programs, sorted(held)), nets, tasks)


def measured_split(paths: Paths, device: str, seed: int, task_ids: set[str] | None = None,
                   sources: list[str] | None = None):
    """(train, valid, test, networks, tasks) from a tcl data root, over the measured tasks
    among ``task_ids`` (None: every measured task); with ``sources`` (``tcl.dataset.SOURCES``,
    as params train.sources) training takes every record of those sources instead, outside
    ``task_ids`` too (the test set stays the held-out tasks among ``task_ids``)."""
    from tcl.dataset import load_program_set, measured, training_records

    for f in (paths.networks_file, paths.tasks_file):
        if not f.exists():
            raise TclError(f"{f} is missing: build the zoo in {paths.root} first (tcl zoo)")
    nets, tasks = pl.read_parquet(paths.networks_file), pl.read_parquet(paths.tasks_file)
    held = holdout_task_ids(paths)
    have = set(measured(paths, device)["task_id"].to_list())
    if task_ids is not None:
        have &= task_ids
    learn = None if sources is None else training_records(paths, device, sources, held=held)
    pool = have if learn is None else set(learn["task_id"].to_list())
    train_ids, valid_ids = split_tasks(sorted(pool - held), 0.1, seed)
    test_ids = sorted(have & held)
    if not train_ids or not test_ids:
        raise TclError(f"device {device!r}: {len(train_ids)} measured training tasks and "
                       f"{len(test_ids)} measured held-out tasks; both must be > 0")
    def load(ids: list[str], records=None):
        return load_program_set(paths, device, ids, records=records) if ids else None

    return load(train_ids, learn), load(valid_ids, learn), load(test_ids), nets, tasks


def hyper(kind: str, epochs: int, xgb_rounds: int, seed: int,
          overrides: dict[str, dict] | None = None) -> dict:
    base = {"num_boost_round": xgb_rounds} if kind == "xgb" else {"epochs": epochs}
    return base | {"seed": seed} | (overrides or {}).get(kind, {})


def parse_set(items: list[str]) -> dict[str, dict]:
    """``kind.key=value`` items -> {kind: {key: value}} (values: ``parse_value``)."""
    out: dict[str, dict] = {}
    for item in items:
        name, sep, value = item.partition("=")
        kind, dot, key = name.partition(".")
        if not sep or not dot or kind not in MODEL_KINDS:
            raise SystemExit(f"--set {item!r}: expected KIND.KEY=VALUE with KIND one of "
                             f"{', '.join(MODEL_KINDS)}, e.g. mamba.lr=7e-4")
        out.setdefault(kind, {})[key] = parse_value(value)
    return out


def bench_one(kind: str, params: dict, split) -> dict:
    train, valid, test, nets, tasks = split
    model = make_model(kind, **params)
    start = time.perf_counter()
    model.fit(train, valid)
    train_secs = time.perf_counter() - start
    model.predict(test.subset(np.arange(min(64, len(test)))))  # warm-up (lazy init, threads)
    start = time.perf_counter()
    scores = model.predict(test)
    rate = len(test) / (time.perf_counter() - start)
    frame = evaluate({kind: scores}, test, None, nets, tasks)
    mean = frame.filter(pl.col("scope") == "mean").row(0, named=True)
    n_params = getattr(model, "n_parameters", lambda: None)()
    return {"top1": mean["top1"], "top5": mean["top5"], "pairwise": mean["pairwise"],
            "params": n_params, "train_s": round(train_secs, 1), "programs_per_s": round(rate),
            "n_train": len(train), "n_test": len(test)}


def seed_summary(table: pl.DataFrame) -> pl.DataFrame:
    """Per device and model: mean (std) of the quality columns over seeds, and Mamba's top-1
    margin over TenSet-MLP where both ran: its mean over seeds, the standard error of that mean
    (paired by seed), and in how many seeds Mamba was ahead."""
    summary = mean_std(table, ["device", "model"], ["top1", "top5", "pairwise"]).join(
        table.group_by("device", "model").agg(pl.col("train_s").mean().round(1)),
        on=["device", "model"], how="left")
    wide = table.pivot(on="model", index=["device", "seed"], values="top1")
    if {"mamba", "tenset-mlp"} <= set(wide.columns):
        diff = pl.col("mamba") - pl.col("tenset-mlp")
        margin = wide.group_by("device").agg(
            diff.mean().round(3).alias("mamba_minus_mlp_top1"),
            (diff.std() / pl.len().sqrt()).round(3).alias("margin_se"),
            (diff > 0).sum().alias("seeds_mamba_ahead"))
        summary = summary.join(margin, on="device", how="left")
    return summary


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--data", type=Path, help="a tcl data root (records, features, zoo)")
    src.add_argument("--synthetic", action="store_true",
                     help="random data: checks the plumbing; quality numbers mean nothing")
    ap.add_argument("--devices", default="", help="comma-separated device names "
                    "(synthetic: any names; default one)")
    ap.add_argument("--params", default="params.yaml", help="with --data: train and test on "
                    "the tasks this params file selects, as the pipeline does")
    ap.add_argument("--models", default=",".join(KINDS), help=f"subset of {','.join(KINDS)}")
    ap.add_argument("--epochs", type=int, default=10, help="neural models' epochs")
    ap.add_argument("--xgb-rounds", type=int, default=1000, help="XGB boosting rounds cap")
    ap.add_argument("--seeds", default="0", help="comma-separated seeds (validation split and "
                    "model initialisation); with several, a mean/std table follows")
    ap.add_argument("--set", action="append", default=[], metavar="KIND.KEY=VALUE",
                    help="a model hyperparameter, e.g. mamba.lr=7e-4 (repeatable)")
    ap.add_argument("--sources", default="", help="train on every record of these sources "
                    "(comma-separated, tcl.dataset.SOURCES, as params train.sources; default: "
                    "the --params tasks' records only)")
    ap.add_argument("--out", type=Path, help="also write the table to this Markdown file")
    args = ap.parse_args(argv)

    kinds = [k for k in args.models.split(",") if k]
    unknown = [k for k in kinds if k not in MODEL_KINDS]
    if unknown:
        ap.error(f"unknown model kinds {unknown}; known: {', '.join(MODEL_KINDS)}")
    devices = [d for d in args.devices.split(",") if d]
    if not devices:
        if args.data:
            ap.error("--devices is required with --data")
        devices = ["synthetic"]
    selected = None if args.synthetic else pipeline_task_ids(args.data.resolve(), args.params)
    seeds = [int(s) for s in args.seeds.split(",") if s]
    overrides = parse_set(args.set)
    rows = []
    for i, device in enumerate(devices):
        for seed in seeds:
            split = (synthetic_split(i, seed) if args.synthetic
                     else measured_split(Paths(args.data.resolve()), device, seed, selected,
                                         [s for s in args.sources.split(",") if s] or None))
            for kind in kinds:
                row = {"device": device, "model": kind, "seed": seed}
                try:
                    params = hyper(kind, args.epochs, args.xgb_rounds, seed, overrides)
                    row |= bench_one(kind, params, split)
                except TclError as e:  # e.g. a model module not written yet: report, keep going
                    row["error"] = str(e)
                rows.append(row)
                print(f"{device} {kind}: {row}", file=sys.stderr, flush=True)
    table = pl.DataFrame(rows)
    md = ("Synthetic data: quality numbers mean nothing.\n\n" if args.synthetic else "") + \
        f"neural epochs {args.epochs}, overrides {overrides or 'none'}\n\n" + markdown_table(table)
    if len(seeds) > 1 and "top1" in table.columns:
        md += "\n\nMean (std) over seeds " + args.seeds + ":\n\n" + markdown_table(seed_summary(table))
    print(md)
    if args.out:
        write_text(args.out, md + "\n", "results table")
    return 0


if __name__ == "__main__":
    sys.exit(main())
