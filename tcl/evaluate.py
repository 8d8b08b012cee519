"""Evaluation harness: models x held-out networks (x devices) -> top-1, top-5, pairwise accuracy.

Every number comes from ``tcl.metrics``; this module only aligns programs with latencies,
scores them once per model and writes the report (Markdown, metrics JSON for DVC, a PNG).
"""
from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import polars as pl

from . import metrics
from .config import TclError, save_figure, write_text
from .models.base import CostModel, ProgramSet
from .tokens import PER_STORE_WIDTH, TOKEN_WIDTH, VOCAB

KS = (1, 5)
OP_CLASSES = ("conv", "depthwise_conv", "dense", "batch_matmul", "pool", "reduction", "softmax",
              "norm", "injective", "other")
_VALUES = ["top1", "top5", "pairwise"]


def _latency_frame(latency: pl.DataFrame) -> pl.DataFrame:
    """program_id, task_id, latency (+ device): from a ``latency`` column or raw records."""
    if not isinstance(latency, pl.DataFrame):
        raise TclError("latency must be a polars DataFrame with program_id, task_id and latency "
                       "(or records' latencies + status) columns")
    if "latency" not in latency.columns and {"latencies", "status"} <= set(latency.columns):
        latency = latency.with_columns(metrics.latency_expr())
    missing = {"program_id", "task_id", "latency"} - set(latency.columns)
    if missing:
        raise TclError(f"latency frame lacks columns {sorted(missing)}; it has {latency.columns}")
    cols = ["program_id", "task_id", "latency"] + (["device"] if "device" in latency.columns else [])
    return latency.select(cols).with_columns(pl.col("latency").cast(pl.Float64).fill_null(np.nan))


def _scores(models: Mapping[str, CostModel | np.ndarray], programs: ProgramSet) -> dict:
    out = {}
    for name, model in models.items():
        s = model if isinstance(model, np.ndarray) else model.predict(programs)
        s = np.asarray(s, np.float64)
        if s.shape != (len(programs),):
            raise TclError(f"model {name!r} gave scores of shape {s.shape}; expected "
                           f"({len(programs)},), one per program")
        out[name] = s
    return out


def evaluate(models: Mapping[str, CostModel | np.ndarray], programs: ProgramSet,
             latency: pl.DataFrame | None, networks_frame: pl.DataFrame, tasks_frame: pl.DataFrame,
             *, ks: Sequence[int] = KS, holdout_only: bool = True) -> pl.DataFrame:
    """One row per (model, device, scope, name); scope is ``network`` (each held-out network),
    ``mean`` (their average) or ``op_class`` (tasks of the held-out networks, per class).

    ``models`` maps a name to a CostModel (scored on ``programs``) or precomputed scores.
    ``latency`` has program_id, task_id, latency (or records' latencies + status) and, for
    several devices, ``device``: each device is evaluated on the programs it measured.
    ``latency=None`` reads ``programs.task_ids`` / ``programs.latency`` (as loaded from the store).
    """
    if not models:
        raise TclError("no models to evaluate")
    if latency is None:
        if programs.task_ids is None or programs.latency is None:
            raise TclError("no latency frame given and the programs carry no task_ids/latency; "
                           "pass latency (program_id, task_id, latency)")
        latency = pl.DataFrame({"program_id": np.asarray(programs.program_ids).astype(str),
                                "task_id": np.asarray(programs.task_ids).astype(str),
                                "latency": np.asarray(programs.latency, np.float64)})
    lat = _latency_frame(latency)
    nets = networks_frame
    if holdout_only and "holdout" in nets.columns:
        nets = nets.filter(pl.col("holdout"))
        if nets.is_empty():
            raise TclError("networks frame has no held-out network (holdout = true); mark some "
                           "or pass holdout_only=False")
    weights = nets.group_by("task_id").agg(pl.col("weight").sum())
    scores = _scores(models, programs)
    index = pl.DataFrame({"program_id": np.asarray(programs.program_ids).astype(str),
                          "_i": np.arange(len(programs))})
    devices = lat["device"].unique(maintain_order=True).to_list() if "device" in lat.columns \
        else [None]
    rows = []
    for device in devices:
        part = lat if device is None else lat.filter(pl.col("device") == device)
        part = part.join(index, on="program_id", how="inner") \
            .filter(pl.col("task_id").is_in(nets["task_id"].implode()))
        if part.is_empty():
            raise TclError(f"no program of the held-out networks' tasks has a latency"
                           f"{'' if device is None else f' on device {device!r}'}; "
                           f"check that the programs and the latency frame match")
        i = part["_i"].to_numpy()
        for name, s in scores.items():
            per_task = metrics.task_metrics(s[i], part["latency"].to_numpy(),
                                            part["task_id"].to_numpy(), ks)
            net = metrics.network_metrics(per_task, nets, ks)
            cls = metrics.class_metrics(per_task, tasks_frame, ks, weights)
            # distinct tasks and programs: summing the network rows counts a shared task twice
            mean = net.select(pl.len().alias("n_networks"),
                              pl.lit(len(per_task)).alias("n_tasks"),
                              pl.lit(int(per_task["n_programs"].sum())).alias("n_programs"),
                              *[pl.col(f"top{k}").mean() for k in ks], pl.col("pairwise").mean())
            for scope, frame, key in (("network", net, "network_key"), ("mean", mean, None),
                                      ("op_class", cls, "op_class")):
                frame = frame.with_columns(
                    pl.lit(name).alias("model"), pl.lit(device, pl.Utf8).alias("device"),
                    pl.lit(scope).alias("scope"),
                    (pl.col(key) if key else pl.lit("mean")).alias("name"))
                rows.append(frame.select(
                    "model", "device", "scope", "name",
                    pl.col("n_tasks").cast(pl.Int64), pl.col("n_programs").cast(pl.Int64),
                    *[pl.col(f"top{k}").cast(pl.Float64) for k in ks],
                    pl.col("pairwise").cast(pl.Float64)))
    return pl.concat(rows)


# -- report --------------------------------------------------------------------------------------
def _fmt(v) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    return f"{v:.3f}" if isinstance(v, float) else str(v)


SEED_MARK = "#s"   # evaluate()'s model names for seeds: "<kind>#s<index>"


def over_seeds(frame: pl.DataFrame) -> pl.DataFrame:
    """evaluate()'s frame with models named ``<kind>#s<i>`` folded into one row per kind: each
    figure the mean over seeds, ``se_<figure>`` its standard error, ``n_seeds`` the count."""
    if not frame["model"].str.contains(SEED_MARK, literal=True).any():
        return frame
    values = [c for c in frame.columns if c.startswith("top") or c == "pairwise"]
    keys = ["model", "device", "scope", "name"]
    rest = [c for c in frame.columns if c not in values and c not in keys]
    split = frame.with_columns(pl.col("model").str.split(SEED_MARK).list.first())
    return split.group_by(keys, maintain_order=True).agg(
        *[pl.col(c).mean() for c in values],
        # metrics.standard_error, as a polars expression
        *[(pl.col(c).drop_nans().std(ddof=1) / pl.col(c).drop_nans().count().sqrt())
          .alias(f"se_{c}") for c in values],
        pl.len().alias("n_seeds"), *[pl.col(c).first() for c in rest])


def markdown_table(frame: pl.DataFrame) -> str:
    head = "| " + " | ".join(frame.columns) + " |"
    rule = "|" + "|".join("---" for _ in frame.columns) + "|"
    body = ["| " + " | ".join(_fmt(v) for v in row) + " |" for row in frame.iter_rows()]
    return "\n".join([head, rule, *body])


def _clean(v):
    return None if v is None or (isinstance(v, float) and not math.isfinite(v)) else v


def _metrics_json(frame: pl.DataFrame) -> dict:
    """{device: {model: {"mean": {...}, "network": {name: {...}}, "op_class": {...}}}}."""
    values = [c for c in frame.columns if c.startswith("top") or c == "pairwise"]
    out: dict = {}
    for row in frame.iter_rows(named=True):
        node = out.setdefault(row["device"] or "all", {}).setdefault(row["model"], {})
        seeded = [f"se_{v}" for v in values if f"se_{v}" in row] + ["n_seeds"] * ("n_seeds" in row)
        entry = {c: _clean(row[c]) for c in values + ["n_tasks"] + seeded}
        if row["scope"] == "mean":
            node["mean"] = entry
        else:
            node.setdefault(row["scope"], {})[row["name"]] = entry
    return out


def _plot(frame: pl.DataFrame, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    mean = frame.filter(pl.col("scope") == "mean")
    values = [c for c in frame.columns if c.startswith("top") or c == "pairwise"]
    devices = mean["device"].fill_null("all").unique(maintain_order=True).to_list()
    fig, axes = plt.subplots(1, len(devices), figsize=(4.5 * len(devices), 3.6), squeeze=False)
    for ax, device in zip(axes[0], devices):
        part = mean.filter(pl.col("device").fill_null("all") == device)
        models = part["model"].to_list()
        width = 0.8 / max(len(models), 1)
        for m, model in enumerate(models):
            row = part.filter(pl.col("model") == model).row(0, named=True)
            err = [_clean(row.get(f"se_{v}")) or 0.0 for v in values]
            ax.bar(np.arange(len(values)) + m * width, [_clean(row[v]) or 0.0 for v in values],
                   width, yerr=err if any(err) else None, capsize=2, label=model)
        ax.set_xticks(np.arange(len(values)) + width * (len(models) - 1) / 2, values)
        ax.set_ylim(0, 1.05)
        ax.set_title(f"{device}: mean over held-out networks", fontsize=9)
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    save_figure(fig, path, "report plot", dpi=110)
    plt.close(fig)


def _with_se(c: str) -> pl.Expr:
    """A figure as text, "mean ± se" (over_seeds' columns)."""
    def text(row: dict) -> str:
        mean, se = row[c], row[f"se_{c}"]
        return _fmt(mean) + ("" if mean is None or mean != mean else f" ± {_fmt(se)}")

    return pl.struct(c, f"se_{c}").map_elements(text, return_dtype=pl.String).alias(c)


def write_report(frame: pl.DataFrame, out_dir: str | Path) -> dict[str, Path]:
    """evaluation.md (tables), metrics.json (DVC metrics) and evaluation.png (bar chart)."""
    missing = {"model", "device", "scope", "name", "pairwise"} - set(frame.columns)
    if missing or frame.is_empty():
        raise TclError(f"report needs evaluate()'s frame; got columns {frame.columns}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    values = [c for c in frame.columns if c.startswith("top") or c == "pairwise"]
    seeded = "n_seeds" in frame.columns
    cells = [_with_se(c) if seeded else pl.col(c) for c in values]

    def show(scope: str, key: str | None) -> pl.DataFrame:
        keys = [pl.col("name").alias(key)] if key else []
        return frame.filter(pl.col("scope") == scope).sort(
            "device", *(["name"] if key else []), "model").select(
            pl.col("device").fill_null("all"), *keys, "model", *cells, "n_tasks", "n_programs",
            *(["n_seeds"] if seeded else []))

    seeds_note = (" Each figure: the mean over the training seeds (n_seeds, params.yaml's "
                  "train.seeds) ± its standard error." if seeded else "")
    md = ["# Cost-model evaluation on held-out networks", "",
          "Top-k: TenSet's score (weighted best latency / best latency among the top-k ranked "
          "programs). Pairwise: share of same-task pairs ordered correctly. See tcl/metrics.py."
          + seeds_note,
          "", "## Mean over held-out networks", "", markdown_table(show("mean", None)),
          "", "## Per held-out network", "", markdown_table(show("network", "network")),
          "", "## Per operator class (tasks of the held-out networks)", "",
          markdown_table(show("op_class", "op_class")), ""]
    paths = {"markdown": out / "evaluation.md", "metrics": out / "metrics.json",
             "plot": out / "evaluation.png"}
    write_text(paths["markdown"], "\n".join(md), "report file")
    write_text(paths["metrics"], json.dumps(_metrics_json(frame), indent=2, sort_keys=True),
               "report file")
    _plot(frame, paths["plot"])
    return paths


# -- synthetic data (smoke tests and benchmark plumbing only: the numbers mean nothing) ----------
def synthetic_data(n_tasks: int = 12, programs_per_task: int = 40, n_networks: int = 4,
                   n_holdout: int = 1, seed: int = 0
                   ) -> tuple[ProgramSet, pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """(programs with labels, latency frame, networks frame, tasks frame) where latency follows
    a hidden per-program quality that both feature kinds see, plus noise and ~2% errors."""
    if n_tasks < 2 or programs_per_task < 1 or not 0 < n_holdout < n_networks:
        raise TclError("synthetic data needs n_tasks >= 2, programs_per_task >= 1 and "
                       "0 < n_holdout < n_networks")
    rng = np.random.default_rng(seed)
    n = n_tasks * programs_per_task
    group = np.repeat(np.arange(n_tasks), programs_per_task)
    quality = rng.normal(size=n)
    n_stores = rng.integers(1, 5, n)
    n_tokens = rng.integers(4, 13, n)
    per_store = rng.normal(scale=0.5, size=(n_stores.sum(), PER_STORE_WIDTH)).astype(np.float32)
    per_store[:, :8] += np.repeat(quality, n_stores)[:, None]
    tokens = rng.normal(size=(n_tokens.sum(), TOKEN_WIDTH)).astype(np.float32)
    tokens[:, 0] = rng.integers(2, len(VOCAB), len(tokens))
    tokens[:, 1] += np.repeat(quality, n_tokens)
    scale = 10.0 ** rng.uniform(-5, -2, n_tasks)
    latency = scale[group] * np.exp(-0.8 * quality + 0.2 * rng.normal(size=n))
    latency[rng.random(n) < 0.02] = np.nan
    task_ids = np.array([f"task{t:03d}" for t in range(n_tasks)])
    program_ids = np.array([f"{task_ids[g]}-p{i}" for i, g in enumerate(group)])
    offsets = lambda c: np.concatenate([[0], np.cumsum(c)]).astype(np.int64)  # noqa: E731
    programs = ProgramSet(program_ids, group.astype(np.int64), per_store, offsets(n_stores),
                          tokens, offsets(n_tokens), metrics.labels(latency, group),
                          task_ids=task_ids[group], latency=latency)
    lat = pl.DataFrame({"program_id": program_ids, "task_id": task_ids[group], "latency": latency})
    # Held-out networks use the first third of the tasks; training networks the rest.
    split = max(1, n_tasks // 3)
    rows = []
    for k in range(n_networks):
        holdout = k < n_holdout
        pool = np.arange(split) if holdout else np.arange(split, n_tasks)
        chosen = rng.choice(pool, size=max(1, min(len(pool), 2 + len(pool) // 2)), replace=False)
        rows += [{"network": f"net{k}", "batch": 1, "input_shape": "synthetic",
                  "network_key": f"net{k}-b1", "task_id": task_ids[t],
                  "weight": int(rng.integers(1, 5)), "holdout": holdout} for t in chosen]
    tasks = pl.DataFrame({"task_id": task_ids, "task_name": [f"synthetic_{t}" for t in task_ids],
                          "op_class": rng.choice(OP_CLASSES[:4], n_tasks)})
    return programs, lat, pl.DataFrame(rows), tasks
