"""Typicality (TypiClust, Hacohen et al. 2022): the most typical program of each cluster.

At a small budget the points worth labelling first are typical ones, not the uncertain ones
(the cold-start problem). Within each task (the whole pool in global mode) the programs, taken
and free, are clustered by k-means into (already taken + quota) clusters in the embedding
(``embedding.embed``: the model's hidden state, else the feature summary); the clusters that
hold no taken program are served largest first, each with its most typical free program:
typicality = 1 / mean distance to its ``neighbours`` nearest programs of its cluster.
Picks left over (empty clusters, duplicates) go to the most typical free programs of the task.
"""
from __future__ import annotations

import warnings
from collections.abc import Callable

import numpy as np
from sklearn.cluster import KMeans

from ..config import TclError
from .base import Request, Sampler
from .embedding import embed


def typicality(z: np.ndarray, neighbours: int) -> np.ndarray:
    """(m,) 1 / mean distance to each row's ``neighbours`` nearest other rows (inf for m = 1
    or a row with identical neighbours: as typical as can be)."""
    if len(z) < 2:
        return np.full(len(z), np.inf)
    d2 = (z ** 2).sum(1)[:, None] + (z ** 2).sum(1)[None, :] - 2 * z @ z.T
    d = np.sqrt(np.maximum(d2, 0))
    np.fill_diagonal(d, np.inf)
    k = min(neighbours, len(z) - 1)
    mean = np.sort(d, axis=1)[:, :k].mean(1)
    with np.errstate(divide="ignore"):
        return 1.0 / mean


def pick_typical(z: np.ndarray, taken: np.ndarray, q: int, neighbours: int,
                 seed: int) -> np.ndarray:
    """``q`` indices into ``z`` (rows not ``taken``): one per uncovered cluster, largest
    cluster first, then by typicality."""
    free = np.flatnonzero(~taken)
    q = min(q, len(free))
    if q <= 0:
        return np.zeros(0, np.int64)
    c = min(len(z), int(taken.sum()) + q)
    if c == len(z):
        label = np.arange(len(z))
    else:
        with warnings.catch_warnings():   # duplicates: fewer distinct clusters than asked
            warnings.simplefilter("ignore")
            # sklearn takes seeds below 2**32; a later round's seed is the run's + its index
            label = KMeans(c, n_init=1, random_state=seed % 2**32).fit_predict(
                z.astype(np.float64))
    typ = np.zeros(len(z))
    for g in np.unique(label):
        members = np.flatnonzero(label == g)
        typ[members] = typicality(z[members], neighbours)
    covered = np.unique(label[taken])
    sizes = np.bincount(label, minlength=c)
    order = [g for g in np.argsort(-sizes, kind="stable") if g not in covered and sizes[g] > 0]
    picks: list[int] = []
    for g in order:
        cand = free[label[free] == g]
        if len(cand) and len(picks) < q:
            picks.append(int(cand[np.argmax(typ[cand])]))
    if len(picks) < q:   # fewer usable clusters than picks: the most typical free ones
        rest = np.setdiff1d(free, picks)
        picks += rest[np.argsort(-typ[rest], kind="stable")][:q - len(picks)].tolist()
    return np.asarray(picks, np.int64)


class TypiclustSampler(Sampler):
    name = "typiclust"

    def __init__(self, per_task: bool = True, dim: int = 32, neighbours: int = 20,
                 on_note: Callable[[str], None] | None = None) -> None:
        super().__init__(per_task, on_note)
        if int(dim) < 1 or int(neighbours) < 1:
            raise TclError(f"typiclust: dim {dim} and neighbours {neighbours} must be >= 1")
        self.dim, self.neighbours = int(dim), int(neighbours)

    def _select(self, req: Request) -> np.ndarray:
        z = embed(req.pool, req.model, self.dim, req.seed)
        if req.quotas is None:   # global: one clustering of the whole pool
            groups = [(np.arange(len(req.pool)), req.k)]
        else:
            order = np.argsort(req.pool.task, kind="stable")
            bounds = np.cumsum(np.bincount(req.pool.task, minlength=req.pool.n_tasks))
            members = np.split(order, bounds[:-1])
            groups = [(members[t], int(req.quotas[t])) for t in np.flatnonzero(req.quotas)]
        out = [idx[pick_typical(z[idx], req.taken[idx], q, self.neighbours, req.seed)]
               for idx, q in groups]
        return np.concatenate(out) if out else np.zeros(0, np.int64)
