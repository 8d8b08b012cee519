"""Samplers: which unmeasured candidates to measure on a device, within a budget.

``make_sampler(name, **kwargs)`` builds one of ``SAMPLERS``; every sampler has
``select(pool, budget, model=None, already=None, seed=0) -> list[str]`` (``base.Sampler``).
"""
from __future__ import annotations

from typing import Any

from ..config import TclError
from .balto import BaltoSampler
from .base import Pool, Sampler, SamplerWarning, parse_budget
from .kcenter import KCenterSampler
from .random import RandomSampler
from .rdu import RDUSampler
from .representative import RepresentativeSampler
from .typiclust import TypiclustSampler
from .uncertainty import UncertaintySampler

__all__ = ["Pool", "Sampler", "SamplerWarning", "SAMPLERS", "make_sampler", "parse_budget"]

SAMPLERS: dict[str, type[Sampler]] = {cls.name: cls for cls in (
    RandomSampler, KCenterSampler, UncertaintySampler, RepresentativeSampler, RDUSampler,
    BaltoSampler, TypiclustSampler)}


def make_sampler(name: str, **kwargs: Any) -> Sampler:
    """A sampler of ``name`` (one of SAMPLERS), e.g. ``make_sampler("rdu", u=0, per_task=False)``."""
    if name not in SAMPLERS:
        raise TclError(f"unknown sampler {name!r}; known: {', '.join(SAMPLERS)}")
    try:
        return SAMPLERS[name](**kwargs)
    except TypeError as e:
        raise TclError(f"sampler {name!r} rejected parameters {sorted(kwargs)}: {e}") from None
