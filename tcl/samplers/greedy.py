"""Batch-mode greedy selection over three terms; RDU and its one-term baselines are settings.

A candidate's gain is ``r * R + d * D + u * U`` (plus a seeded 1e-6 jitter that breaks ties):

- R, representativeness: the candidate's density among its task's programs (within-task
  percentile, ``embedding.density``), discounted by how well the selection already covers it:
  R = density percentile * (1 - exp(-(dist / h)^2)), dist = distance to the nearest selected
  or ``already`` program of its task, h = the task's scale. Dense regions are picked first,
  and a pick's neighbourhood stops counting, so R alone spreads over the modes of the pool.
- D, diversity: dist / (2 h), capped at 1 (1 for a task with nothing selected yet); with D
  alone the greedy is farthest-first k-center within each task.
- U, uncertainty: pool-wide percentile of the model's disagreement (``disagreement``).

Distances count within a task only: a model ranks programs against their own task, and
programs of different tasks sit far apart in feature space anyway. That makes tasks independent,
so each round picks at most one program per task for many tasks at once, as padded-matrix
numpy operations over all tasks (``tasks.blocks``): rounds, not candidates, are the Python loop.

Per-task mode: every task with quota left takes its best candidate each round. Global mode:
each round the tasks' best candidates compete; the better half by gain is taken, and a task's
first pick brings its second in the next round (one program teaches a ranking nothing).
Task weights are not used in global mode: the gains alone decide.
"""
from __future__ import annotations

import math
import numbers
from collections.abc import Callable

import numpy as np
from scipy.stats import rankdata

from ..config import TclError
from .base import Request, Sampler
from .disagreement import disagreement
from .embedding import CHUNK, density, embed
from .tasks import Block, blocks, within_task_percentile

SATURATE = 2.0   # D reaches 1 at this many task scales from the selection


class _Tasks:
    """The greedy's state for one block of tasks (row r = task ``tasks[r]``)."""

    def __init__(self, b: Block, terms: dict, taken: np.ndarray, quotas: np.ndarray | None,
                 rng: np.random.Generator) -> None:
        self.tasks, self.index = b.tasks, b.index
        z = terms["z"]
        self.z = None if z is None else z[b.index]
        self.sq = None if z is None else (self.z ** 2).sum(-1)
        self.h = terms["h"][b.tasks].astype(np.float32) if z is not None else None
        f32 = lambda a: None if a is None else a[b.index].astype(np.float32)  # noqa: E731
        self.rep, self.unc = f32(terms["rep"]), f32(terms["unc"])
        was = b.real & taken[b.index]
        self.free = b.real & ~was
        self.count = was.sum(1)
        self.nfree = self.free.sum(1)
        self.quota = None if quotas is None else quotas[b.tasks].copy()
        self.mind = np.full(b.index.shape, np.inf, np.float32)
        self.jitter = rng.random(b.index.shape) * 1e-6   # float64: gains stay distinct
        self.best = np.full(len(b.tasks), -np.inf)
        self.pick = np.zeros(len(b.tasks), np.int64)
        self.dirty = np.ones(len(b.tasks), bool)
        if self.z is not None and was.any():   # already measured programs count as selected
            order = np.argsort(~was, axis=1, kind="stable")
            for j in range(int(self.count.max())):
                rows = np.flatnonzero(self.count > j)
                self.cover(rows, order[rows, j])

    def cover(self, rows: np.ndarray, cols: np.ndarray) -> None:
        """Distances of the rows' programs to their newly selected program ``cols``."""
        order = np.argsort(rows, kind="stable")
        rows, cols = rows[order], cols[order]
        step = max(1, CHUNK // (self.z.shape[1] * max(self.z.shape[2], 1)))
        for s in range(0, len(rows), step):
            r, c = rows[s:s + step], cols[s:s + step]
            ix = run(r)
            dot = np.matmul(self.z[ix], self.z[r, c][:, :, None])[:, :, 0]
            d2 = self.sq[ix] - 2 * dot + self.sq[r, c][:, None]
            self.mind[ix] = np.minimum(self.mind[ix], np.sqrt(np.maximum(d2, 0)))

    def refresh(self, w: tuple[float, float, float]) -> None:
        """Best candidate and its gain for the rows whose state changed."""
        rows = np.flatnonzero(self.dirty)
        if not len(rows):
            return
        ix = run(rows)
        gain = np.array(self.jitter[ix])
        if self.z is not None:
            m = self.mind[ix] / self.h[ix][:, None]
            if w[0]:
                gain += w[0] * self.rep[ix] * -np.expm1(-m * m)
            if w[1]:
                gain += w[1] * np.minimum(m / SATURATE, 1)
        if w[2]:
            gain += w[2] * self.unc[ix]
        gain[~self.free[ix]] = -np.inf
        self.pick[rows] = gain.argmax(1)
        self.best[rows] = gain[np.arange(len(rows)), self.pick[rows]]
        self.dirty[rows] = False

    def take(self, rows: np.ndarray) -> np.ndarray:
        """Select the rows' best candidates; their pool indices."""
        cols = self.pick[rows]
        self.free[rows, cols] = False
        self.count[rows] += 1
        self.nfree[rows] -= 1
        if self.quota is not None:
            self.quota[rows] -= 1
        if self.z is not None:
            self.cover(rows, cols)
        self.dirty[rows] = True
        return self.index[rows, cols]


def run(rows: np.ndarray) -> slice | np.ndarray:
    """Sorted row numbers as a slice where they are one run (a view instead of a copy)."""
    if len(rows) and rows[-1] - rows[0] + 1 == len(rows):
        return slice(int(rows[0]), int(rows[-1]) + 1)
    return rows


def accept_global(best: np.ndarray, count: np.ndarray, nfree: np.ndarray,
                  remaining: int) -> np.ndarray:
    """Which tasks' proposals a global round takes: first the second picks owed to tasks
    holding one program, then the better half of the rest by gain, a task's first pick
    reserving budget for its second."""
    active = best > -np.inf
    owed = np.flatnonzero(active & (count == 1))
    owed = owed[np.argsort(-best[owed], kind="stable")][:remaining]
    rest = np.flatnonzero(active & (count != 1))
    rest = rest[np.argsort(-best[rest], kind="stable")][:math.ceil(len(rest) / 2)]
    cost = np.where((count[rest] == 0) & (nfree[rest] >= 2), 2, 1)
    took = rest[np.cumsum(cost) <= remaining - len(owed)]
    if not len(owed) and not len(took):   # one unit left: rather a third pick than a lone one
        single = np.flatnonzero(active & (count != 1) & ((count > 0) | (nfree < 2)))
        pool = single if len(single) else np.flatnonzero(active)
        took = pool[np.argsort(-best[pool], kind="stable")[:1]]
    return np.concatenate([owed, took])


class GreedySampler(Sampler):
    """Greedy over R, D, U with weights ``r``, ``d``, ``u`` (>= 0; 0 turns a term off).

    dim: embedding width (PCA); anchors: programs per task the density is estimated against.
    A model (or ensemble) gives the embedding (its pooled hidden state) and the uncertainty;
    without one the embedding is the feature summary, and u > 0 needs ``Pool.scores``.
    """

    name = "greedy"

    def __init__(self, r: float = 1.0, d: float = 1.0, u: float = 1.0, per_task: bool = True,
                 dim: int = 32, anchors: int = 64,
                 on_note: Callable[[str], None] | None = None) -> None:
        super().__init__(per_task, on_note)
        w = (r, d, u)
        if not all(isinstance(x, numbers.Real) and not isinstance(x, bool)
                   and math.isfinite(x) and x >= 0 for x in w) or not any(w):
            raise TclError(f"weights r, d, u = {w}: expected finite numbers >= 0, not all 0")
        if int(dim) < 1 or int(anchors) < 1:
            raise TclError(f"dim {dim} and anchors {anchors} must be >= 1")
        self.weights = tuple(float(x) for x in w)
        self.dim, self.anchors = int(dim), int(anchors)

    def terms(self, req: Request, layout: list[Block]) -> dict:
        """Embedding, task scales, density and uncertainty: only what the weights use."""
        pool, (r, d, u) = req.pool, self.weights
        out = {"z": None, "h": None, "rep": None, "unc": None}
        if r or d:
            out["z"] = embed(pool, req.model, self.dim, req.seed)
            dens, out["h"] = density(out["z"], layout, pool.n_tasks, req.seed, self.anchors)
            out["rep"] = within_task_percentile(dens, pool.task)
        if u:
            dis = disagreement(pool, req.model, req.seed)
            out["unc"] = (rankdata(dis) - 1) / max(len(dis) - 1, 1)
        return out

    def _select(self, req: Request) -> np.ndarray:
        layout = blocks(req.pool.task, req.pool.n_tasks)
        terms = self.terms(req, layout)
        rng = np.random.default_rng([req.seed, 5])
        parts = [_Tasks(b, terms, req.taken, req.quotas, rng) for b in layout]
        part = np.concatenate([np.full(len(p.best), i) for i, p in enumerate(parts)])
        row = np.concatenate([np.arange(len(p.best)) for p in parts])
        chosen, remaining = [], req.k
        while remaining > 0:
            for p in parts:
                p.refresh(self.weights)
            best = np.concatenate([p.best for p in parts])
            if req.quotas is not None:
                quota = np.concatenate([p.quota for p in parts])
                took = np.flatnonzero((best > -np.inf) & (quota > 0))
            else:
                count = np.concatenate([p.count for p in parts])
                nfree = np.concatenate([p.nfree for p in parts])
                took = accept_global(best, count, nfree, remaining)
            if not len(took):
                raise AssertionError("greedy round selected nothing with budget left")
            took = took[np.argsort(-best[took], kind="stable")]
            picked = np.empty(len(took), np.int64)
            for i, p in enumerate(parts):
                mine = part[took] == i
                if mine.any():
                    picked[mine] = p.take(row[took[mine]])
            chosen.append(picked)
            remaining -= len(took)
        return np.concatenate(chosen)
