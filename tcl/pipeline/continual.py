"""The continual run in the pipeline: ``distill_device`` for one device of the sequence.

A device's training records are what the train stage learns from: every measured record of
``train.sources`` (reference tasks, long-tail families, user networks, imported logs, tuning
runs), never a held-out network's task; its training tasks are the tasks of those records.
For the sequence's first device the model is trained on all of them (method "scratch"). For
a later device:

1. the teacher is the registry's latest model of the device before it in the sequence;
2. its measured subset is what was selected for it (``tcl.store.selections``). With
   ``subset_from: measured`` and no selection yet, ``continual.subset`` of its measured
   training records is selected now by ``select.sampler`` (cold start: the teacher's
   embedding and uncertainty) and written as a selection, so reruns see the same subset. Its
   tuning runs' records of training tasks join the subset unselected (``tuning_ids``);
3. its pool (the distillation's unlabelled candidates) is every featurized candidate of the
   training tasks;
4. the method (``continual.method``) makes the student, which is evaluated (the new device's
   held-out networks; forgetting on every earlier device against the score its own model had)
   and registered. Unchanged inputs (same records, teacher, method and settings) register
   nothing and train nothing.
"""
from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np
import polars as pl

from ..config import TclError
from ..continual.base import DeviceData, Settings, config_of, make_distiller
from ..dataset import (SOURCES, held_out_program_set, program_set, record_sources,
                       training_records)
from ..evaluate import evaluate
from ..features import load_features
from ..metrics import forgetting_summary
from ..progress import Progress
from ..registry import Entry, ModelRegistry
from ..resolve import resolve_model
from ..samplers import Pool, make_sampler, parse_budget, sampler_options
from ..store.selections import SelectionStore
from ..train import split_tasks
from ..zoo.extract import load_networks, load_tasks
from .inputs import selection
from .params import Params

SUBSET_RUN = "continual-subset"   # the selection run of subsets picked from measured records


@dataclass
class DistillResult:
    entry: Entry
    new: bool                # False: the inputs were unchanged, nothing was trained
    metrics: dict


def settings_of(params: Params) -> Settings:
    c = params.continual
    return Settings(c.backbone, params.train.hyper_of(c.backbone), c.kd_new, c.kd_old, c.ewc,
                    c.seed)


def _records(params: Params, device: str, task_ids: list[str] | None) -> pl.DataFrame:
    """program_id, task_id, latency (NaN for error rows), measured_at, source of the device's
    records that the models learn from (``train.sources``; never a held-out task), of ``task_ids``
    only when given."""
    return training_records(params.paths, device, params.train.sources, task_ids,
                            extra=("measured_at", "source"))


def pool_rows(params: Params, task_ids: list[str]) -> pl.DataFrame:
    """program_id, task_id of every featurized candidate of the training tasks."""
    return load_features(params.paths, task_ids).select("program_id", "task_id").unique() \
        .sort("task_id", "program_id")


def subset_ids(params: Params, device: str, records: pl.DataFrame, teacher,
               say: Callable[[str], None]) -> set[str]:
    """Program ids of the device's measured subset (see the module docstring, step 2)."""
    store = SelectionStore(params.paths)
    chosen = set(store.of_device(device)["program_id"].to_list())
    if chosen:
        return chosen & set(records["program_id"])
    if params.continual.subset_from != "measured":
        raise TclError(f"device {device!r} has no measured subset: nothing was selected for it "
                       f"(run `tcl stage select --device {device}` or `tcl collect --device "
                       f"{device} --select rdu --budget {params.continual.subset}` first)")
    ok = records.filter(pl.col("latency").is_finite())
    if ok.is_empty():
        raise TclError(f"device {device!r} has no measured subset: no ok record of a training "
                       f"task (import or measure its records first)")

    sel = selection(params)
    ps = program_set(params.paths, ok.select("program_id", "task_id"), labels=False)
    k = parse_budget(params.continual.subset, len(ps))
    sampler = make_sampler(sel.sampler, on_note=lambda n: say(f"distill: {n}"),
                           **sampler_options(sel.sampler, sel.options, teacher))
    ids = sampler.select(Pool(ps), min(k, len(ps)), model=teacher, seed=sel.seed)
    task_of = dict(zip(ps.program_ids.astype(str), ps.task_ids.astype(str)))
    store.write(device, SUBSET_RUN, 0, list(ids), [task_of[i] for i in ids], sel.sampler,
                "teacher" if teacher is not None else "none")
    say(f"distill {device}: selected {len(ids)} of its {len(ps)} measured training programs "
        f"with {sel.sampler} (selection run {SUBSET_RUN})")
    return set(ids)


def tuning_ids(params: Params, records: pl.DataFrame) -> set[str]:
    """Program ids among ``records`` (``_records``'s, with their source) that a tuning run
    measured (``tcl tune`` of a training network). The search measured them on the device
    already, so they join the device's subset without being selected: each run feeds the next
    model (``train.sources`` without ``tuning`` leaves them out, as it leaves them out of every
    record here)."""
    if records.is_empty():
        return set()
    tuned = record_sources(params.paths, records).list.contains("tuning")
    return set(records.filter(tuned)["program_id"].to_list())


def device_data(params: Params, device: str, labelled_rows: pl.DataFrame,
                pool: pl.DataFrame | None) -> DeviceData:
    rows = labelled_rows.filter(pl.col("latency").is_not_null())
    train_ids, valid_ids = split_tasks(rows["task_id"].unique().to_list(),
                                       params.train.valid_fraction, params.continual.seed)
    labelled = program_set(params.paths, rows.filter(pl.col("task_id").is_in(train_ids)), True)
    valid = program_set(params.paths, rows.filter(pl.col("task_id").is_in(valid_ids)), True) \
        if valid_ids else None
    unlabelled = program_set(params.paths, pool, False) if pool is not None else None
    return DeviceData(device, labelled, valid, unlabelled)


def snapshot_key(device: str, method: str, settings: Settings, parent: str | None,
                 rows: pl.DataFrame, pool: pl.DataFrame | None) -> str:
    """What went into a model: equal keys, equal inputs (the registry's "nothing new" test)."""
    h = hashlib.sha256(json.dumps([device, method, settings.__dict__, parent],
                                  sort_keys=True, default=str).encode())
    for frame in (rows.select("program_id", "measured_at").sort("program_id"),
                  None if pool is None else pool.select("program_id").sort("program_id")):
        if frame is not None:
            h.update(frame.write_csv().encode())
    return h.hexdigest()


@dataclass
class DistillJob:
    """One device's distillation, prepared (``prepare_distill``): what ``fit_distill`` trains
    on and ``register_distill`` records. The add-device flow runs the three as its steps."""

    params: Params
    device: str
    method: str
    settings: Settings
    registry: ModelRegistry
    tasks: list[str]
    rows: pl.DataFrame
    pool: pl.DataFrame | None
    teacher: object | None     # the loaded teacher model (a MultiDeviceModel), or None
    parent: str | None         # the teacher's registry id
    key: str                   # the snapshot key (``snapshot_key``)


def distill_device(params: Params, device: str, method: str | None = None,
                   say: Callable[[str], None] = print,
                   teacher_device: str | None = None,
                   teacher: tuple[Entry, object] | None = None,
                   tasks: list[str] | None = None) -> DistillResult:
    """Make, evaluate and register ``device``'s model (module docstring): ``prepare_distill``,
    then ``fit_distill`` and ``register_distill`` unless nothing is new."""
    # the three steps, counted: preparing (the teacher's picks over the pool) and evaluating
    # (every device's held-out set) each ran for up to a minute without a line
    with Progress(f"distill {device} (prepare, fit, evaluate)", 3, unit="steps") as steps:
        job = prepare_distill(params, device, method, say, teacher_device, teacher, tasks)
        if isinstance(job, DistillResult):
            return job
        steps.advance()
        model, secs = fit_distill(job)
        steps.advance()
        result = register_distill(job, model, secs, say)
        steps.advance()
        return result


def prepare_distill(params: Params, device: str, method: str | None = None,
                    say: Callable[[str], None] = print, teacher_device: str | None = None,
                    teacher: tuple[Entry, object] | None = None,
                    tasks: list[str] | None = None) -> DistillJob | DistillResult:
    """What ``device``'s distillation trains on, or the registered model (``new`` False) when
    the same inputs made one already. The teacher is the latest model of the device before it
    in ``continual.sequence``, or of ``teacher_device`` (a device not in the sequence), or
    ``teacher``: an (entry, loaded model) pair resolved by the caller (the add-device run
    resolves and loads it once). ``tasks``: the training task ids, if the caller has them."""
    seq = params.continual.sequence
    if teacher is not None:
        teacher_device = teacher[0].device
    if teacher_device is None and device not in seq:
        raise TclError(f"device {device!r} is not in {params.source.name}'s continual sequence "
                       f"({' -> '.join(seq)}); add it to continual.then first")
    before = teacher_device if teacher_device is not None else \
        (seq[seq.index(device) - 1] if seq.index(device) else None)
    position = 0 if before is None else 1
    method = method or (params.continual.method if position else "scratch")
    settings = settings_of(params)
    registry = ModelRegistry(params.paths)
    records = _records(params, device, sorted(tasks) if tasks is not None else None)
    if records.is_empty():
        raise TclError(f"device {device!r} has no measured record of a training task "
                       f"(train.sources: {', '.join(params.train.sources or SOURCES)}): measure it "
                       f"(`tcl stage measure --device {device}`) or import its records first")
    tasks = sorted(set(records["task_id"].to_list()))
    model, parent = None, None
    if teacher is not None:
        parent, model = teacher[0].id, teacher[1]
    elif position:
        found = resolve_model(params.paths, device, f"{before}/latest", any_device=True,
                              backbone=settings.backbone, optional=True)
        if found is None:
            raise TclError(f"{device!r} comes after {before!r} in continual.sequence, and "
                           f"{before!r} has no {settings.backbone} model yet: run "
                           f"`tcl distill --device {before}` first")
        model, parent = found.model, found.entry.id
    pool = pool_rows(params, tasks) if position else None
    chosen = set(records["program_id"]) if not position else \
        subset_ids(params, device, records, model, say) | tuning_ids(params, records)
    rows = records.filter(pl.col("program_id").is_in(list(chosen)))
    if rows.is_empty():
        raise TclError(f"device {device!r}: none of its selected programs is measured now "
                       f"(not yet, or retired); measure them: `tcl collect --device {device} "
                       "--selected`")
    key = snapshot_key(device, method, settings, parent, rows, pool)
    same = registry.find(key)
    if same is not None:
        say(f"distill {device}: nothing new: model {same.id} ({same.method}) was made from "
            f"these {same.n_records} records and this teacher already; nothing retrained")
        return DistillResult(same, False, same.metrics)
    return DistillJob(params, device, method, settings, registry, tasks, rows, pool, model,
                      parent, key)


def fit_distill(job: DistillJob) -> tuple[object, float]:
    """The student model, and the seconds its training took."""
    history = []
    if make_distiller(job.method).needs_old_data:
        history = _history(job.params, job.teacher.devices if job.teacher is not None else [],
                           job.tasks, job.registry)
    new = device_data(job.params, job.device, job.rows, job.pool)
    start = time.perf_counter()
    # epochs: at most the backbone's (early stopping may end it sooner)
    with Progress(f"distill {job.device}", config_of(job.settings)["epochs"], unit="epochs",
                  counts_steps=True):
        model = make_distiller(job.method).fit(job.teacher, new, job.settings, history)
    return model, time.perf_counter() - start


def register_distill(job: DistillJob, model, secs: float,
                     say: Callable[[str], None] = print) -> DistillResult:
    """Evaluate the student (new device; forgetting on the earlier ones) and register it."""
    metrics = evaluate_continual(job.params, model, job.registry)
    metrics["train_secs"] = round(secs, 2)
    newest = job.rows["measured_at"].max()
    entry = job.registry.register(model, device=job.device, parent=job.parent,
                                  method=job.method, snapshot=job.key, n_records=len(job.rows),
                                  newest_measured_at=newest, train_secs=secs, metrics=metrics)
    say(f"distill {job.device}: registered {entry.id} ({job.method}, {len(job.rows)} records, "
        f"{secs:.0f} s): " + ", ".join(f"{k} {v:.3f}" for k, v in metrics["new"].items()))
    return DistillResult(entry, True, metrics)


def _history(params: Params, devices, tasks: list[str], registry: ModelRegistry):
    """Earlier devices' measured data as their own models had it (multi-task needs it)."""
    out = []
    for d in devices:
        records = _records(params, d, tasks)
        entry = registry.latest(d, params.continual.backbone)
        if entry is not None and entry.method != "scratch":
            chosen = subset_ids(params, d, records, None, lambda _: None)
            records = records.filter(pl.col("program_id").is_in(list(chosen)))
        out.append(device_data(params, d, records, None))
    return out


def evaluate_continual(params: Params, model, registry: ModelRegistry | None = None) -> dict:
    """Scores of ``model`` on each device it serves (held-out networks): ``new`` (its target),
    ``devices`` (each one), ``forgetting`` (each earlier device: its own model's score minus
    this one's, overall and per operator class; ``tcl.metrics.forgetting_summary``) and
    ``parameters``."""
    frames = {d: held_out_scores(params, model.for_device(d), d) for d in model.devices}
    out: dict = {"new": _mean(frames[model.target]), "parameters": model.n_parameters(),
                 "devices": {d: _mean(f) for d, f in frames.items()}, "forgetting": {}}
    if registry is None:
        return out
    for d in model.devices[:-1]:
        own = resolve_model(registry.paths, d, f"{d}/latest", backbone=model.backbone,
                            optional=True)
        if own is None:
            continue
        before = held_out_scores(params, own.model.for_device(d), d)
        out["forgetting"][d] = forgetting_summary(before, frames[d])
    return out


def held_out_scores(params: Params, model, device: str) -> pl.DataFrame:
    """tcl.evaluate.evaluate's rows for ``model`` on ``device``'s held-out networks."""
    ps = held_out_program_set(params.paths, device)
    return evaluate({"model": model}, ps, None, load_networks(params.paths),
                    load_tasks(params.paths), ks=params.evaluate.top_k)


def _mean(frame: pl.DataFrame) -> dict[str, float]:
    row = frame.filter(pl.col("scope") == "mean").row(0, named=True)
    return {k: round(float(v), 4) for k, v in row.items()
            if (k.startswith("top") or k == "pairwise") and v is not None and np.isfinite(v)}
