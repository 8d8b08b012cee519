"""Representativeness only: cover the dense regions of each task's pool first.

Each pick is the candidate of highest density (kernel density among its task's programs in the
embedding, as a within-task percentile) not yet covered by a pick near it (the density is
discounted by 1 - exp(-(distance to the nearest pick / task scale)^2)), so picks spread over
the pool's modes in order of their mass. The RDU greedy with weights (1, 0, 0).
"""
from __future__ import annotations

from collections.abc import Callable

from .greedy import GreedySampler


class RepresentativeSampler(GreedySampler):
    name = "representative"

    def __init__(self, per_task: bool = True, dim: int = 32, anchors: int = 64,
                 on_note: Callable[[str], None] | None = None) -> None:
        super().__init__(1.0, 0.0, 0.0, per_task, dim, anchors, on_note)
