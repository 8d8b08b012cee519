"""Uncertainty only: the candidates the model is least sure how to rank.

Disagreement of an ensemble, or of one model under small input perturbations (the nets have
no dropout; see ``tcl.samplers.disagreement``). No model and no ``Pool.scores``: TclError.
The RDU greedy with weights (0, 0, 1): no embedding is computed.
"""
from __future__ import annotations

from collections.abc import Callable

from .greedy import GreedySampler


class UncertaintySampler(GreedySampler):
    name = "uncertainty"

    def __init__(self, per_task: bool = True,
                 on_note: Callable[[str], None] | None = None) -> None:
        super().__init__(0.0, 0.0, 1.0, per_task, on_note=on_note)
