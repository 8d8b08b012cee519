"""The pipeline's stages, each one library call on validated params.

``tcl stage NAME`` (what every DVC stage runs) and the Prefect flows in ``flows/`` call these
functions and nothing else, so each step is implemented once:

    zoo -> sample -> measure (per device) -> featurize -> train (per device x model) -> evaluate

What to measure is decided by a DuckDB query over the record store (``measure_todo``): a second
run measures nothing, and raising ``sample.programs_per_task`` measures only the difference.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import polars as pl

from ..config import TclError, write_json
from ..features import featurize
from ..measure.active import select_and_measure
from ..measure.collect import CollectStats, collect
from ..resolve import resolve_model
from ..sampling import ensure_candidates, load_candidates
from ..store.catalog import candidates_measured
from ..store.devices import DeviceRegistry
from ..train import evaluate_models, train_many
from ..zoo.extract import build_zoo
from .inputs import collect_options, instances, selected_tasks, selection
from .params import Params
from .scale_out import builder, local_processes


def _say(msg: str) -> None:
    print(msg, flush=True)


def run_zoo(params: Params) -> int:
    """Extract the tasks of the selected networks not yet in the zoo; returns tasks selected."""
    build_zoo(params.paths, instances=instances(params))
    n = len(selected_tasks(params))
    _say(f"zoo: {n} tasks selected from {len(params.zoo.networks)} networks")
    return n


def run_sample(params: Params, progress: bool = True, task_ids: list[str] | None = None) -> int:
    """Sample candidates up to ``sample.programs_per_task`` for every selected task, or for
    ``task_ids`` of them (device-independent, persisted); returns how many new candidates were
    sampled."""
    from tqdm import tqdm

    paths, n = params.paths, params.sample.programs_per_task
    tasks = selected_tasks(params)
    if task_ids is not None:
        tasks = tasks.filter(pl.col("task_id").is_in(task_ids))
    new = 0
    for row in tqdm(tasks.iter_rows(named=True), total=len(tasks), desc="sample", unit="task",
                    disable=not progress, file=sys.stderr):
        before = len(load_candidates(paths, row["task_id"]))
        ensure_candidates(paths, row["task_id"], row["workload_json"], n, params.sample.seed)
        new += len(load_candidates(paths, row["task_id"])) - before
    _say(f"sample: {new} new candidates; {len(tasks)} tasks x up to {n} programs")
    return new


def measure_todo(params: Params, device: str) -> pl.DataFrame:
    """Per selected task: ``candidates`` (of the first programs_per_task), ``measured`` (of those,
    already in the store for ``device``) and ``todo``, by one DuckDB query over the candidates
    and the records (``tcl.store.catalog.candidates_measured``). A task whose candidates are
    not sampled yet counts programs_per_task.

    Counts by program id per device name, unlike ``tcl collect``'s plan (record ids, which
    include the host CPU): a clone of the committed dataset on another CPU is complete for the
    pipeline, while ``tcl collect`` there would measure the programs anew for that host."""
    return candidates_measured(params.paths, device, selected_tasks(params),
                               params.sample.programs_per_task)


def run_measure(params: Params, device: str, progress: bool = True):
    """Measure on ``device`` what ``measure_todo`` says is missing; returns CollectStats."""
    todo = measure_todo(params, device)
    left = todo.filter(pl.col("todo") > 0)
    if left.is_empty():
        _say(f"measure {device}: nothing new to measure ({int(todo['measured'].sum())} programs "
             f"of {len(todo)} tasks already stored)")
        return CollectStats(skipped=int(todo["measured"].sum()))
    _say(f"measure {device}: {int(left['todo'].sum())} programs to measure in {len(left)} tasks")
    tasks = selected_tasks(params).join(left.select("task_id"), on="task_id", how="semi")

    dev = DeviceRegistry(params.paths).get(device)
    with builder(params) as build_on:   # None: the collector's LocalBuilder
        stats = collect(params.paths, dev, tasks, params.sample.programs_per_task,
                        **collect_options(params, dev),
                        progress=progress, builder=build_on)
    _say(f"measure {device}: measured {stats.measured} programs ({stats.errors} errors: "
         f"{stats.per_status}) in {stats.wall_secs:.0f}s")
    return stats


def run_featurize(params: Params, progress: bool = True,
                  task_ids: list[str] | None = None) -> int:
    """Features of every known program of ``feature_tasks``, or of ``task_ids`` of them
    (incremental)."""
    n = featurize(params.paths, task_ids=task_ids if task_ids is not None
                  else feature_tasks(params), progress=progress,
                  workers=local_processes(params))
    _say(f"featurize: {n} new programs")
    return n


def sample_tasks(params: Params) -> list[str]:
    """The tasks the sample stage covers: the selected ones."""
    return selected_tasks(params)["task_id"].to_list()


def feature_tasks(params: Params) -> list[str]:
    """The tasks whose programs need features: the selected ones, and every task with sampled
    candidates or stored records (a tuning run's and an import's programs are records, not
    candidates), so that whatever ``train.sources`` lets the models learn from has its features.
    A file listing, no query. (dvc.yaml: the stage depends on the candidates, not on the
    records, which the select stages write from its features; a fresh clone featurizes all.)"""
    tasks = set(sample_tasks(params))
    prefix = "task="
    paths = params.paths
    tasks |= {f.stem[len(prefix):] for f in paths.candidates_dir.glob(f"{prefix}*.parquet")}
    tasks |= {d.name[len(prefix):] for d in paths.records_dir.glob(f"device=*/{prefix}*")}
    return sorted(tasks)


def run_train(params: Params, device: str, kind: str) -> Path:
    """One model of ``kind`` for ``device`` on its measured programs of the training tasks."""
    if device not in params.devices:
        raise TclError(f"device {device!r} is not in {params.source.name}'s devices "
                       f"({', '.join(params.devices)})")
    if kind not in params.train.models:
        raise TclError(f"model kind {kind!r} is not in {params.source.name}'s train.models "
                       f"({', '.join(params.train.models)})")
    return _train(params, [(device, kind)])[(device, kind)]


def run_train_all(params: Params) -> dict[tuple[str, str], Path]:
    """Every kind of ``train.models`` on every device, all fits (seeds too) sharing one pool of
    single-threaded processes, the kinds in ``train.models``' order (``tcl.train.train_many``)."""
    return _train(params, [(device, kind) for kind in params.train.models
                           for device in params.devices])


def _train(params: Params, pairs: list[tuple[str, str]]) -> dict[tuple[str, str], Path]:
    reused: set[tuple[str, str]] = set()
    files = train_many(params.paths, [(d, k, params.train.hyper_of(k)) for d, k in pairs],
                       seeds=params.train.seed_list, valid_fraction=params.train.valid_fraction,
                       sources=params.train.sources, say=_say, reused=reused)
    for device, kind in pairs:
        if (device, kind) in reused:
            continue   # its training facts are an earlier run's
        for i in range(len(files[(device, kind)])):
            info = json.loads(params.paths.train_info_file(device, kind, i).read_text())
            _say(f"train {device} {kind}: " + ", ".join(f"{k} {v}" for k, v in info.items()
                                                         if k not in ("device", "kind", "inputs")))
    return {pair: paths[0] for pair, paths in files.items()}


def run_select(params: Params, device: str, progress: bool = True):
    """Active collection on ``device`` (one of ``select.devices``): the sampler picks
    ``select.budget`` of the device's pool (the sampled candidates of the selected tasks) and
    only the picks are measured; round 0's model is ``select.teacher``. Resumable."""
    sel = params.select
    if device not in sel.devices:
        raise TclError(f"device {device!r} is not in {params.source.name}'s select.devices "
                       f"({', '.join(sel.devices) or 'none'})")
    # "<device>/<kind>" (validated), another device's on purpose; not trained yet: no model
    teacher = resolve_model(params.paths, device, sel.teacher, any_device=True, optional=True)
    return select_and_measure(params.paths, DeviceRegistry(params.paths).get(device),
                              selected_tasks(params), params.sample.programs_per_task,
                              selection(params), model=teacher.model if teacher else None,
                              batch_size=params.measure.batch_size, progress=progress, say=_say,
                              model_name=teacher.what if teacher else "none")


def run_distill(params: Params, device: str | None = None, method: str | None = None) -> dict:
    """``tcl.pipeline.continual.distill_device`` for ``device``, or for every device of
    ``continual.sequence`` in order (each one whose inputs are unchanged is skipped). Writes
    ``reports/continual/<device>.json`` for each: its model (made now, or the one its unchanged
    inputs made before) and that model's metrics. That file is the DVC metrics of the device's
    stage and what the next device's stage depends on: a new teacher model reruns its
    students, an unchanged one leaves the file as it was."""
    # lazy: the continual run (torch) costs ~5 s at import; the other stages need none of it
    from .continual import distill_device

    reports = {}
    for d in [device] if device else list(params.continual.sequence):
        e = distill_device(params, d, method if device else None, say=_say).entry
        reports[d] = {"model": e.id, "method": e.method, "parent": e.parent,
                      "n_records": e.n_records,
                      **{k: v for k, v in e.metrics.items()
                         if k in ("new", "forgetting", "parameters")}}
        out = params.paths.continual_report(d)
        write_json(out, reports[d], "continual report")
        write_json(params.paths.continual_metrics(d), _headline(reports[d]), "continual report")
        _say(f"distill {d}: report in {out}")
    return reports


def _headline(report: dict) -> dict:
    """A continual report's figures as one flat row (``dvc metrics show``): the new device's
    top-1, top-5 and pairwise, its forgetting (top-1, mean over the earlier devices; null for the
    first) and the model's parameters."""
    lost = [f["top1"]["overall"] for f in (report.get("forgetting") or {}).values()
            if f.get("top1", {}).get("overall") is not None]
    new = report.get("new") or {}
    return {**{k: new.get(k) for k in ("top1", "top5", "pairwise")},
            "forgetting": round(sum(lost) / len(lost), 4) if lost else None,
            "parameters": (report.get("parameters") or {}).get("total")}


def run_evaluate(params: Params) -> tuple[pl.DataFrame, dict]:
    """Evaluate every (device, model) on the held-out networks; writes the report files."""
    frame, files = evaluate_models(
        params.paths, params.devices, params.train.models, params.paths.reports_dir,
        ks=params.evaluate.top_k, task_ids=selected_tasks(params)["task_id"].to_list(),
        network_keys=[i.key for i in instances(params)], seeds=params.train.seeds)
    _say(f"evaluate: report in {files['markdown']}")
    return frame, files
