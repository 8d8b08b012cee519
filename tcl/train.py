"""Train one cost model per (device, kind) and evaluate them on the held-out networks.

Training set: a device's training records (``tcl.dataset.training_records``: ``train.sources``,
never a task that a held-out network runs). Evaluation set: its records of the held-out
networks' tasks (``tcl.dataset.held_out_program_set``). Models live in
``models/<device>/<kind>.model`` (whatever the kind's ``save`` writes; ``tcl.models.load_model``
reads the kind back) beside ``<kind>.json``, the training facts (programs, tasks, seconds).
"""
from __future__ import annotations

import hashlib
import json
import random
import shutil
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import polars as pl

from .config import Paths, TclError, atomic_write, write_json
from .dataset import held_out_program_set, holdout_task_ids, load_program_set, training_records
from .evaluate import SEED_MARK, evaluate, over_seeds, write_report
from .models import load_model, make_model
from .progress import Progress, stderr_line
from .zoo.extract import load_networks, load_tasks


def split_tasks(task_ids: Sequence[str], valid_fraction: float, seed: int
                ) -> tuple[list[str], list[str]]:
    """(train, valid) task ids: ``valid_fraction`` of the tasks, at least one left to train."""
    tasks = sorted(task_ids)
    n_valid = min(int(len(tasks) * valid_fraction), len(tasks) - 1)
    if n_valid <= 0:
        return tasks, []
    valid = set(random.Random(seed).sample(tasks, n_valid))
    return [t for t in tasks if t not in valid], sorted(valid)


# The code that decides a fit given its records and knobs: the model kinds, the labels, the
# program sets (``_FIT_FUNCTIONS``' functions of tcl.dataset: records joined with features) and
# this module's fitting functions (not the orchestration around them: progress, reuse,
# staging). A change to it makes every model again. Which records a fit learns from is in the
# key as the records themselves, so the rules that choose them (``training_records``, the
# sources, the held-out tasks) are not code of the key; nor are tcl.dataset's evaluation rules.
# (Features have their own version, tcl.features.FEATURES_VERSION, inside the key.)
_FIT_CODE = ("models", "metrics.py")
_FIT_FUNCTIONS = (("dataset", ("program_set", "to_program_set", "load_program_set")),
                  ("train", ("split_tasks", "_training_tasks", "train_model")))


def _code_digest() -> str:
    import importlib
    import inspect

    root = Path(__file__).resolve().parent
    digest = hashlib.sha256()
    for part in _FIT_CODE:
        for f in sorted((root / part).rglob("*.py")) if (root / part).is_dir() else [root / part]:
            digest.update(f.relative_to(root).as_posix().encode() + b"\0" + f.read_bytes())
    for module, names in _FIT_FUNCTIONS:
        found = importlib.import_module(f"{__package__}.{module}")
        for name in names:
            digest.update(inspect.getsource(getattr(found, name)).encode())
    return digest.hexdigest()


def fit_key(kind: str, hyper: dict[str, Any] | None, seed: int, valid_fraction: float,
            records: pl.DataFrame, tasks: Sequence[str]) -> str:
    """What a fit depends on, as one hash: the kind and its knobs, the seed and validation
    share, the training records of ``tasks`` (program ids and latencies), the features' version
    and the fitting code. A model whose training facts hold the same key is that fit's result:
    training it again would only spend the time (``train_many`` reuses it)."""
    from .features import features_version

    rows = records.filter(pl.col("task_id").is_in(list(tasks))).sort("program_id")
    digest = hashlib.sha256(json.dumps(
        {"kind": kind, "hyper": hyper or {}, "seed": seed, "valid_fraction": valid_fraction,
         "features": features_version(), "code": _code_digest()},
        sort_keys=True, default=str).encode())
    digest.update("\n".join(rows["program_id"].to_list()).encode())
    digest.update(rows["latency"].cast(pl.Float64).to_numpy().tobytes())
    return digest.hexdigest()[:32]


def _training_tasks(records: pl.DataFrame, task_ids: Iterable[str] | None) -> list[str]:
    have = set(records["task_id"].to_list())
    return sorted(have if task_ids is None else have & set(task_ids))


def train_model(paths: Paths, device: str, kind: str, hyper: dict[str, Any] | None = None, *,
                seed: int = 0, valid_fraction: float = 0.1,
                task_ids: Iterable[str] | None = None, index: int = 0,
                records: pl.DataFrame | None = None, sources: Sequence[str] | None = None,
                out: Path | None = None, key: str | None = None) -> Path:
    """Fit ``make_model(kind, **hyper, seed=seed)`` on the device's training tasks; returns the
    saved model file (``out``, default ``paths.model_file(device, kind, index)``; its training
    facts beside it, ``<name>.json``). ``task_ids`` narrows the candidate tasks (held-out ones
    are always left out); a share ``valid_fraction`` of the tasks is kept aside for early
    stopping.
    ``sources``: which records to learn from (``tcl.dataset.SOURCES``; None: every record).
    ``records``: ``training_records(paths, device, sources)`` when the caller has them
    (``train_many`` asks once for all its fits). ``key``: the fit's ``fit_key``, kept in the
    training facts."""
    records = training_records(paths, device, sources) if records is None else records
    tasks = _training_tasks(records, task_ids)
    if not tasks:
        have = records["task_id"].n_unique()
        narrowed = "" if task_ids is None else ", none of them selected"
        raise TclError(f"no measured programs of training tasks on device {device!r} ({have} "
                       f"measured training tasks{narrowed}; a held-out network's tasks are never "
                       "trained on): run the measure stage first")
    train_ids, valid_ids = split_tasks(tasks, valid_fraction, seed)
    train = load_program_set(paths, device, train_ids, records=records)
    valid = load_program_set(paths, device, valid_ids, records=records) if valid_ids else None
    model = make_model(kind, **{**(hyper or {}), "seed": seed})
    start = time.perf_counter()
    model.fit(train, valid)
    secs = time.perf_counter() - start
    out = paths.model_file(device, kind, index) if out is None else out
    model.made_for = device   # recorded in the file: a copy anywhere still names its device
    model.save(out)
    info = {"device": device, "kind": kind, "seed": seed, "train_secs": round(secs, 2),
            "n_programs": len(train), "n_tasks": len(train_ids),
            "n_valid_programs": len(valid) if valid is not None else 0,
            "n_valid_tasks": len(valid_ids), **({"inputs": key} if key else {})}
    if hasattr(model, "fit_epochs"):   # neural kinds: epochs run, and the one kept
        info.update(epochs=model.fit_epochs, best_epoch=model.best_epoch)
    with atomic_write(out.with_suffix(".json"), "training facts file") as tmp:
        tmp.write_text(json.dumps(info, indent=2) + "\n")
    return out


def _one_thread() -> None:
    """A training worker of several in parallel: one core each (torch, XGBoost, OpenMP)."""
    import os

    import torch

    os.environ["OMP_NUM_THREADS"] = "1"
    torch.set_num_threads(1)


def train_seeds(paths: Paths, device: str, kind: str, hyper: dict[str, Any] | None = None, *,
                seeds: Sequence[int] = (0,), valid_fraction: float = 0.1,
                task_ids: Iterable[str] | None = None, workers: int | None = None) -> list[Path]:
    """One model per seed (the first one's file is ``Paths.model_file``, the rest under
    ``Paths.seeds_dir``, which holds exactly those), fitted in parallel on up to ``workers``
    processes of one thread each (default: the usable CPUs); one seed trains here."""
    return train_many(paths, [(device, kind, hyper)], seeds=seeds,
                      valid_fraction=valid_fraction, task_ids=task_ids,
                      workers=workers)[(device, kind)]


def train_many(paths: Paths, runs: Sequence[tuple[str, str, dict[str, Any] | None]], *,
               seeds: Sequence[int] = (0,), valid_fraction: float = 0.1,
               task_ids: Iterable[str] | None = None, workers: int | None = None,
               sources: Sequence[str] | None = None,
               report: Callable[[str], None] | None = None,
               say: Callable[[str], None] = stderr_line,
               reused: set[tuple[str, str]] | None = None) -> dict[tuple[str, str], list[Path]]:
    """``train_seeds`` for each (device, kind, hyper) of ``runs``, all fits in one pool of up to
    ``workers`` single-threaded processes (default: the usable CPUs), in the order of ``runs``
    then seeds: put the slowest kind first, so that the short fits fill the cores at the end.
    One pool for every fit rather than one per (device, kind): with 3 seeds on 2 cores a pool
    per pair leaves a core idle while each pair's third seed trains. Returns each pair's model
    files, the first seed's first. ``sources``: as ``train_model``'s. ``report`` gets a progress
    line (fits done of all, rate, ETA) every ``tcl.progress.EVERY_S`` seconds (default: stderr).
    A (device, kind) whose models are the fits asked for (``fit_key``: same records, knobs,
    features and code) is not fitted again; ``say`` gets a line naming it, ``reused`` (if given)
    the pair."""
    import concurrent.futures as cf
    import multiprocessing
    import os

    seeds = list(seeds)
    task_ids = None if task_ids is None else list(task_ids)
    held = holdout_task_ids(paths)   # once for every device
    records = {d: training_records(paths, d, sources, held=held)
               for d in dict.fromkeys(d for d, _, _ in runs)}
    # Every fit is saved to a staging folder beside the models and moved into place only once
    # all of them succeeded: a failed training (a features file missing) keeps the old models.
    stage = {(d, k): paths.models_dir / d / f".{k}.training" for d, k, _ in runs}
    jobs = []
    for device, kind, hyper in list(runs):
        tasks = _training_tasks(records[device], task_ids)
        keys = [fit_key(kind, hyper, seed, valid_fraction, records[device], tasks)
                for seed in seeds]
        if _current(paths, device, kind, keys):
            del stage[(device, kind)]
            if reused is not None:
                reused.add((device, kind))
            say(f"train {device} {kind}: {len(keys)} model(s) reused, their inputs unchanged "
                "(records, knobs, features version, fitting code)")
            continue
        shutil.rmtree(stage[(device, kind)], ignore_errors=True)   # a killed run's leftovers
        stage[(device, kind)].mkdir(parents=True)
        jobs += [(device, kind, dict(hyper=hyper, seed=seed, valid_fraction=valid_fraction,
                                     task_ids=task_ids, records=records[device],
                                     out=stage[(device, kind)] / f"s{i}.model", key=key))
                 for i, (seed, key) in enumerate(zip(seeds, keys))]
    workers = max(1, min(len(jobs), workers or len(os.sched_getaffinity(0))))
    try:
        with Progress("train", len(jobs), unit="fits", report=report) as lines:
            if workers <= 1:
                for device, kind, job in jobs:
                    train_model(paths, device, kind, **job)
                    lines.advance()
            else:
                spawn = multiprocessing.get_context("spawn")
                with cf.ProcessPoolExecutor(workers, mp_context=spawn,
                                            initializer=_one_thread) as pool:
                    futures = [pool.submit(train_model, paths, device, kind, **job)
                               for device, kind, job in jobs]
                    for f in cf.as_completed(futures):
                        f.result()
                        lines.advance()
        out = {(d, k): [paths.model_file(d, k, i) for i in range(len(seeds))]
               for d, k, _ in runs if (d, k) not in stage}
        for (device, kind), staged in stage.items():
            extra = paths.seeds_dir(device, kind)
            extra.mkdir(parents=True, exist_ok=True)   # a DVC out: present, empty for one seed
            files = [paths.model_file(device, kind, i) for i in range(len(seeds))]
            for i, f in enumerate(files):
                for suffix in (".json", ".model"):     # the model last: it marks a whole pair
                    os.replace((staged / f"s{i}.model").with_suffix(suffix),
                               f.with_suffix(suffix))
            for old in extra.iterdir():                # no model of a seed no longer asked for
                if old.with_suffix(".model") not in files:
                    old.unlink()
            out[(device, kind)] = files
        return out
    finally:
        for staged in stage.values():
            shutil.rmtree(staged, ignore_errors=True)


def _current(paths: Paths, device: str, kind: str, keys: Sequence[str]) -> bool:
    """Whether the device's models of ``kind`` are exactly the fits ``keys`` name: one per seed,
    each model file present beside training facts that hold its key, and no other seed's."""
    files = [paths.model_file(device, kind, i) for i in range(len(keys))]
    extra = paths.seeds_dir(device, kind)
    others = [f for f in extra.glob("*.model") if f not in files] if extra.is_dir() else []
    if others or not all(f.exists() and f.with_suffix(".json").exists() for f in files):
        return False
    try:
        return [json.loads(f.with_suffix(".json").read_text()).get("inputs")
                for f in files] == list(keys)
    except (OSError, ValueError):
        return False   # unreadable facts: fit again


def evaluate_models(paths: Paths, devices: Sequence[str], kinds: Sequence[str],
                    out_dir: str | Path, *, ks: Sequence[int] = (1, 5),
                    task_ids: Iterable[str] | None = None,
                    network_keys: Iterable[str] | None = None, seeds: int = 1
                    ) -> tuple[pl.DataFrame, dict]:
    """Score each device's models on its measured programs of the held-out networks' tasks
    (optionally only ``task_ids`` / the networks ``network_keys``); with ``seeds`` > 1 each
    figure is the mean over the kind's seed models, with its standard error (``se_<figure>``,
    ``tcl.evaluate.over_seeds``). Writes the report:
    ``tcl.evaluate.write_report``'s files plus ``summary.json`` (mean per device and model: the
    DVC metrics) and ``scores.csv`` (the same as rows: the DVC plot). Returns (frame, files)."""
    nets = load_networks(paths)
    if network_keys is not None:
        nets = nets.filter(pl.col("network_key").is_in(list(network_keys)))
    held = set(nets.filter(pl.col("holdout"))["task_id"].to_list())
    if task_ids is not None:
        held &= set(task_ids)
    if not held:
        raise TclError("no task of a held-out network is selected: nothing to evaluate on "
                       "(check zoo.networks and sample.max_train_tasks)")
    tasks = load_tasks(paths)
    frames = []
    lines = Progress("evaluate", len(devices), unit="devices")
    for device in lines.each(devices):
        programs = held_out_program_set(paths, device, held)
        files = {(k if seeds == 1 else f"{k}{SEED_MARK}{i}"): (k, paths.model_file(device, k, i))
                 for k in kinds for i in range(seeds)}
        missing = [str(f) for _, f in files.values() if not f.exists()]
        if missing:
            raise TclError(f"model(s) not trained: {', '.join(missing)}; run the train stage"
                           + (f" (train.seeds is {seeds})" if seeds > 1 else ""))
        models = {name: load_model(f, kind=k) for name, (k, f) in files.items()}
        latency = pl.DataFrame({"program_id": programs.program_ids.astype(str),
                                "task_id": programs.task_ids.astype(str),
                                "latency": programs.latency, "device": [device] * len(programs)})
        frames.append(evaluate(models, programs, latency, nets, tasks, ks=ks))
    frame = over_seeds(pl.concat(frames))
    files = write_report(frame, out_dir)
    files.update(_summary(frame, Path(out_dir)))
    return frame, files


def _summary(frame: pl.DataFrame, out: Path) -> dict[str, Path]:
    values = [c for c in frame.columns if c.startswith("top") or c == "pairwise"]
    values += [f"se_{v}" for v in values if f"se_{v}" in frame.columns]
    mean = frame.filter(pl.col("scope") == "mean").sort("device", "model")
    summary: dict[str, dict] = {}
    for row in mean.iter_rows(named=True):
        summary.setdefault(row["device"] or "all", {})[row["model"]] = {
            v: (None if row[v] is None or row[v] != row[v] else round(float(row[v]), 4))
            for v in values}
    files = {"summary": out / "summary.json", "scores": out / "scores.csv",
             "by_model": out / "by-model"}
    write_json(files["summary"], summary, "report file")
    shutil.rmtree(files["by_model"], ignore_errors=True)   # only this run's devices and models
    for device, models in summary.items():
        for model, figures in models.items():
            write_json(files["by_model"] / device / f"{model}.json",
                       {v: figures[v] for v in figures if not v.startswith("se_")}, "report file")
    scores = mean.select(pl.concat_str([pl.col("device").fill_null("all"), pl.col("model")],
                                       separator=" ").alias("run"),
                         pl.col("device").fill_null("all"), "model", *values)
    with atomic_write(files["scores"], "report file") as tmp:
        scores.write_csv(tmp, float_precision=4)
    return files
