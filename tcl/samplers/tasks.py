"""Per-task arithmetic the samplers share: within-task ranks, the padded per-task layout that
vectorizes greedy selection across tasks, and the budget split over tasks.

Scores and distances only mean something within a task (a model ranks programs against others
of their task), so every sampler works task by task; these helpers do it for all tasks at once.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def within_task_percentile(values: np.ndarray, task: np.ndarray) -> np.ndarray:
    """(n,) rank of each value among its task's values, scaled to [0, 1] (0.5 for a task of
    one). Ties keep pool order, so equal values get distinct but deterministic ranks."""
    order = np.lexsort((values, task))
    counts = np.bincount(task)
    starts = np.cumsum(counts) - counts
    rank = np.empty(len(values), np.float64)
    rank[order] = np.arange(len(values)) - starts[task[order]]
    size = counts[task] - 1
    return np.where(size > 0, rank / np.maximum(size, 1), 0.5)


@dataclass
class Block:
    """Tasks of similar size as a padded matrix: row r is task ``tasks[r]``, ``index[r, j]`` its
    j-th program (-1 past the task's end, where ``real`` is False)."""

    tasks: np.ndarray   # (rows,)
    index: np.ndarray   # (rows, width) int64
    real: np.ndarray    # (rows, width) bool


def blocks(task: np.ndarray, n_tasks: int) -> list[Block]:
    """Tasks bucketed by size (powers of two), so padding at most doubles a block."""
    order = np.argsort(task, kind="stable")
    counts = np.bincount(task, minlength=n_tasks)
    starts = np.cumsum(counts) - counts
    pos = np.arange(len(task)) - starts[task[order]]
    bucket = np.ceil(np.log2(np.maximum(counts, 1))).astype(np.int64)
    out = []
    for b in np.unique(bucket[counts > 0]):
        tasks = np.flatnonzero((bucket == b) & (counts > 0))
        row = np.full(n_tasks, -1)
        row[tasks] = np.arange(len(tasks))
        members = row[task[order]] >= 0
        index = np.full((len(tasks), int(counts[tasks].max())), -1, np.int64)
        index[row[task[order[members]]], pos[members]] = order[members]
        out.append(Block(tasks, index, index >= 0))
    return out


def proportional(total: int, weights: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Integers in [lo, hi] summing to ``total`` (clipped to [lo.sum(), hi.sum()]), proportional
    to ``weights`` where no bound binds: x = clip(lambda * w, lo, hi), lambda by bisection, then
    largest remainders."""
    total = int(np.clip(total, lo.sum(), hi.sum()))
    w = np.maximum(weights, 1e-300)
    a, b = 0.0, float((hi / w).max(initial=0.0))
    for _ in range(100):   # sum(clip(lambda * w)) is monotone in lambda
        mid = (a + b) / 2
        a, b = (mid, b) if np.clip(mid * w, lo, hi).sum() < total else (a, mid)
    x = np.clip(b * w, lo, hi)
    alloc = np.minimum(np.floor(x + 1e-9).astype(np.int64), hi)
    frac = np.where(alloc < hi, x - alloc, -np.inf)
    alloc[np.argsort(-frac, kind="stable")[:max(total - int(alloc.sum()), 0)]] += 1
    return alloc


def allocate(k: int, avail: np.ndarray, weights: np.ndarray, have: np.ndarray,
             seed: int, first: np.ndarray | None = None, least: int = 2) -> np.ndarray:
    """Programs per task for a per-task selection: ``k`` in all, split by zoo weight.

    Quotas are proportional to weight, but every task that gets any gets at least ``least``
    programs counting those it already ``has`` (one program teaches a ranking nothing), so a
    budget too small for every task goes to the heaviest tasks (ties in random order by
    ``seed``).
    Caps: ``avail`` per task. ``first`` (bool per task, deploy-first): the budget is split over
    those tasks alone, up to their caps, and what is left over the others. ``least`` (default
    2): more gives more same-task pairs over fewer tasks."""
    if first is not None and first.any():
        head = allocate(k, np.where(first, avail, 0), weights, have, seed, None, least)
        left = k - int(head.sum())
        return head + (allocate(left, np.where(first, 0, avail), weights, have, seed, None,
                                least) if left > 0 else 0)
    k = min(k, int(avail.sum()))
    need = np.where(avail > 0, np.minimum(avail, np.maximum(least - have, 1)), 0)
    tie = np.random.default_rng([seed, 1]).random(len(avail))
    order = np.lexsort((tie, -weights))
    order = order[avail[order] > 0]
    chosen = order[np.cumsum(need[order]) <= k]
    quotas = np.zeros(len(avail), np.int64)
    quotas[chosen] = proportional(k, weights[chosen], need[chosen], avail[chosen])
    if (left := k - int(quotas.sum())) > 0:   # too little for another pair: next tasks get 1
        room = (avail - quotas)[order]
        quotas[order] += np.clip(left - (np.cumsum(room) - room), 0, room)
    return quotas
