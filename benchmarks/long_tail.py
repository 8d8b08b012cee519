"""The long tail, leave one family out: how the cost models rank architectures they never saw.

Protocol (issue 15, point 3). For each long-tail family (``tcl.zoo.families``: EfficientNet,
Swin, a LLaMA decoder, U-Net, Conformer, MLP-Mixer, DLRM, ConvNeXt), on one device:
- evaluation: the device's measured programs of every task the family's networks run;
- training: every other measured task of the device (the reference dataset's training tasks and
  the other families), never one of the family's tasks (even when a reference network shares
  it) and never a task of a TenSet held-out network; 10% of those tasks are kept aside for
  early stopping (``split_tasks``, as the train stage);
- models: ``--models`` with params.yaml's ``train.hyper`` recipe (the pipeline's, untuned
  here), one fit per (device, family, model, seed); ``random`` scores uniformly at random, the
  floor every model must beat.
Figures (all from ``tcl.metrics``): top-1 / top-5 (TenSet's score with the zoo's task weights,
mean over the family's networks), pairwise accuracy (pooled over its tasks) and the share of its
tasks whose top-1 pick fails (a failed pick zeroes its network's score), per family; top-1 and
pairwise per operator class, pooled over every family's tasks. Seeds give the standard error.

Feature view (issue 27, point 3): ``--features raw|size|both`` (``tcl.features.feature_view``)
for xgb and tenset-mlp; each row records its ``features`` (rows without it are raw), a job is
(device, family, model, seed, view), and the summary shows a view other than raw as a model of
its own (``xgb:size``).

Results: one JSON line per evaluated task per (device, family, model, seed) in ``--results``
(best latency, best-of-top-k picks and pair counts: what the metrics need); a rerun skips the
(device, family, model, seed) jobs already there, so an interrupted run resumes.

    OMP_NUM_THREADS=1 python benchmarks/long_tail.py --data data --devices cpu-avx2,cpu-sse42
    python benchmarks/long_tail.py --data data --summarize --plot docs/bench-long-tail.png

Needs the families measured (``tcl collect --networks FAMILY``) and featurized (``tcl featurize``).
"""
from __future__ import annotations

import argparse
import functools
import json
import math
import sys
import time
from pathlib import Path

import numpy as np
import polars as pl

from _common import report_errors
from tcl import metrics
from tcl.config import Paths, TclError, save_figure
from tcl.features import FEATURE_VIEWS
from tcl.zoo.networks import LONG_TAIL

KS = (1, 5)
CHEAP = ("random", "xgb", "tenset-mlp")   # fitted first, every seed; then the others seed by seed
FEATURE_MODELS = ("xgb", "tenset-mlp")      # the kinds with a ``features`` option


TRAIN_ON = ("all", "reference")   # what the models learn from besides the family left out


def _job_key(row: dict) -> tuple:
    # rows written before the feature views (the training choice) existed are raw (all)
    return (row["device"], row["family"], row["model"], row["seed"], row.get("features", "raw"),
            row.get("train_on", "all"))


def done_jobs(results: Path) -> set[tuple]:
    if not results.exists():
        return set()
    return {_job_key(json.loads(line)) for line in results.read_text().splitlines() if line}


def family_tasks(paths: Paths) -> dict[str, set[str]]:
    """family -> task ids its extracted networks run."""
    from tcl.zoo.extract import load_networks

    nets = load_networks(paths)
    return {f: set(nets.filter(pl.col("network") == f)["task_id"].to_list()) for f in LONG_TAIL
            if (nets["network"] == f).any()}


@functools.lru_cache(maxsize=1)
def device_data(paths: Paths, device: str) -> dict:
    """What every job of one device reads, loaded once: the families' tasks, the device's
    measured tasks and programs, the held-out tasks, the tasks' operator classes."""
    from tcl.dataset import holdout_task_ids, load_program_set, measured

    fam = family_tasks(paths)
    have = set(measured(paths, device).filter(pl.col("latency").is_finite())["task_id"].to_list())
    everything = load_program_set(paths, device, sorted(have))
    return {"fam": fam, "have": have, "everything": everything,
            "tids": everything.task_ids.astype(str), "held": holdout_task_ids(paths),
            "every_family": set().union(*fam.values()),
            "tasks": pl.read_parquet(paths.tasks_file).select("task_id", "op_class")
            .unique("task_id")}


def run_device(paths: Paths, device: str, models: list[str], seeds: list[int], hyper: dict,
               valid_fraction: float, results: Path, families: list[str],
               features: str | None = None, train_on: str = "all") -> None:
    from tcl.models import make_model
    from tcl.train import split_tasks

    done = done_jobs(results)
    # the view each kind reads: --features, else its train.hyper entry's, else raw
    view = lambda kind: "raw" if kind == "random" else \
        features or hyper.get(kind, {}).get("features", "raw")  # noqa: E731
    jobs = [(f, m, s) for f in families for m in models for s in seeds
            if (device, f, m, s, view(m), train_on) not in done]
    if not jobs:
        print(f"{device}: every job is in {results}", file=sys.stderr)
        return
    d = device_data(paths, device)
    fam, have, everything, tids = d["fam"], d["have"], d["everything"], d["tids"]
    held, every_family, tasks = d["held"], d["every_family"], d["tasks"]
    for family, kind, seed in jobs:
        test_ids = sorted(fam[family] & have)
        if not test_ids:
            print(f"{device} {family}: no measured task; skipped", file=sys.stderr)
            continue
        # reference: the other families' tasks are left out of training too (what the
        # families' records add, issue 27 point 1)
        pool = sorted(have - fam[family] - held - (every_family if train_on == "reference"
                                                    else set()))
        train_ids, valid_ids = split_tasks(pool, valid_fraction, seed)
        pick = lambda ids: everything.subset(np.flatnonzero(np.isin(tids, ids)))  # noqa: E731
        test = pick(test_ids)
        start = time.perf_counter()
        if kind == "random":
            scores = np.random.default_rng(seed).random(len(test))
            n_train = 0
        else:
            train, valid = pick(train_ids), pick(valid_ids) if valid_ids else None
            extra = {} if features is None else {"features": features}
            model = make_model(kind, **{**hyper.get(kind, {}), **extra, "seed": seed})
            model.fit(train, valid)
            scores = np.asarray(model.predict(test), np.float64)
            n_train = len(train)
        secs = time.perf_counter() - start
        per_task = metrics.task_metrics(scores, test.latency, test.task_ids.astype(str), KS)
        per_task = per_task.join(tasks, on="task_id", how="left")
        others = len((fam[family] & have) & (every_family - fam[family]))
        with results.open("a") as out:
            for row in per_task.iter_rows(named=True):
                out.write(json.dumps({"device": device, "family": family, "model": kind,
                                      "seed": seed, "features": view(kind),
                                      "train_on": train_on,
                                      "n_train_programs": n_train,
                                      "n_train_tasks": len(train_ids), "fit_secs": round(secs, 1),
                                      "shared_with_other_families": others,
                                      **{k: (v if not isinstance(v, float) or math.isfinite(v)
                                             else None) for k, v in row.items()}}) + "\n")
        top1 = metrics.task_scores(per_task, KS)["top1"].mean()
        print(f"{device} {family:16s} {kind:11s} {view(kind)} seed {seed}: "
              f"{len(test_ids)} tasks, {len(test)} programs; mean task top-1 {top1:.3f}; "
              f"{secs:.0f}s", file=sys.stderr)


# ---------------------------------------------------------------------------------------------
# Summary


def _frame(results: list[Path]) -> pl.DataFrame:
    rows = []
    for f in results:
        if not f.is_file():
            raise TclError(f"{f} does not exist: run the benchmark first (without --summarize)")
        rows += [{**json.loads(line), "_file": f.name} for line in f.read_text().splitlines()
                 if line]
    if not rows:
        raise TclError(f"{', '.join(map(str, results))} hold no results yet")
    frame = pl.DataFrame(rows, infer_schema_length=None).with_columns(
        pl.col("best", "pick1", "pick5").fill_null(float("inf")))
    if "features" in frame.columns:   # a view other than raw is a model of its own: "xgb:size"
        frame = frame.with_columns(pl.when(pl.col("features").fill_null("raw") == "raw")
                                   .then(pl.col("model"))
                                   .otherwise(pl.col("model") + ":" + pl.col("features"))
                                   .alias("model"))
    if "train_on" in frame.columns:   # and so is training on the reference tasks only: "@ref"
        frame = frame.with_columns(pl.when(pl.col("train_on").fill_null("all") == "all")
                                   .then(pl.col("model"))
                                   .otherwise(pl.col("model") + "@ref").alias("model"))
    return frame


def per_run(frame: pl.DataFrame, paths: Paths) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(family rows, operator-class rows): one per (device, model, seed, family / class)."""
    from tcl.zoo.extract import load_networks

    nets = load_networks(paths)
    fam_rows, cls_rows = [], []
    for (device, model, seed), g in frame.group_by(["device", "model", "seed"], maintain_order=True):
        for (family,), t in g.group_by(["family"], maintain_order=True):
            weights = nets.filter(pl.col("network") == family).select("network_key", "task_id",
                                                                        "weight")
            per_net = metrics.network_metrics(t, weights, KS)
            pooled = t["correct"].sum() / t["pairs"].sum() if t["pairs"].sum() else None
            fam_rows.append({"device": device, "model": model, "seed": seed, "family": family,
                             "n_tasks": len(t), "n_programs": int(t["n_programs"].sum()),
                             "top1": per_net["top1"].mean(), "top5": per_net["top5"].mean(),
                             "pairwise": pooled, "fail1": metrics.failed_pick_share(t, 1)})
        classes = metrics.class_metrics(g.select("task_id", "n_programs", "best", "pick1", "pick5",
                                                 "pairs", "correct"),
                                        g.select("task_id", "op_class").unique("task_id"), KS)
        for row in classes.iter_rows(named=True):
            cls_rows.append({"device": device, "model": model, "seed": seed, **row})
    return pl.DataFrame(fam_rows), pl.DataFrame(cls_rows)


def mean_se(frame: pl.DataFrame, by: list[str], values: list[str]) -> pl.DataFrame:
    """Mean and standard error over seeds of each value, per ``by`` group."""
    return frame.group_by(by, maintain_order=True).agg(
        pl.len().alias("seeds"),
        *[pl.col(v).mean().alias(v) for v in values],
        *[(pl.col(v).std() / pl.len().sqrt()).alias(f"{v}_se") for v in values])


def _cell(mean, se) -> str:
    if mean is None or (isinstance(mean, float) and math.isnan(mean)):
        return "-"
    return f"{mean:.3f}" if se is None or math.isnan(se) else f"{mean:.3f}±{se:.3f}"  # 1 seed: no SE


def markdown(frame: pl.DataFrame, key: str, value: str, models: list[str]) -> str:
    """One table: rows ``key`` (family or op_class) x device, a column per model of ``value``."""
    stats = mean_se(frame, ["device", key, "model"], [value])
    head = f"| device | {key} | tasks | " + " | ".join(models) + " |"
    lines = [head, "|" + "---|" * (3 + len(models))]
    for (device, name), g in stats.group_by(["device", key], maintain_order=True):
        cells = {r["model"]: _cell(r[value], r[f"{value}_se"]) for r in g.iter_rows(named=True)}
        n = frame.filter((pl.col("device") == device) & (pl.col(key) == name))["n_tasks"].max()
        lines.append(f"| {device} | {name} | {n} | " + " | ".join(cells.get(m, "-") for m in models)
                     + " |")
    return "\n".join(lines)


def plot(fam: pl.DataFrame, models: list[str], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    devices = fam["device"].unique(maintain_order=True).to_list()
    fig, axes = plt.subplots(len(devices), 2, figsize=(13, 3.6 * len(devices)), squeeze=False)
    stats = mean_se(fam, ["device", "family", "model"], ["top1", "pairwise"])
    for i, device in enumerate(devices):
        d = stats.filter(pl.col("device") == device)
        families = d["family"].unique(maintain_order=True).to_list()
        x = np.arange(len(families))
        for j, value in enumerate(["top1", "pairwise"]):
            ax = axes[i][j]
            width = 0.8 / len(models)
            for k, m in enumerate(models):
                g = d.filter(pl.col("model") == m)
                lookup = {r["family"]: r for r in g.iter_rows(named=True)}
                ys = [lookup.get(f, {}).get(value) or 0 for f in families]
                es = [lookup.get(f, {}).get(f"{value}_se") or 0 for f in families]
                ax.bar(x + (k - (len(models) - 1) / 2) * width, ys, width, yerr=es, label=m,
                       capsize=2)
            ax.set_xticks(x, families, rotation=30, ha="right", fontsize=8)
            ax.set_ylim(0, 1)
            ax.set_title(f"{device}: {value} (leave one family out)", fontsize=10)
            if i == 0 and j == 0:
                ax.legend(fontsize=7, ncol=3)
    fig.tight_layout()
    save_figure(fig, out, "plot", dpi=110)


# Issue 27's targets for the default model, per family and device.
TARGET_TOP1_OVER_RANDOM = 0.15
TARGET_PAIRWISE = 0.65


def targets(fam: pl.DataFrame, model: str) -> str:
    """Met or missed, per family and device, for ``model``: top-1 >= random's +
    ``TARGET_TOP1_OVER_RANDOM``, top-1 never below random's, pairwise >= ``TARGET_PAIRWISE``
    (means over seeds)."""
    stats = mean_se(fam, ["device", "family", "model"], ["top1", "pairwise"])
    lines = [f"| device | family | random top-1 | {model} top-1 | {model} pairwise | "
             f"top-1 >= random + {TARGET_TOP1_OVER_RANDOM} | top-1 >= random | "
             f"pairwise >= {TARGET_PAIRWISE} |",
             "|---|---|---|---|---|---|---|---|"]
    met = total = 0
    for (device, family), g in stats.group_by(["device", "family"], maintain_order=True):
        by = {r["model"]: r for r in g.iter_rows(named=True)}
        if model not in by or "random" not in by:
            continue
        m, r = by[model], by["random"]
        checks = [m["top1"] >= r["top1"] + TARGET_TOP1_OVER_RANDOM, m["top1"] >= r["top1"],
                  m["pairwise"] >= TARGET_PAIRWISE]
        total += 1
        met += all(checks)
        word = lambda ok: "met" if ok else "**missed**"  # noqa: E731
        lines.append(f"| {device} | {family} | {_cell(r['top1'], r['top1_se'])} | "
                     f"{_cell(m['top1'], m['top1_se'])} | "
                     f"{_cell(m['pairwise'], m['pairwise_se'])} | "
                     + " | ".join(word(c) for c in checks) + " |")
    lines.append(f"\n{model}: all three targets met in {met} of {total} (device, family) cells")
    return "\n".join(lines)


def summarize(results: list[Path], paths: Paths, plot_file: Path | None,
              target_model: str | None = None, only: list[str] | None = None) -> None:
    frame = _frame(results)
    if only:   # per file, e.g. random from one and the seeded kinds from another
        keep = pl.lit(False)
        for label in only:
            name, _, source = label.partition("=")
            cond = pl.col("model") == name
            if source:
                cond = cond & (pl.col("_file") == source)
            keep = keep | cond
        frame = frame.filter(keep)
    fam, cls = per_run(frame, paths)
    order = ["random", "xgb", "tenset-mlp", "mamba", "tlp"]
    models = [m for m in order if m in set(fam["model"])] + \
        sorted(set(fam["model"]) - set(order))
    print(f"Leave one family out ({', '.join(map(str, results))}); mean±SE over seeds. Top-1 "
          "(TenSet score, mean over the family's networks):\n")
    print(markdown(fam, "family", "top1", models))
    print("\nPairwise accuracy (pooled over the family's tasks):\n")
    print(markdown(fam, "family", "pairwise", models))
    print("\nShare of the family's tasks whose top-1 pick fails (timeout, run or build error):\n")
    print(markdown(fam, "family", "fail1", models))
    print("\nTop-1 per operator class (every family's tasks, pooled):\n")
    print(markdown(cls, "op_class", "top1", models))
    print("\nPairwise accuracy per operator class:\n")
    print(markdown(cls, "op_class", "pairwise", models))
    if target_model is not None:
        print(f"\nTargets (issue 27) for {target_model}:\n")
        print(targets(fam, target_model))
    seeds = frame.group_by("device", "family", "model").agg(pl.col("seed").n_unique())
    print(f"\nseeds per (device, family, model): {seeds['seed'].min()}-{seeds['seed'].max()}")
    if plot_file is not None:
        plot(fam, models, plot_file)
        print(f"plot: {plot_file}")


def run(args, paths: Paths, results: Path) -> None:
    """Leave each family out in turn, per device and model kind; results are appended."""
    from tcl.pipeline.params import load_params

    params = load_params(args.params, check_models=False)
    results.parent.mkdir(parents=True, exist_ok=True)
    families = args.families.split(",")
    unknown = set(families) - set(LONG_TAIL)
    if unknown:
        raise TclError(f"unknown families {sorted(unknown)}; expected some of {LONG_TAIL}")
    models = args.models.split(",")
    seeds = [int(s) for s in args.seeds.split(",")]
    random_seeds = [int(s) for s in args.random_seeds.split(",")]
    if args.features is not None and set(models) - set(FEATURE_MODELS) - {"random"}:
        raise TclError(f"--features {args.features} applies to {list(FEATURE_MODELS)} (and "
                       f"random, which reads no features); got --models {args.models}")
    cheap = [m for m in models if m in CHEAP]
    slow = [m for m in models if m not in CHEAP]
    for device in args.devices.split(","):
        fit = lambda kinds, seeds_: run_device(  # noqa: E731
            paths, device, kinds, seeds_, params.train.hyper, params.train.valid_fraction,
            results, families, args.features, args.train_on)
        if "random" in models:
            fit(["random"], random_seeds)
        for kind in [m for m in cheap if m != "random"]:
            fit([kind], seeds)
        for seed in seeds:      # slow kinds seed by seed: an interrupted run has every kind
            for kind in slow:
                fit([kind], [seed])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default="data")
    ap.add_argument("--params", default="params.yaml", help="train.hyper and valid_fraction")
    ap.add_argument("--devices", default="cpu-avx2,cpu-sse42")
    ap.add_argument("--models", default="random,xgb,tenset-mlp,mamba,tlp")
    ap.add_argument("--families", default=",".join(LONG_TAIL))
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--random-seeds", default="0,1,2,3,4,5,6,7,8,9",
                    help="seeds of the random ranking (cheap: more of them)")
    ap.add_argument("--features", choices=FEATURE_VIEWS,
                    help="per-store feature view of the models (tcl.features.feature_view; "
                         "default: train.hyper's, else raw), recorded in each row; rows of "
                         "different views never mix")
    ap.add_argument("--train-on", choices=TRAIN_ON, default="all",
                    help="all: every other measured task (the reference tasks and the other "
                         "families); reference: the reference tasks only (a model of its own "
                         "in the summary, model@ref)")
    ap.add_argument("--results", default="docs/bench-long-tail.jsonl",
                    help="the results file; with --summarize, several comma-separated")
    ap.add_argument("--only", help="with --summarize: only these models (labels as in the "
                                   "tables, e.g. random,xgb:size), each optionally from one "
                                   "results file: mamba=bench-long-tail-seeds.jsonl")
    ap.add_argument("--targets", metavar="MODEL",
                    help="with --summarize: issue 27's targets for this model, e.g. "
                         "tenset-mlp:size")
    ap.add_argument("--summarize", action="store_true")
    ap.add_argument("--plot", help="with --summarize: write the plot here")
    args = ap.parse_args(argv)
    paths, results = Paths(Path(args.data).resolve()), Path(args.results)
    if args.summarize:
        return report_errors("long_tail", lambda: summarize(
            [Path(f) for f in args.results.split(",")], paths,
            Path(args.plot) if args.plot else None, args.targets,
            args.only.split(",") if args.only else None))
    return report_errors("long_tail", lambda: run(args, paths, results))


if __name__ == "__main__":
    sys.exit(main())
