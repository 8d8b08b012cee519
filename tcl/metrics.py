"""Every metric definition, once: labels, top-k score, pairwise accuracy, per-class, forgetting.

Conventions (tests/test_metrics.py pins them with hand-computed cases):
- Latency of a record: mean of its repeats when status is ok; anything else (errors, NaN, inf,
  <= 0) is "invalid": the program failed (timeout, run or build error) and gets label 0
  (``FAILED_LABEL``), below every running program of its task (labels in (0, 1]). Code that
  treats failures apart (XGBoost's loss) finds them with ``failed``: this rule lives here only.
- Ranking within a task: by score, descending; ties keep input order (stable sort, as TenSet's
  ``argsort``); NaN scores rank last.
- A task with no valid latency carries no information and is left out of top-k and pairwise
  aggregates (counted in ``tasks_missing`` of a network).
- Top-k picks the best latency among the k highest-scored programs; if all k are invalid the pick
  is inf, so the task contributes 0 to its network's numerator/denominator ratio (the chosen
  programs do not run).
- A network none of whose tasks has a valid latency has no top-k score (null, not 0/0 = NaN),
  so averages over networks leave it out.
- Top-1 failures: the share of tasks whose top-1 pick failed (``failed_pick_share``); such a
  pick zeroes its network's score.
- Pairwise accuracy counts each same-task pair with different labels once; a score tie counts
  half (a constant model scores 0.5, chance level).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import polars as pl

from .config import TclError

FAILED_LABEL = 0.0  # the label of a failed program; a running program's label is > 0
_CHUNK = 2048  # rows per broadcast block in pairwise counting (bounds memory at ~32 MB)


def _vec(name: str, values, dtype=np.float64) -> np.ndarray:
    arr = np.asarray(values, dtype=dtype)
    if arr.ndim != 1:
        raise TclError(f"{name} has shape {arr.shape}; expected a 1-d array (one value per program)")
    return arr


def _same_length(**arrays: np.ndarray) -> None:
    lengths = {k: len(v) for k, v in arrays.items()}
    if len(set(lengths.values())) > 1:
        raise TclError(f"arrays differ in length: {lengths}; expected one value per program each")


def _valid(latency: np.ndarray) -> np.ndarray:
    return np.isfinite(latency) & (latency > 0)


def latency_expr(latencies: str = "latencies", status: str = "status") -> pl.Expr:
    """Polars expression: mean of the repeats for ok records, null otherwise."""
    mean = pl.col(latencies).list.mean()
    return pl.when((pl.col(status) == "ok") & (pl.col(latencies).list.len() > 0)).then(mean) \
        .otherwise(None).cast(pl.Float64).alias("latency")


def record_labels(records: pl.DataFrame, by: Sequence[str] = ("device", "task_id")) -> pl.DataFrame:
    """``records`` (RECORD_SCHEMA columns) plus ``latency`` and ``label`` per (device, task)."""
    missing = {"latencies", "status", *by} - set(records.columns)
    if missing:
        raise TclError(f"records lack columns {sorted(missing)}; expected RECORD_SCHEMA columns")
    out = records.with_columns(latency_expr())
    keys = out.select(pl.struct(list(by)).rank("dense")).to_series().to_numpy()
    return out.with_columns(pl.Series("label", labels(out["latency"].fill_null(np.nan), keys)))


def labels(latency, group) -> np.ndarray:
    """Label per program: min valid latency in its group / its latency, in (0, 1]; a failed
    program (invalid latency) gets ``FAILED_LABEL``, below every running program."""
    lat = _vec("latency", latency)
    grp = np.asarray(group)
    _same_length(latency=lat, group=grp)
    out = np.full(len(lat), FAILED_LABEL, np.float32)
    if len(lat) == 0:
        return out
    _, inv = np.unique(grp, return_inverse=True)
    ok = _valid(lat)
    best = np.full(inv.max() + 1, np.inf)
    np.minimum.at(best, inv[ok], lat[ok])
    out[ok] = best[inv[ok]] / lat[ok]
    return out


def failed(labels_) -> np.ndarray:
    """Mask of failed programs: label ``FAILED_LABEL`` (a running program's label is > 0)."""
    return np.asarray(labels_) <= FAILED_LABEL


def _rank_in_group(scores: np.ndarray, inv: np.ndarray) -> np.ndarray:
    """0-based rank of each program within its group (descending score, stable, NaN last)."""
    key = np.where(np.isnan(scores), np.inf, -scores)
    order = np.lexsort((np.arange(len(scores)), key, inv))
    sorted_inv = inv[order]
    starts = np.searchsorted(sorted_inv, sorted_inv, side="left")
    rank = np.empty(len(scores), np.int64)
    rank[order] = np.arange(len(scores)) - starts
    return rank


def pairwise_counts(scores, labels_, group) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(group values, correct pairs, compared pairs) per group; ties in score count 0.5."""
    s, y = _vec("scores", scores), _vec("labels", labels_)
    grp = np.asarray(group)
    _same_length(scores=s, labels=y, group=grp)
    uniq, inv = np.unique(grp, return_inverse=True)
    order = np.argsort(inv, kind="stable")
    bounds = np.searchsorted(inv[order], np.arange(len(uniq) + 1))
    correct = np.zeros(len(uniq))
    total = np.zeros(len(uniq))
    for g in range(len(uniq)):
        idx = order[bounds[g]:bounds[g + 1]]
        sg, yg = s[idx], y[idx]
        for lo in range(0, len(idx), _CHUNK):
            better = yg[lo:lo + _CHUNK, None] > yg[None, :]  # each unordered pair once
            with np.errstate(invalid="ignore"):  # inf - inf: NaN, counted as not ordered
                ds = sg[lo:lo + _CHUNK, None] - sg[None, :]
            total[g] += better.sum()
            correct[g] += (better & (ds > 0)).sum() + 0.5 * (better & (ds == 0)).sum()
    return uniq, correct, total


def pairwise_accuracy(scores, labels_, group) -> float:
    """Share of same-group pairs with different labels that the scores order correctly."""
    _, correct, total = pairwise_counts(scores, labels_, group)
    return float(correct.sum() / total.sum()) if total.sum() > 0 else float("nan")


def task_metrics(scores, latency, task_ids, ks: Sequence[int] = (1, 5)) -> pl.DataFrame:
    """Per task: ``n_programs``, ``best`` latency, ``pick{k}`` (best latency among the top-k
    ranked programs; inf when none of them is valid), ``pairs`` and ``correct`` pair counts.
    Tasks without any valid latency are dropped (they carry no information)."""
    s, lat = _vec("scores", scores), _vec("latency", latency)
    tid = np.asarray(task_ids)
    _same_length(scores=s, latency=lat, task_ids=tid)
    if any(int(k) < 1 for k in ks):
        raise TclError(f"top-k needs k >= 1; got {list(ks)}")
    uniq, inv = np.unique(tid, return_inverse=True)
    ok = _valid(lat)
    lat_ok = np.where(ok, lat, np.inf)
    best = np.full(len(uniq), np.inf)
    np.minimum.at(best, inv, lat_ok)
    rank = _rank_in_group(s, inv)
    cols = {"task_id": uniq.astype(str), "n_programs": np.bincount(inv, minlength=len(uniq)),
            "best": best}
    for k in ks:
        pick = np.full(len(uniq), np.inf)
        top = rank < k
        np.minimum.at(pick, inv[top], lat_ok[top])
        cols[f"pick{k}"] = pick
    _, correct, total = pairwise_counts(s, labels(lat, inv), inv)
    cols["pairs"], cols["correct"] = total, correct
    return pl.DataFrame(cols).filter(pl.col("best").is_finite())


def task_scores(per_task: pl.DataFrame, ks: Sequence[int] = (1, 5)) -> pl.DataFrame:
    """``task_metrics`` plus each task's own top-k score (best / best-of-top-k: a network of
    that one task; null with k or fewer programs, where it is 1 whatever the ranking) and
    pairwise accuracy (null when it has no ordered pair)."""
    return per_task.with_columns(
        *[pl.when(pl.col("n_programs") > k).then(pl.col("best") / pl.col(f"pick{k}"))
          .otherwise(None).alias(f"top{k}") for k in ks],
        pl.when(pl.col("pairs") > 0).then(pl.col("correct") / pl.col("pairs")).otherwise(None)
        .alias("pairwise"))


def failed_pick_share(per_task: pl.DataFrame, k: int = 1) -> float | None:
    """Share of tasks (``task_metrics`` rows) whose top-k picks all failed (``pick{k}`` inf);
    None without tasks."""
    _check_columns(per_task, "per_task", {f"pick{k}"})
    if per_task.is_empty():
        return None
    return float((~per_task[f"pick{k}"].fill_null(float("inf")).is_finite()).mean())


def _topk_columns(ks: Sequence[int], weight: str | None) -> list[pl.Expr]:
    """Pooled top-k over the tasks with more than k programs: where a task has k or fewer, its
    top-k picks them all and scores 1 whatever the model (n/a, None, when no task has more)."""
    w = pl.col(weight) if weight else pl.lit(1.0)
    out = []
    for k in ks:
        ranks = pl.col("best").is_not_null() & (pl.col("n_programs") > k)
        out.append(pl.when(ranks.any())
                   .then((w * pl.col("best")).filter(ranks).sum()
                         / (w * pl.col(f"pick{k}")).filter(ranks).sum())
                   .otherwise(None).alias(f"top{k}"))
    return out


def _pairwise_column() -> pl.Expr:
    return pl.when(pl.col("pairs").sum() > 0).then(pl.col("correct").sum() / pl.col("pairs").sum()) \
        .otherwise(None).alias("pairwise")


def _check_columns(frame: pl.DataFrame, name: str, needed: set[str]) -> None:
    missing = needed - set(frame.columns)
    if missing:
        raise TclError(f"{name} lacks columns {sorted(missing)}; it has {frame.columns}")


def network_metrics(per_task: pl.DataFrame, network_tasks: pl.DataFrame,
                    ks: Sequence[int] = (1, 5)) -> pl.DataFrame:
    """Per network: TenSet top-k scores (weighted), pairwise accuracy, task coverage."""
    _check_columns(network_tasks, "network_tasks", {"network_key", "task_id", "weight"})
    joined = network_tasks.select("network_key", "task_id", pl.col("weight").cast(pl.Float64)) \
        .join(per_task, on="task_id", how="left")
    return joined.group_by("network_key", maintain_order=True).agg(
        pl.col("best").is_not_null().sum().alias("n_tasks"),
        pl.col("best").is_null().sum().alias("tasks_missing"),
        pl.col("n_programs").sum().alias("n_programs"),
        *_topk_columns(ks, "weight"), _pairwise_column(),
    ).sort("network_key")


def topk_score(network_tasks: pl.DataFrame, scores, latency, k: int, *, task_ids) -> pl.DataFrame:
    """TenSet's top-k score per network: sum_t w_t * best_t / sum_t w_t * best-of-top-k_t.

    ``network_tasks`` has ``network_key``, ``task_id``, ``weight`` (zoo/networks.parquet);
    ``scores``, ``latency`` and ``task_ids`` have one value per program.
    Returns ``network_key``, ``n_tasks``, ``tasks_missing``, ``n_programs``, ``top{k}``.
    """
    frame = network_metrics(task_metrics(scores, latency, task_ids, (k,)), network_tasks, (k,))
    return frame.drop("pairwise")


def per_class(tasks: pl.DataFrame, scores, latency, task_ids, ks: Sequence[int] = (1, 5),
              weights: pl.DataFrame | None = None) -> pl.DataFrame:
    """Top-k and pairwise accuracy per operator class (``tasks``: task_id, op_class).

    Top-k pools the class's tasks with the same formula as a network, each task weighted by
    ``weights`` (task_id, weight; e.g. summed over held-out networks) or 1."""
    _check_columns(tasks, "tasks", {"task_id", "op_class"})
    per_task = task_metrics(scores, latency, task_ids, ks)
    return class_metrics(per_task, tasks, ks, weights)


def class_metrics(per_task: pl.DataFrame, tasks: pl.DataFrame, ks: Sequence[int] = (1, 5),
                  weights: pl.DataFrame | None = None) -> pl.DataFrame:
    frame = per_task.join(tasks.select("task_id", "op_class"), on="task_id", how="left") \
        .with_columns(pl.col("op_class").fill_null("unknown"))
    if weights is not None:
        _check_columns(weights, "weights", {"task_id", "weight"})
        frame = frame.join(weights.select("task_id", pl.col("weight").cast(pl.Float64)),
                           on="task_id", how="left").with_columns(pl.col("weight").fill_null(1.0))
    return frame.group_by("op_class").agg(
        pl.len().alias("n_tasks"), pl.col("n_programs").sum().alias("n_programs"),
        *_topk_columns(ks, "weight" if weights is not None else None), _pairwise_column(),
    ).sort("op_class")


def forgetting(before, after, on: Sequence[str] | None = None, value: str = "top1"):
    """Top-1 right after a device was learned minus top-1 after later devices (> 0: forgot).

    Scalars give a float. Frames are joined on ``on`` (default: every shared column except
    ``value``) and give those keys plus ``before``, ``after`` and ``forgetting``."""
    if not isinstance(before, pl.DataFrame) and not isinstance(after, pl.DataFrame):
        return float(before) - float(after)
    if not (isinstance(before, pl.DataFrame) and isinstance(after, pl.DataFrame)):
        raise TclError("forgetting needs two numbers or two data frames, not a mix")
    for name, f in (("before", before), ("after", after)):
        _check_columns(f, name, {value})
    keys = list(on) if on is not None else [c for c in before.columns
                                            if c in after.columns and c != value]
    joined = before.select(*keys, pl.col(value).alias("before")).join(
        after.select(*keys, pl.col(value).alias("after")), on=keys, how="inner") if keys else \
        before.select(pl.col(value).alias("before")).with_columns(after[value].alias("after"))
    return joined.with_columns((pl.col("before") - pl.col("after")).alias("forgetting"))


def spearman(a, b) -> float:
    """Spearman rank correlation of two latency vectors of the same programs (NaN under 3)."""
    a, b = _vec("a", a), _vec("b", b)
    _same_length(a=a, b=b)
    if len(a) < 3:
        return float("nan")
    ra, rb = np.argsort(np.argsort(a)), np.argsort(np.argsort(b))
    return float(np.corrcoef(ra, rb)[0, 1])


def forgetting_summary(before: pl.DataFrame, after: pl.DataFrame,
                       values: Sequence[str] = ("top1", "pairwise")) -> dict:
    """What a device forgot between two evaluations of it (``tcl.evaluate.evaluate`` rows:
    ``before`` right after its own model, ``after`` with a later one). Per value: ``overall``
    (the mean over held-out networks, before minus after; > 0: forgot), ``per_class``
    (operator class -> forgetting) and the ``worst_class`` with its forgetting ``worst``."""
    out: dict = {}
    for v in values:
        _check_columns(before, "before", {"scope", "name", v})
        _check_columns(after, "after", {"scope", "name", v})
        mean = [f.filter(pl.col("scope") == "mean")[v][0] for f in (before, after)]
        classes = forgetting(before.filter(pl.col("scope") == "op_class").select("name", v),
                             after.filter(pl.col("scope") == "op_class").select("name", v),
                             on=["name"], value=v).drop_nulls("forgetting").sort("name")
        per_class = {r["name"]: round(float(r["forgetting"]), 4)
                     for r in classes.iter_rows(named=True)}
        worst = max(per_class.items(), key=lambda kv: kv[1]) if per_class else (None, None)
        out[v] = {"overall": None if None in mean else round(float(mean[0] - mean[1]), 4),
                  "per_class": per_class, "worst_class": worst[0], "worst": worst[1]}
    return out


def standard_error(values) -> float:
    """The standard error of the mean (sample standard deviation / sqrt(n)); NaN below 2 values."""
    v = np.asarray(values, dtype=np.float64)
    v = v[np.isfinite(v)]
    return float(v.std(ddof=1) / np.sqrt(len(v))) if len(v) > 1 else float("nan")

