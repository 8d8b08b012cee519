"""The space samplers measure representativeness and diversity in, and density in it.

With a model that has one (the neural models' ``embed``), a program is its pooled hidden state
before the scoring head: what the model has learnt to tell apart. Otherwise it is a summary of
its per-store features (mean and max over its stores, plus the store count; the features are
already log-scaled by MetaSchedule). Either way the vectors are centred per task before PCA:
samplers compare programs of one task, and between-task differences (which dominate the raw
features) would otherwise fill the components.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np
import scipy.sparse as sp
from sklearn.decomposition import PCA

from ..models.base import ProgramSet
from .base import ModelArg, Pool
from .tasks import Block

CHUNK = 1 << 22   # elements per temporary array in the chunked steps (16 MiB of float32)
PROGRAMS = 8192   # programs per chunk of feature summaries (about 10 MiB)
FIT_ROWS = 20_000


def feature_summary(ps: ProgramSet, lo: int = 0, hi: int | None = None) -> np.ndarray:
    """float32 (hi - lo, 2 * 164 + 1) for programs lo..hi: the mean and max of each per-store
    column over a program's stores, and log2(1 + stores); zeros for a program without stores."""
    hi = len(ps) if hi is None else hi
    off = ps.store_offsets[lo:hi + 1] - ps.store_offsets[lo]
    rows, counts = ps.per_store[ps.store_offsets[lo]:ps.store_offsets[hi]], np.diff(off)
    n, width = hi - lo, ps.per_store.shape[1]
    out = np.zeros((n, 2 * width + 1), np.float32)
    out[:, -1] = np.log2(1 + counts)
    if not len(rows):
        return out
    # (np.add.reduceat along rows is ~10x slower than these)
    owner = np.repeat(np.arange(n), counts)
    member = sp.csr_matrix((np.ones(len(owner), np.float32), (owner, np.arange(len(owner)))),
                           shape=(n, len(owner)))
    out[:, :width] = np.asarray(member @ rows) / np.maximum(counts, 1)[:, None]
    # max: the j-th store of every program (its last one where it has fewer), for each j
    last = off[:-1] + np.maximum(counts - 1, 0)
    peak = rows[np.minimum(off[:-1], len(rows) - 1)]
    for j in range(1, int(counts.max())):
        np.maximum(peak, rows[np.minimum(off[:-1] + j, last)], out=peak)
    peak[counts == 0] = 0
    out[:, width:2 * width] = peak
    return out


def model_embedding(programs: ProgramSet, model: ModelArg) -> np.ndarray | None:
    """The pooled hidden states of ``model`` (the first ensemble member that has ``embed``)."""
    models = model if isinstance(model, (list, tuple)) else [model]
    for m in models:
        if m is not None and callable(getattr(m, "embed", None)):
            return np.asarray(m.embed(programs), np.float32)
    return None


Chunks = Callable[[], Iterator[tuple[int, np.ndarray]]]   # (first row, rows), in order


def reduce(chunks: Chunks, task: np.ndarray, dim: int, seed: int) -> np.ndarray:
    """Task-centred, PCA-reduced (to ``dim`` columns) float32 rows, read twice in chunks (the
    full raw matrix of a million programs would take gigabytes). Columns keep their units
    (log-scaled features, or one layer's hidden units): a column that moves by 12 (4096x) within
    a task should count for more than one that moves by 0.1, so there is no per-column scaling.
    PCA is fitted on at most 20,000 rows (randomized, seeded); the projection is linear, so
    centring folds into a per-task shift: z = raw @ C.T - ((task mean + PCA mean) @ C.T)[task]."""
    n, n_tasks = len(task), int(task.max()) + 1
    sub = np.sort(np.random.default_rng([seed, 2]).permutation(n)[:FIT_ROWS])
    sums, fit = 0.0, []
    for lo, rows in chunks():
        t = task[lo:lo + len(rows)]
        member = sp.csr_matrix((np.ones(len(t)), (t, np.arange(len(t)))), shape=(n_tasks, len(t)))
        sums = sums + member @ rows.astype(np.float64)
        fit.append(rows[sub[(sub >= lo) & (sub < lo + len(rows))] - lo])
    means = sums / np.bincount(task, minlength=n_tasks)[:, None]
    fit = np.concatenate(fit) - means[task[sub]]
    width = fit.shape[1]
    if width <= dim or n < 2:   # (one program: its centred row is zero)
        comps, mean = np.eye(width)[:dim], np.zeros(width)
    else:
        # sklearn takes seeds below 2**32; a later round's seed is the run's + its index
        pca = PCA(n_components=min(dim, len(fit)), svd_solver="randomized",
                  random_state=seed % 2**32).fit(fit)
        comps, mean = pca.components_, pca.mean_
    comps32, shift = comps.T.astype(np.float32), ((means + mean) @ comps.T).astype(np.float32)
    z = np.empty((n, comps.shape[0]), np.float32)
    for lo, rows in chunks():
        z[lo:lo + len(rows)] = rows @ comps32 - shift[task[lo:lo + len(rows)]]
    return z


def embed(pool: Pool, model: ModelArg = None, dim: int = 32, seed: int = 0) -> np.ndarray:
    """float32 (n, <= dim): the pool in the space of ``model`` or of its features."""
    ps, n = pool.programs, len(pool)
    raw = model_embedding(ps, model)
    if raw is not None:
        step = max(1, CHUNK // max(raw.shape[1], 1))
        chunks = lambda: ((s, raw[s:s + step]) for s in range(0, n, step))  # noqa: E731
    else:
        chunks = lambda: ((s, feature_summary(ps, s, min(n, s + PROGRAMS)))  # noqa: E731
                          for s in range(0, n, PROGRAMS))
    return reduce(chunks, pool.task, dim, seed)


def density(z: np.ndarray, layout: list[Block], n_tasks: int, seed: int,
            anchors: int = 64) -> tuple[np.ndarray, np.ndarray]:
    """Kernel density of each program among its task's programs, and each task's scale.

    The density is estimated against up to ``anchors`` programs of the task drawn at random
    (an unbiased estimate of the full kernel density at a fraction of its cost; a program is
    never its own anchor); the Gaussian kernel's bandwidth, returned as the task's scale ``h``,
    is the root-mean-square distance from the task's programs to its anchors.
    Returns ((n,) density, (n_tasks,) h > 0)."""
    rng = np.random.default_rng([seed, 3])
    dens = np.zeros(len(z))
    scale = np.ones(n_tasks)
    sq = (z.astype(np.float64) ** 2).sum(1)
    for b in layout:
        keys = np.where(b.real, rng.random(b.index.shape), np.inf)
        pick = np.argsort(keys, axis=1)[:, :anchors]
        rows = np.arange(len(b.tasks))[:, None]
        a_idx, a_real = b.index[rows, pick], b.real[rows, pick]
        step = max(1, CHUNK // (b.index.shape[1] * pick.shape[1]))
        for s in range(0, len(b.tasks), step):   # chunks of tasks bound the (t, m, a) arrays
            idx, ai = b.index[s:s + step], a_idx[s:s + step]
            d2 = (sq[idx][:, :, None] + sq[ai][:, None, :]
                  - 2 * np.matmul(z[idx], z[ai].transpose(0, 2, 1)))
            ok = (b.real[s:s + step, :, None] & a_real[s:s + step, None, :]
                  & (idx[:, :, None] != ai[:, None, :]))
            d2 = np.where(ok, np.maximum(d2, 0), 0)
            pairs = ok.sum((1, 2))
            h2 = np.where(pairs > 0, d2.sum((1, 2)) / np.maximum(pairs, 1), 1.0)
            h2 = np.where(h2 > 1e-12, h2, 1.0)   # a task of identical programs: any scale
            kern = np.where(ok, np.exp(-d2 / h2[:, None, None]), 0).sum(2)
            per = np.maximum(ok.sum(2), 1)
            real = b.real[s:s + step]
            dens[idx[real]] = (kern / per)[real]
            scale[b.tasks[s:s + step]] = np.sqrt(h2)
    return dens, scale
