"""How unsure a cost model is about where a program ranks in its task.

Several score columns (ensemble members, or passes of one model) are turned into within-task
rank percentiles, and a program's uncertainty is the standard deviation of its percentiles
across the columns. Ranks, not raw scores: scores are only comparable within a task, and
members trained apart differ in scale.

One model: the neural nets here have no dropout (``tcl/models``: no dropout layer in the
Mamba, TenSet-MLP or TLP nets), so MC dropout is not available, and an ensemble costs one
training per member. A single model is therefore scored on the pool and on ``passes`` copies
whose feature values are perturbed multiplicatively by exp(``noise`` * N(0, 1)) (zeros stay
zero, token kinds stay as they are): the features are log-scaled, so 5% noise moves a value
about as far as a neighbouring schedule decision does. A program whose rank moves under such
small changes sits where the model cannot tell it from its neighbours. This is a sensitivity
proxy, not a posterior; prefer an ensemble where one exists. Any ``CostModel`` works (XGBoost
too).
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..config import TclError
from ..models.base import ProgramSet
from .base import ModelArg, Pool
from .tasks import within_task_percentile


def perturbed(ps: ProgramSet, rng: np.random.Generator, noise: float) -> ProgramSet:
    """A copy of ``ps`` with every feature value scaled by exp(noise * N(0, 1))."""
    stores = ps.per_store * np.exp(noise * rng.standard_normal(ps.per_store.shape)
                                   ).astype(np.float32)
    tokens = ps.tokens.copy()
    tokens[:, 1:] *= np.exp(noise * rng.standard_normal(tokens[:, 1:].shape)).astype(np.float32)
    return replace(ps, per_store=stores, tokens=tokens)


def score_matrix(pool: Pool, model: ModelArg, seed: int = 0, passes: int = 4,
                 noise: float = 0.05) -> np.ndarray:
    """(n, m) scores: one column per ensemble member; a single model's score and its
    ``passes`` perturbed passes; ``pool.scores`` when no model is given."""
    if model is None:
        if pool.scores is None:
            raise TclError("uncertainty needs a cost model: pass model= (one model, or a list "
                           "of models for an ensemble), give the pool precomputed scores "
                           "(Pool.scores), or turn the uncertainty term off (weight u=0)")
        return pool.scores
    models = list(model) if isinstance(model, (list, tuple)) else [model]
    if not models:
        raise TclError("an empty list of models gives no uncertainty; pass at least one")
    if len(models) > 1:
        return np.stack([np.asarray(m.predict(pool.programs), np.float64) for m in models], 1)
    rng = np.random.default_rng([seed, 4])
    cols = [models[0].predict(pool.programs)]
    cols += [models[0].predict(perturbed(pool.programs, rng, noise)) for _ in range(passes)]
    return np.stack([np.asarray(c, np.float64) for c in cols], 1)


def disagreement(pool: Pool, model: ModelArg, seed: int = 0) -> np.ndarray:
    """(n,) standard deviation of a program's within-task rank percentile across the score
    columns (0 where all agree; at most 0.5)."""
    scores = score_matrix(pool, model, seed)
    if scores.shape[1] < 2:
        raise TclError("uncertainty needs at least two score columns (ensemble members or "
                       f"passes); Pool.scores has {scores.shape[1]}")
    ranks = np.stack([within_task_percentile(c, pool.task) for c in scores.T], 1)
    return ranks.std(1)
