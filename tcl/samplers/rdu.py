"""RDU: one batch-mode greedy over Representativeness, Diversity and Uncertainty.

The "RDU without R/D/U" ablations are this class with that weight 0 (``make_sampler("rdu",
u=0)``); the terms and the greedy are described in ``tcl.samplers.greedy``.
"""
from __future__ import annotations

from .greedy import GreedySampler


class RDUSampler(GreedySampler):
    """Weights ``r``, ``d``, ``u`` (default 1 each); other keywords as ``GreedySampler``."""

    name = "rdu"
