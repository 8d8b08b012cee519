"""Diversity only: greedy (farthest-first) k-center within each task.

Each pick is the candidate farthest from everything selected or ``already`` measured in its task
(a task's first pick is random, by seed); distances saturate at twice the task's scale, beyond
which candidates tie and the seed decides. The RDU greedy with weights (0, 1, 0).
"""
from __future__ import annotations

from collections.abc import Callable

from .greedy import GreedySampler


class KCenterSampler(GreedySampler):
    name = "kcenter"

    def __init__(self, per_task: bool = True, dim: int = 32, anchors: int = 64,
                 on_note: Callable[[str], None] | None = None) -> None:
        super().__init__(0.0, 1.0, 0.0, per_task, dim, anchors, on_note)
