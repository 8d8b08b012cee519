"""Performance-biased diversity (BALTO-style): the teacher's predicted-fast programs, spread out.

At a small budget, random sampling spends most measurements on slow programs, which never decide
top-1 (BALTO, ICLR 2023). Here each pick maximises ``p * S + d * D`` within its task:

- S, predicted speed: the within-task rank percentile of the teacher's score (mean over the
  ensemble's members, or ``Pool.scores``); candidates outside the task's top ``top`` share by S
  are pushed below every candidate inside it, so they are picked only once those run out;
- D, diversity: the k-center term of the RDU greedy (distance to the nearest pick of the task,
  in task scales, capped at 1; 1 while the task has no pick).

A task's first pick is its predicted fastest program; later picks trade predicted speed against
distance to what is picked. The teacher is the cold-start model (another device's), so no
measurement of the target is needed. The RDU greedy with the uncertainty slot carrying S.
"""
from __future__ import annotations

import math
import numbers
from collections.abc import Callable

import numpy as np

from ..config import TclError
from .base import Request
from .disagreement import score_matrix
from .embedding import density, embed
from .greedy import GreedySampler
from .tasks import Block, within_task_percentile


def predicted_speed(req: Request) -> np.ndarray:
    """(n,) within-task percentile of the teacher's mean within-task score percentile (1: the
    task's predicted fastest). Percentiles before the mean: members differ in scale."""
    scores = score_matrix(req.pool, req.model, req.seed)
    task = req.pool.task
    mean = np.mean([within_task_percentile(c, task) for c in scores.T], axis=0)
    return within_task_percentile(mean, task)


class BaltoSampler(GreedySampler):
    name = "balto"

    def __init__(self, per_task: bool = True, p: float = 1.0, d: float = 1.0, top: float = 0.5,
                 dim: int = 32, anchors: int = 64,
                 on_note: Callable[[str], None] | None = None) -> None:
        if not isinstance(p, numbers.Real) or isinstance(p, bool) or not math.isfinite(p) \
                or p <= 0:
            raise TclError(f"balto: p = {p!r}: expected a number > 0 (the predicted-speed "
                           "weight; for diversity alone use kcenter)")
        if not isinstance(top, numbers.Real) or isinstance(top, bool) or not 0 < top <= 1:
            raise TclError(f"balto: top = {top!r}: expected the share of each task's "
                           "candidates to favour, in (0, 1]")
        super().__init__(0.0, d, p, per_task, dim, anchors, on_note)
        self.top = float(top)

    def terms(self, req: Request, layout: list[Block]) -> dict:
        out = {"z": None, "h": None, "rep": None, "unc": None}
        if self.weights[1]:
            out["z"] = embed(req.pool, req.model, self.dim, req.seed)
            _, out["h"] = density(out["z"], layout, req.pool.n_tasks, req.seed, self.anchors)
        speed = predicted_speed(req)
        # (S - 2 < -1 <= any gain inside the top share: outside candidates come last)
        out["unc"] = np.where(speed >= 1 - self.top - 1e-9, speed, speed - 2)
        return out
