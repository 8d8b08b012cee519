"""The add-device run: a newly registered device gets its own model, and nothing else changes.

``add_device_run(params, device)``:

1. samples candidates for the pipeline's tasks (no measurement);
2. selects ``select.budget`` of the training tasks' candidates with ``select.sampler``, the
   latest registered model as the cold-start model, and measures only the picks (resumable:
   ``tcl.measure.active``);
3. measures ``add_device.eval_programs_per_task`` candidates of every held-out task, the new
   device's evaluation set;
4. distills the latest model into one that also serves the new device
   (``tcl.continual.run.distill_device`` with the latest model's device as teacher);
5. evaluates it (the new device; forgetting on the earlier ones) and registers it.

Earlier devices' records and models are only read. A device whose every measurement failed is
marked failed (``tcl status`` shows it) and gets no model. Running it again for the same device
selects, measures and trains nothing new, and says so.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

import polars as pl

from .config import TclError
from .device import Device, DeviceRegistry
from .params import Params
from .registry import ModelRegistry
from .store.records import safe_component


@dataclass
class AddDeviceResult:
    device: str
    teacher: str              # the teacher model's id
    selected: int             # programs selected (all rounds)
    measured_now: int         # measured by this run
    model: str                # the new model's id
    new_model: bool           # False: nothing new was trained
    metrics: dict

    def markdown(self) -> str:
        m = self.metrics
        lines = [f"# Device {self.device} added", "",
                 f"Teacher model `{self.teacher}`; {self.selected} programs selected, "
                 f"{self.measured_now} measured by this run; model `{self.model}`"
                 f"{'' if self.new_model else ' (nothing new: already registered)'}.", "",
                 "| device | top-1 | top-5 | pairwise | forgetting top-1 | forgetting pairwise "
                 "| worst class (pairwise) |", "|---|---|---|---|---|---|---|"]
        for d, s in m.get("devices", {}).items():
            f = m.get("forgetting", {}).get(d)
            cells = ["", "", ""] if f is None else [
                _fmt(f["top1"]["overall"]), _fmt(f["pairwise"]["overall"]),
                f"{f['pairwise']['worst_class']} {_fmt(f['pairwise']['worst'])}"]
            lines.append(f"| {d}{' (new)' if d == self.device else ''} | {_fmt(s.get('top1'))} "
                         f"| {_fmt(s.get('top5'))} | {_fmt(s.get('pairwise'))} | "
                         + " | ".join(cells) + " |")
        p = m.get("parameters", {})
        if p:
            lines += ["", f"Parameters: {p['shared']} shared + {p['per_device']} per device "
                          f"({p['total']} in all)."]
        return "\n".join(lines) + "\n"


def _fmt(v) -> str:
    return "" if v is None else f"{v:.3f}"


def latest_teacher(params: Params, device: str):
    """The newest registered model of the continual backbone made for another device."""
    frame = ModelRegistry(params.paths).frame()
    if not frame.is_empty():
        frame = frame.filter((pl.col("backbone") == params.continual.backbone)
                             & (pl.col("device") != device))
    if frame.is_empty():
        raise TclError(f"no registered {params.continual.backbone} model to distill {device!r} "
                       f"from: run the continual sequence first (`tcl stage distill`)")
    return ModelRegistry(params.paths).get(frame.row(-1, named=True)["id"])


def check_device(params: Params, name: str) -> Device:
    """The device an add-device run may be for: a name that cannot be a path (checked before
    anything reads it), registered in the params' data root; anything else is a TclError."""
    return DeviceRegistry(params.paths).get(safe_component(name, "device name"))


def add_device_run(params: Params, device: str, say: Callable[[str], None] = print,
                   progress: bool = False) -> AddDeviceResult:
    from . import pipeline
    from .continual.run import distill_device
    from .measure.active import Selection, select_and_measure
    from .measure.collect import collect
    from .status import clear_failed, mark_failed

    dev = check_device(params, device)   # unknown or path-like: a clear error
    teacher_entry = latest_teacher(params, device)
    registry = ModelRegistry(params.paths)
    teacher = registry.load(teacher_entry).for_device(teacher_entry.device)
    pipeline.run_sample(params, progress=progress)
    tasks = pipeline.selected_tasks(params)
    train, held = tasks.filter(~pl.col("holdout")), tasks.filter(pl.col("holdout"))
    sel = params.select
    selection = Selection(sel.sampler, sel.budget, sel.rounds, sel.options, seed=sel.seed)
    stats = select_and_measure(params.paths, dev, train, params.sample.programs_per_task,
                               selection, model=teacher, batch_size=params.measure.batch_size,
                               progress=progress, say=say, model_name=teacher_entry.id)
    evaluation = collect(params.paths, dev, held, params.add_device.eval_programs_per_task,
                         seed=params.sample.seed, batch_size=params.measure.batch_size,
                         progress=progress)
    pipeline.run_featurize(params, progress=progress)   # the evaluation set's features
    measured_now = stats.collect.measured + evaluation.measured
    ok = _ok_records(params, device)
    if ok == 0:
        reason = (f"no measurement of {device} succeeded "
                  f"({stats.collect.errors + evaluation.errors} errors this run)")
        mark_failed(params.paths, device, reason)
        raise TclError(f"device {device!r}: {reason}; it is marked failed (`tcl status`) and "
                       "gets no model. Check its target and host, then run it again")
    clear_failed(params.paths, device)
    run_params = replace(params, continual=replace(params.continual, subset_from="selections"))
    result = distill_device(run_params, device, say=say, teacher_device=teacher_entry.device)
    selected = sum(r["selected"] for r in stats.rounds)
    return AddDeviceResult(device, teacher_entry.id, selected, measured_now, result.entry.id,
                           result.new, result.metrics)


def _ok_records(params: Params, device: str) -> int:
    from .store.catalog import query

    return int(query(params.paths, f"select count(*) n from records where device = "
                                   f"'{device.replace(chr(39), '')}' and status = 'ok'")["n"][0])
