"""The scheduled refresh: re-distill only what changed.

Every device of ``continual.sequence`` goes through ``distill_device`` in order, and every
device added later (a registered model for a device outside the sequence) again from the
device its model's teacher was made for. ``distill_device`` compares a snapshot key of its
inputs (records and their ``measured_at``, teacher, method, settings) with the registry, so a
device whose inputs did not change trains and registers nothing.
"""
from __future__ import annotations

from typing import Callable

from ..registry import ModelRegistry
from ..resolve import resolve_model
from .params import Params


def refresh_all(params: Params, say: Callable[[str], None] = print) -> dict:
    # lazy: the continual run (torch) costs ~5 s at import
    from .continual import distill_device

    out: dict = {}
    for device in params.continual.sequence:
        r = distill_device(params, device, say=say)
        out[device] = {"model": r.entry.id, "new": r.new}
    registry = ModelRegistry(params.paths)
    added = [e for e in registry.entries()
             if e.device not in params.continual.sequence and e.backbone ==
             params.continual.backbone]
    for device in dict.fromkeys(e.device for e in added):
        # its newest model, named only: distill_device loads the teacher it needs
        latest = resolve_model(params.paths, device, "continual",
                               backbone=params.continual.backbone, load=False).entry
        teacher = registry.get(latest.parent).device if latest.parent else None
        if teacher is None:
            continue
        r = distill_device(params, device, method=latest.method, say=say,
                           teacher_device=teacher)
        out[device] = {"model": r.entry.id, "new": r.new}
    if not any(v["new"] for v in out.values()):
        say("refresh: nothing new: every device's model is up to date")
    return out
