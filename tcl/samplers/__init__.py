"""Samplers: which unmeasured candidates to measure on a device, within a budget.

``make_sampler(name, **kwargs)`` builds one of ``SAMPLERS``; every sampler has
``select(pool, budget, model=None, already=None, seed=0) -> list[str]`` (``base.Sampler``).
"""
from __future__ import annotations

from typing import Any

from ..classes import ClassRegistry
from .base import Pool, Sampler, SamplerWarning, parse_budget

__all__ = ["Pool", "Sampler", "SamplerWarning", "SAMPLERS", "make_sampler", "parse_budget",
           "sampler_options"]

SAMPLERS = ClassRegistry("sampler", {   # name -> (module, class); each class's `name` too
    "random": ("tcl.samplers.random", "RandomSampler"),
    "kcenter": ("tcl.samplers.kcenter", "KCenterSampler"),
    "uncertainty": ("tcl.samplers.uncertainty", "UncertaintySampler"),
    "representative": ("tcl.samplers.representative", "RepresentativeSampler"),
    "rdu": ("tcl.samplers.rdu", "RDUSampler"),
    "balto": ("tcl.samplers.balto", "BaltoSampler"),
    "typiclust": ("tcl.samplers.typiclust", "TypiclustSampler"),
})


def make_sampler(name: str, **kwargs: Any) -> Sampler:
    """A sampler of ``name`` (one of SAMPLERS), e.g.
    ``make_sampler("rdu", u=0, per_task=False)``."""
    return SAMPLERS.make(name, **kwargs)


def sampler_options(name: str, options: dict[str, Any], model) -> dict[str, Any]:
    """The keywords sampler ``name`` is made with, given the model it will select with (None:
    no model). The one rule for a missing model: RDU takes uncertainty from a model, so its
    weight ``u`` goes to 0 (representativeness and diversity need none)."""
    if model is None and name == "rdu" and options.get("u", 1.0) > 0:
        return {**options, "u": 0.0}
    return dict(options)
