"""Uniform random selection: the baseline every other sampler has to beat.

Per-task mode draws each task's quota uniformly within the task; global mode draws uniformly
from the whole pool (no minimum per task: the plain baseline).
"""
from __future__ import annotations

import numpy as np

from .base import Request, Sampler


class RandomSampler(Sampler):
    name = "random"

    def _select(self, req: Request) -> np.ndarray:
        rng = np.random.default_rng([req.seed, 6])
        key = rng.random(len(req.pool))
        free = np.flatnonzero(~req.taken)
        free = free[np.argsort(key[free], kind="stable")]   # a random order of the free ones
        if req.quotas is None:
            return free[:req.k]
        task = req.pool.task[free]
        by_task = np.argsort(task, kind="stable")            # random order within each task
        counts = np.bincount(task, minlength=req.pool.n_tasks)
        rank = np.empty(len(free), np.int64)
        rank[by_task] = np.arange(len(free)) - (np.cumsum(counts) - counts)[task[by_task]]
        return free[rank < req.quotas[task]]
