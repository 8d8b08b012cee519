"""Samplers on a new device: train on the share of the pool a sampler picks, test on held-out nets.

Protocol (issue 12, point 4). A target device's measured programs of the training tasks (the
pipeline's selection, ``--params``) stand in for the device's candidate pool: a sampler sees
their features only (``Pool`` without labels or latencies), picks a share of them, and the
latencies of what it picked are revealed. Labels are computed within the picked programs of each
task (best picked latency / latency), as a new device would know them. A cost model (``--models``,
``params.yaml``'s ``train.hyper``) is trained on the picked programs: 10% of the picked programs'
tasks are kept aside for early stopping (``split_tasks``, as ``benchmarks/models.py`` and the train
stage do; no early stopping when fewer than 10 tasks were picked), and it is evaluated with
``tcl.evaluate`` on the device's programs of the held-out networks' tasks (top-1 / top-5: TenSet's
score, mean over held-out networks; pairwise accuracy). Share 100 is the whole pool with no sampler
(sampler ``full``): the same training set as ``benchmarks/models.py``.

Cold start: a sampler that reads a model gets the one a new device really has, another device's:
an ensemble of ``--members`` TenSet-MLPs trained on the source device's whole training pool
(``--source``, default cpu-sse42 -> cpu-avx2, cpu-avx2 -> cpu-sse42, cpu-sse42 -> cpu-avx2-1c),
one ensemble per seed. Uncertainty is the members' disagreement (ensemble, not the library's
single-model perturbation fallback); the embedding (R, D) is the first member's hidden state.
Every sampler except random gets the same ensemble.

Target-aware selection (``--protocol aware`` jobs, issue 12 point 5): the held-out networks'
tasks are the ones the device will run. Each held-out task's programs are split in two halves
(by program id, the same for every seed): candidates and evaluation programs. ``strict``: the
pool is the training tasks' programs only (the deployed networks are never measured);
``aware``: the pool also holds the deployed tasks' candidate halves. Both measure the same
number of programs (the share of the training pool: every measured program counts in the
budget) and both are scored on the evaluation halves only, which no model ever sees labelled.

The per-task / global decision is measured on the training side only (``--protocol selection``
jobs): a quarter of the target's training tasks (``split_tasks(.., 0.25, seed)``, as
``benchmarks/select_hyper.py``) is the evaluation set, weighted by the training networks that run
them; the pool is the other three quarters.

Results: one JSON line per (protocol, target, model, sampler, share, seed) appended to
``--results``; a rerun skips what is there, so an interrupted run resumes where it stopped.
Source models, loaded program sets and selections are cached under ``--cache`` (default
``<data>/.cache/bench-sampler``, ignored by git), so resumed runs and Mamba reuse the very same
selections as TenSet-MLP.

    OMP_NUM_THREADS=1 python benchmarks/sampler.py --data data --estimate       # one seed, one device
    OMP_NUM_THREADS=1 python benchmarks/sampler.py --data data                  # the full grid, resumable
    python benchmarks/sampler.py --summarize --plot docs/bench-sampler.png      # Markdown + plot

Needs features (``tcl featurize``) for the pipeline's tasks under ``--data``.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import sys
import time
import warnings
from dataclasses import dataclass, fields, replace
from pathlib import Path

import numpy as np
import polars as pl

from _common import pipeline_task_ids

SAMPLERS: dict[str, tuple[str, dict]] = {   # label -> (tcl.samplers name, keyword arguments)
    "rdu": ("rdu", {}),
    "rdu-global": ("rdu", {"per_task": False}),
    "random": ("random", {}),
    "random-global": ("random", {"per_task": False}),
    "random-least4": ("random", {"least": 4}),   # fewer tasks, 6 same-task pairs each
    "kcenter": ("kcenter", {}),
    "uncertainty": ("uncertainty", {}),
    "representative": ("representative", {}),
    "rdu-noR": ("rdu", {"r": 0}),
    "rdu-noD": ("rdu", {"d": 0}),
    "rdu-noU": ("rdu", {"u": 0}),
    "balto": ("balto", {}),
    # a task's predicted fastest first, then mostly diversity (speed a mild preference)
    "balto-seeded": ("balto", {"p": 0.25, "top": 1.0}),
    # the rounds mode of ``tcl collect --rounds``, offline: round 0 from the cold-start ensemble,
    # each later round's model trained on the picks so far (their labels revealed)
    "rdu-rounds3": ("rdu", {"rounds": 3}),
    "typiclust": ("typiclust", {}),
    # deploy-first (Pool.first_tasks = the deployed networks' tasks): aware protocol only
    "random-first": ("random", {"first": True}),
    "balto-first": ("balto", {"first": True}),
}
FULL = "full"                       # share 100: the whole pool, no sampler
SHARES = (2, 5, 10, 20, 50, 100)    # percent of the pool
SOURCES = {"cpu-avx2": "cpu-sse42", "cpu-sse42": "cpu-avx2", "cpu-avx2-1c": "cpu-sse42"}
SELECTION_SAMPLERS = ("rdu", "rdu-global", "random", "random-global")
AWARE_SAMPLERS = ("rdu", "random", "balto", "random-first", "balto-first")
SELECTION_SHARES = (5, 10, 20, 100)
KEY = ("protocol", "device", "model", "sampler", "share", "seed")


# -- data ----------------------------------------------------------------------------------------
@dataclass
class DeviceData:
    programs: object          # ProgramSet of every measured selected task, sorted by task
    train_ids: list[str]      # measured training tasks (no held-out network runs them)
    holdout_ids: list[str]    # measured tasks of the held-out networks


def write_device_data(data: DeviceData, f: Path) -> None:
    """The cache as arrays (np.savez; strings as unicode arrays), never a pickle: a cache file
    is read with allow_pickle=False, so a replaced one cannot run code."""
    ps = data.programs
    arrays = {k.name: np.asarray(getattr(ps, k.name)) for k in fields(ps)
              if getattr(ps, k.name) is not None}
    for k in ("program_ids", "task_ids"):
        if k in arrays:
            arrays[k] = arrays[k].astype(str)
    arrays["train_ids"] = np.array(data.train_ids, dtype=str)
    arrays["holdout_ids"] = np.array(data.holdout_ids, dtype=str)
    from tcl.config import atomic_write

    with atomic_write(f, "device data file") as tmp, open(tmp, "wb") as fh:
        np.savez(fh, **arrays)


def read_device_data(f: Path) -> DeviceData:
    from tcl.models.base import ProgramSet

    with np.load(f, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    ids = {k: arrays.pop(k).tolist() for k in ("train_ids", "holdout_ids")}
    names = {k.name for k in fields(ProgramSet)}
    return DeviceData(ProgramSet(**{k: v for k, v in arrays.items() if k in names}),
                      ids["train_ids"], ids["holdout_ids"])


def records_fingerprint(paths, device: str, params_file: str) -> str:
    """Changes when the device's record files or the params file change (cache key)."""
    h = hashlib.sha1(Path(params_file).read_bytes())
    root = paths.records_dir / f"device={device}"
    for f in sorted(root.rglob("*.parquet")):
        h.update(f"{f.relative_to(root)}:{f.stat().st_size}".encode())
    return h.hexdigest()[:12]


def subset_tasks(ps, task_ids):
    index = np.flatnonzero(np.isin(ps.task_ids.astype(str), list(task_ids)))
    return ps.subset(index) if len(index) else None


def relabeled(ps):
    """Groups 0..k-1 by task and labels computed within ``ps`` (what a device that measured
    exactly these programs knows: best latency of the task among them / latency)."""
    from tcl.metrics import labels

    _, group = np.unique(ps.task_ids.astype(str), return_inverse=True)
    return replace(ps, group=group.astype(np.int64),
                   labels=labels(ps.latency, group).astype(np.float32))


class Context:
    def __init__(self, args):
        from tcl.config import Paths

        self.args = args
        self.paths = Paths(args.data.resolve())
        self.cache = (args.cache or self.paths.root / ".cache" / "bench-sampler").resolve()
        (self.cache / "source").mkdir(parents=True, exist_ok=True)
        self.selected = None
        self.devices: dict[str, DeviceData] = {}
        self.ensembles: dict[tuple[str, int], list] = {}
        self.nets = pl.read_parquet(self.paths.networks_file)
        self.tasks = pl.read_parquet(self.paths.tasks_file)
        w = self.nets.group_by("task_id").agg(pl.col("weight").sum())
        self.weights = dict(zip(w["task_id"].to_list(), w["weight"].cast(pl.Float64).to_list()))
        self.hyper = load_hyper(args.params)
        self.selections_file = self.cache / "selections.jsonl"
        self.selections = {}
        if self.selections_file.exists():
            for line in self.selections_file.read_text().splitlines():
                if line.strip():
                    row = json.loads(line)
                    self.selections[row["key"]] = row

    def device(self, name: str) -> DeviceData:
        if name in self.devices:
            return self.devices[name]
        fp = records_fingerprint(self.paths, name, self.args.params)
        f = self.cache / f"programs-v3-{name}-{fp}.npz"
        if f.exists():
            data = read_device_data(f)
        else:
            from tcl.dataset import holdout_task_ids, load_program_set, measured

            if self.selected is None:
                self.selected = pipeline_task_ids(self.paths.root, self.args.params)
            held = holdout_task_ids(self.paths)
            have = set(measured(self.paths, name)["task_id"].to_list()) & self.selected
            data = DeviceData(load_program_set(self.paths, name, sorted(have)),
                              sorted(have - held), sorted(have & held))
            write_device_data(data, f)
        self.devices[name] = data
        return data

    def ensemble(self, source: str, seed: int) -> list:
        """``members`` TenSet-MLPs trained on the source device's whole training pool."""
        from tcl.config import write_text
        from tcl.models import load_model, make_model
        from tcl.train import split_tasks

        if (source, seed) in self.ensembles:
            return self.ensembles[(source, seed)]
        models = []
        for i in range(self.args.members):
            f = self.cache / "source" / f"{source}-seed{seed}-m{i}.model"
            if f.exists():
                models.append(load_model(f))
                continue
            src = self.device(source)
            member_seed = 1000 + 10 * seed + i
            fit_ids, valid_ids = split_tasks(src.train_ids, 0.1, member_seed)
            model = make_model("tenset-mlp", **{**self.hyper["tenset-mlp"], "seed": member_seed})
            start = time.perf_counter()
            model.fit(relabeled(subset_tasks(src.programs, fit_ids)),
                      relabeled(subset_tasks(src.programs, valid_ids)) if valid_ids else None)
            model.save(f)
            secs = time.perf_counter() - start
            write_text(f.with_suffix(".json"), json.dumps({"train_s": round(secs, 2)}) + "\n",
                       "training facts file")
            log(f"source model {source} seed {seed} member {i}: {secs:.1f} s")
            models.append(model)
        self.ensembles[(source, seed)] = models
        return models

    def full_batches(self, protocol: str, device: str, seed: int, kind: str) -> int:
        """Training batches per epoch of the whole pool (share 100) under this split."""
        from tcl.train import split_tasks

        pool_ids, _, _ = self.split(protocol, device, seed)
        fit_ids = split_tasks(sorted(pool_ids), 0.1, seed)[0] \
            if self.args.early_stop == "picked" else pool_ids
        fit = relabeled(subset_tasks(self.device(device).programs, fit_ids))
        return batches_per_epoch(fit, self.hyper[kind].get("batch_size", 512))

    def split(self, protocol: str, device: str, seed: int):
        """(pool task ids, evaluation task ids, networks frame for evaluate)."""
        from tcl.train import split_tasks

        d = self.device(device)
        if protocol in ("heldout", "strict", "aware"):
            return d.train_ids, d.holdout_ids, self.nets
        rest, select = split_tasks(d.train_ids, 0.25, seed)
        nets = self.nets.filter(~pl.col("holdout") & pl.col("task_id").is_in(select))
        return rest, select, nets.with_columns(pl.lit(True).alias("holdout"))

    def select(self, protocol: str, device: str, label: str, share: int, seed: int,
               pool_ps, budget: int | None = None) -> tuple[np.ndarray, float]:
        """Pool indices the sampler picks (cached by key), and the seconds selection took."""
        from tcl.samplers import Pool, make_sampler

        source = self.args.source.get(device, SOURCES.get(device))
        key = f"{protocol}|{device}|{source}|{label}|{share}|{seed}|{self.args.members}"
        if len(pool_ps) != len(self.device(device).programs.subset(
                np.flatnonzero(np.isin(self.device(device).programs.task_ids.astype(str),
                                       self.device(device).train_ids)))):
            key += f"|pool{len(pool_ps)}"   # the aware pool (training + deployed candidates)
        ids = pool_ps.program_ids.astype(str)
        if key in self.selections:
            row = self.selections[key]
            return np.flatnonzero(np.isin(ids, row["ids"])), row["select_s"]
        name, kwargs = SAMPLERS[label]
        kwargs = dict(kwargs)
        first = self.device(device).holdout_ids if kwargs.pop("first", False) else None
        model = None if name == "random" else self.ensemble(source, seed)
        view = replace(pool_ps, labels=None, latency=None)   # features only
        pool = Pool(view, task_weights={t: self.weights[t] for t in np.unique(view.task_ids)},
                    first_tasks=first)
        notes = []
        rounds = kwargs.pop("rounds", 1)
        sampler = make_sampler(name, **kwargs, on_note=notes.append)
        start = time.perf_counter()
        k = share / 100 if budget is None else budget
        chosen = sampler.select(pool, k, model=model, seed=seed) if rounds == 1 else \
            select_rounds(sampler, pool, pool_ps, k, model, rounds, seed)
        secs = time.perf_counter() - start
        row = {"key": key, "ids": chosen, "select_s": round(secs, 3), "notes": notes}
        with open(self.selections_file, "a") as fh:
            fh.write(json.dumps(row) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        self.selections[key] = row
        return np.flatnonzero(np.isin(ids, chosen)), row["select_s"]


def select_rounds(sampler, pool, pool_ps, budget, model, rounds: int, seed: int) -> list[str]:
    """``tcl collect --rounds`` offline (``tcl.measure.active``: the same per-round split, round
    model and seeds): round r's model is trained on the labels of rounds 0..r-1's picks."""
    from tcl.measure.active import Selection
    from tcl.models import make_model
    from tcl.samplers import parse_budget

    how = Selection(rounds=rounds, seed=seed)
    k = parse_budget(budget, len(pool))
    per_round = [k // rounds + (r < k % rounds) for r in range(rounds)]
    ids = pool_ps.program_ids.astype(str)
    chosen: list[str] = []
    for r, n in enumerate(per_round):
        if r > 0:
            picked = relabeled(pool_ps.subset(np.flatnonzero(np.isin(ids, chosen))))
            model = make_model(how.round_model, **how.round_hyper, seed=seed + r).fit(picked)
        chosen += sampler.select(pool, n, model=model, already=chosen, seed=seed + r)
    return chosen


def load_hyper(params_file: str) -> dict:
    import yaml

    return yaml.safe_load(Path(params_file).read_text())["train"]["hyper"]


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# -- one cell ------------------------------------------------------------------------------------
def batches_per_epoch(ps, batch_size: int) -> int:
    from tcl.models.nn import group_batches

    return len(group_batches(ps.group, batch_size))


def steps_matched(hyper: dict, train, full_batches: int) -> dict:
    """``epochs`` and ``patience`` scaled so that a subset trains for as many gradient steps
    as the whole pool does under ``hyper`` (a tenth of the pool fits in one batch: 100 epochs
    would be 100 steps instead of the full pool's 500)."""
    factor = full_batches / batches_per_epoch(train, hyper.get("batch_size", 512))
    out = dict(hyper, epochs=math.ceil(hyper["epochs"] * factor))
    if "patience" in hyper:
        out["patience"] = math.ceil(hyper["patience"] * factor)
    return out


def deploy_halves(ps):
    """(candidates, evaluation programs) of the deployed (held-out) tasks: each program goes
    to one half by its id's hash, so the halves are the same for every seed and sampler."""
    halves = np.array([int(hashlib.sha1(str(p).encode()).hexdigest(), 16) % 2
                       for p in ps.program_ids])
    return ps.subset(np.flatnonzero(halves == 0)), ps.subset(np.flatnonzero(halves == 1))


def concat_sets(a, b):
    """Programs of ``a`` then ``b`` (groups renumbered by task)."""
    from tcl.models.base import ProgramSet

    cat = lambda x, y: None if x is None else np.concatenate([x, y])  # noqa: E731
    ps = ProgramSet(cat(a.program_ids, b.program_ids), cat(a.group, b.group + a.group.max() + 1),
                    cat(a.per_store, b.per_store),
                    np.concatenate([a.store_offsets, b.store_offsets[1:] + a.store_offsets[-1]]),
                    cat(a.tokens, b.tokens),
                    np.concatenate([a.token_offsets, b.token_offsets[1:] + a.token_offsets[-1]]),
                    cat(a.labels, b.labels), cat(a.task_ids, b.task_ids),
                    cat(a.latency, b.latency))
    return relabeled(ps)


def run_cell(ctx: Context, job: dict) -> dict:
    from tcl.evaluate import evaluate
    from tcl.models import make_model
    from tcl.train import split_tasks

    protocol, device, kind, label = job["protocol"], job["device"], job["model"], job["sampler"]
    share, seed = job["share"], job["seed"]
    t0 = time.perf_counter()
    d = ctx.device(device)
    pool_ids, eval_ids, nets = ctx.split(protocol, device, seed)
    pool_ps = subset_tasks(d.programs, pool_ids)
    budget, test = None, subset_tasks(d.programs, eval_ids)
    if protocol in ("strict", "aware"):
        candidates, test = deploy_halves(test)
        budget = round(share / 100 * len(pool_ps))   # the same count in both protocols
        if protocol == "aware":
            pool_ps = concat_sets(pool_ps, candidates)
    if label == FULL:
        picked, select_s = np.arange(len(pool_ps)), 0.0
    else:
        picked, select_s = ctx.select(protocol, device, label, share, seed, pool_ps, budget)
    sub = relabeled(pool_ps.subset(np.sort(picked)))
    tasks = sorted(set(sub.task_ids.astype(str)))
    fit_ids, valid_ids = split_tasks(tasks, 0.1, seed) if ctx.args.early_stop == "picked" \
        else (tasks, [])
    train = subset_tasks(sub, fit_ids)
    valid = subset_tasks(sub, valid_ids) if valid_ids else None
    hyper = {**ctx.hyper[kind], "seed": seed}
    if ctx.args.epochs_rule == "steps":
        hyper = steps_matched(hyper, train, ctx.full_batches(protocol, device, seed, kind))
    model = make_model(kind, **hyper)
    epochs = []
    start = time.perf_counter()
    model.fit(train, valid, on_epoch=epochs.append)
    train_s = time.perf_counter() - start
    frame = evaluate({kind: model}, test, None, nets, ctx.tasks)
    mean = frame.filter(pl.col("scope") == "mean").row(0, named=True)
    digest = hashlib.sha1("\n".join(sorted(sub.program_ids.astype(str))).encode()).hexdigest()
    return {**job, "source": ctx.args.source.get(device, SOURCES.get(device))
            if label not in (FULL, "random", "random-global") else None,
            "top1": mean["top1"], "top5": mean["top5"], "pairwise": mean["pairwise"],
            "n_pool": len(pool_ps), "n_pool_tasks": len(pool_ids), "n_picked": len(sub),
            "n_picked_deploy": int(np.isin(sub.task_ids.astype(str), eval_ids).sum()),
            "n_picked_tasks": len(tasks), "n_train": len(train),
            "n_valid": 0 if valid is None else len(valid), "n_valid_tasks": len(valid_ids),
            "n_test": len(test), "epochs": hyper["epochs"], "patience": hyper.get("patience"),
            "epochs_rule": ctx.args.epochs_rule, "early_stop": ctx.args.early_stop, "epochs_run": len(epochs), "select_s": select_s,
            "train_s": round(train_s, 2), "cell_s": round(time.perf_counter() - t0, 2),
            "picked_sha1": digest[:12], "time": time.strftime("%Y-%m-%dT%H:%M:%S%z")}


# -- plan ----------------------------------------------------------------------------------------
def jobs_for(protocol, devices, model, samplers, shares, seeds) -> list[dict]:
    out = []
    for seed in seeds:
        for device in devices:
            if 100 in shares:
                out.append(dict(protocol=protocol, device=device, model=model, sampler=FULL,
                                share=100, seed=seed))
            for label in samplers:
                for share in shares:
                    if share != 100:
                        out.append(dict(protocol=protocol, device=device, model=model,
                                        sampler=label, share=share, seed=seed))
    return out


def plan(args) -> list[tuple[str, list[dict]]]:
    """Phases in the order that gives useful partial results first."""
    shares = [s for s in args.shares if s in SHARES]
    first = [s for s in shares if s in (10, 100)]
    rest = [s for s in shares if s not in (10, 100)]
    phases = []
    deploy_only = [s for s in SAMPLERS if "first" in SAMPLERS[s][1]]   # need deployed tasks
    held = [s for s in args.samplers if s not in deploy_only]
    for model in args.models:
        phases.append((f"{model} 10% and 100%",
                       jobs_for("heldout", args.targets, model, held, first, args.seeds)))
        if model == args.models[0] and args.selection:
            # the whole list: the per-task / global pairs; a list given: those samplers (the
            # training side chooses among them without the held-out networks)
            sel = [s for s in SELECTION_SAMPLERS if s in args.samplers] \
                if len(args.samplers) == len(SAMPLERS) else held
            phases.append((f"{model} per-task vs global on the training side",
                           jobs_for("selection", args.targets, model, sel,
                                    [x for x in SELECTION_SHARES if x in args.shares],
                                    args.seeds)))
        if model == args.models[0] and args.aware:
            aware = [j for protocol in ("strict", "aware")
                     for j in jobs_for(protocol, args.targets, model,
                                       [x for x in AWARE_SAMPLERS if x in args.samplers
                                        and (protocol == "aware" or x not in deploy_only)],
                                       [x for x in (5, 10, 20, 100) if x in args.shares],
                                       args.seeds)]
            phases.append((f"{model} target-aware vs strict hold-out", aware))
        if rest:
            phases.append((f"{model} other shares",
                           jobs_for("heldout", args.targets, model, held, rest,
                                    args.seeds)))
    return phases


def key_of(row: dict) -> tuple:
    return tuple(row[k] for k in KEY)


def read_results(path: Path) -> list[dict]:
    if not path.exists():
        return []
    rows = []
    for line in path.read_text().splitlines():
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:   # a line cut by a kill mid-write: that cell reruns
                continue
    return rows


def append_result(path: Path, row: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as fh:
        fh.write(json.dumps(row) + "\n")
        fh.flush()
        os.fsync(fh.fileno())


def run(args, phases) -> None:
    ctx = Context(args)
    done = {key_of(r) for r in read_results(args.results)
            if r.get("epochs_rule", "fixed") == args.epochs_rule
            and r.get("early_stop", "picked") == args.early_stop}
    phases = [(n, j) for n, j in phases if args.phase is None or args.phase in n]
    if args.protocols:
        phases = [(n, [j for j in jobs if j["protocol"] in args.protocols]) for n, jobs in phases]
    total = sum(len(j) for _, j in phases)
    todo = sum(1 for _, jobs in phases for j in jobs if key_of(j) not in done)
    log(f"{total} cells planned, {total - todo} already in {args.results}, {todo} to run")
    for name, jobs in phases:
        left = [j for j in jobs if key_of(j) not in done]
        log(f"phase {name}: {len(left)} of {len(jobs)} cells to run")
        for job in left:
            row = run_cell(ctx, job)
            append_result(args.results, row)
            done.add(key_of(row))
            log(f"{job['protocol']} {job['device']} {job['model']} {job['sampler']} "
                f"{job['share']}% seed {job['seed']}: top1 {row['top1']:.3f} pairwise "
                f"{row['pairwise']:.3f} ({row['n_picked']} programs, {row['epochs_run']} "
                f"epochs, select {row['select_s']:.1f} s, train {row['train_s']:.1f} s)")


def estimate(args) -> None:
    """One seed on one device: every sampler's selection at every share, and one training per
    (model, share) (rdu); then the whole plan's time from those per-cell times."""
    ctx = Context(args)
    device, seed = args.targets[0], args.seeds[0]
    src = args.source.get(device, SOURCES.get(device))
    ctx.ensemble(src, seed)
    ensemble_s = sum(json.loads((ctx.cache / "source" / f"{src}-seed{seed}-m{i}.json")
                                .read_text())["train_s"] for i in range(args.members))
    done = {key_of(r): r for r in read_results(args.results)}
    train_s, select_s = {}, {}
    pool_ids, _, _ = ctx.split("heldout", device, seed)
    pool_ps = subset_tasks(ctx.device(device).programs, pool_ids)
    for label in args.samplers:
        for share in args.shares:
            if share != 100:
                select_s[(label, share)] = ctx.select("heldout", device, label, share, seed,
                                                      pool_ps)[1]
    for model in args.models:
        for share in args.shares:
            job = dict(protocol="heldout", device=device, model=model,
                       sampler=FULL if share == 100 else "rdu", share=share, seed=seed)
            row = done.get(key_of(job))
            if row is None:
                row = run_cell(ctx, job)
                append_result(args.results, row)
            train_s[(model, share)] = row["cell_s"] - row["select_s"]
            log(f"{model} {share}%: {train_s[(model, share)]:.1f} s per cell "
                f"(top1 {row['top1']:.3f})")
    print(f"\nPer-cell time on {device}, seed {seed} (one core), selection s by sampler x "
          f"share; training+evaluation s by model x share; source ensemble "
          f"({args.members} TenSet-MLPs on {src}): {ensemble_s:.0f} s per (device, seed)\n")
    print("| sampler | " + " | ".join(f"{s}%" for s in args.shares if s != 100) + " |")
    print("|---|" + "---|" * len([s for s in args.shares if s != 100]))
    for label in args.samplers:
        print(f"| {label} | " + " | ".join(f"{select_s[(label, s)]:.2f}"
                                           for s in args.shares if s != 100) + " |")
    print("\n| model | " + " | ".join(f"{s}%" for s in args.shares) + " |")
    print("|---|" + "---|" * len(args.shares))
    for model in args.models:
        print(f"| {model} | " + " | ".join(f"{train_s[(model, s)]:.1f}" for s in args.shares)
              + " |")
    print("\nProjected time of the full plan (all targets and seeds):\n")
    grand = 0.0
    for name, jobs in plan(args):
        secs = sum(train_s.get((j["model"], j["share"]), 0.0)
                   + select_s.get((j["sampler"], j["share"]), 0.0) for j in jobs)
        if "per-task" in name:
            secs *= 0.75   # the pool is three quarters of the training tasks
        grand += secs
        print(f"- {name}: {len(jobs)} cells, {secs / 3600:.1f} h")
    grand += ensemble_s * len(args.targets) * len(args.seeds)
    print(f"- source ensembles: {len(args.targets) * len(args.seeds)} x {ensemble_s:.0f} s")
    print(f"\nTotal: about {grand / 3600:.1f} h on one core")


# -- summary -------------------------------------------------------------------------------------
def se(values) -> float:
    v = [x for x in values if x is not None and math.isfinite(x)]
    return float(np.std(v, ddof=1) / math.sqrt(len(v))) if len(v) > 1 else float("nan")


def cell(values, digits: int = 3) -> str:
    v = [x for x in values if x is not None and math.isfinite(x)]
    if not v:
        return "-"
    if len(v) == 1:
        return f"{np.mean(v):.{digits}f} (n=1)"
    tail = "" if len(v) == 5 else f" (n={len(v)})"
    return f"{np.mean(v):.{digits}f} ± {se(v):.{digits}f}{tail}"


def order_samplers(labels) -> list[str]:
    known = [s for s in SAMPLERS if s in labels]
    return known + sorted(set(labels) - set(known) - {FULL})


def paired_table(frame: pl.DataFrame, share: int = 10) -> list[str]:
    """Every sampler minus random at ``share``, paired by seed (top-1 and pairwise), per
    protocol, device and model; with the full pool's top-1 and the sampler's share of it."""
    out = [f"#### Every sampler against random at {share}%, paired by seed (mean ± standard "
           "error of the per-seed difference; `/ full`: top-1 over the full pool's, same seed)",
           "", "| protocol | device | model | sampler | seeds | top1 | top1 - random | "
           "pairwise - random | top1 / full |", "|---|---|---|---|---|---|---|---|---|"]
    for (protocol, device, model), part in frame.group_by("protocol", "device", "model",
                                                          maintain_order=True):
        ten = part.filter(pl.col("share") == share)
        full = dict(part.filter(pl.col("sampler") == FULL).select("seed", "top1").iter_rows())
        rnd = {m: dict(ten.filter(pl.col("sampler") == "random").select("seed", m).iter_rows())
               for m in ("top1", "pairwise")}
        for label in order_samplers(ten["sampler"].unique().to_list()):
            r = ten.filter(pl.col("sampler") == label)
            seeds = [x for x in r["seed"].to_list() if x in rnd["top1"]]
            val = dict(r.select("seed", "top1").iter_rows())
            pw = dict(r.select("seed", "pairwise").iter_rows())
            out.append(f"| {protocol} | {device} | {model} | {label} | {len(seeds)} | "
                       f"{cell(list(val.values()))} | "
                       f"{cell([val[x] - rnd['top1'][x] for x in seeds])} | "
                       f"{cell([pw[x] - rnd['pairwise'][x] for x in seeds])} | "
                       f"{cell([val[x] / full[x] for x in val if x in full])} |")
    return out + [""]


def pool_stats(ctx: Context, devices) -> str:
    lines = ["| device | pool tasks | pool programs | programs per task: min / median / mean / "
             "max | error programs | tasks with any pick at 10% (per-task) | same-task pairs: "
             "pool / 10% per-task |", "|---|---|---|---|---|---|---|"]
    from tcl.samplers.tasks import allocate

    for device in devices:
        d = ctx.device(device)
        ps = subset_tasks(d.programs, d.train_ids)
        _, counts = np.unique(ps.task_ids.astype(str), return_counts=True)
        errors = int((~np.isfinite(ps.latency) | (ps.latency <= 0)).sum())
        names = np.unique(ps.task_ids.astype(str))
        w = np.array([ctx.weights[t] for t in names])
        quota = allocate(round(0.1 * len(ps)), counts, w, np.zeros(len(counts), np.int64), 0)
        lines.append(f"| {device} | {len(counts)} | {len(ps)} | {counts.min()} / "
                     f"{int(np.median(counts))} / {counts.mean():.1f} / {counts.max()} | "
                     f"{errors} | {(quota > 0).sum()} of {len(counts)} | "
                     f"{int((counts * (counts - 1) // 2).sum())} / "
                     f"{int((quota * (quota - 1) // 2).sum())} |")
    return "\n".join(lines)


def pick_stats(ctx: Context, devices, share: int = 10) -> str:
    """What the cached held-out-protocol selections at ``share`` hold, judged by the pool's own
    latencies (the training side): error programs, the label spread among a task's picks (labels
    against the task's best in the whole pool), and how often a covered task's best is picked."""
    lines = [f"| device | sampler | seeds | error share | label spread within a task | "
             f"covered tasks whose best program is picked | mean label of picks |",
             "|---|---|---|---|---|---|---|"]
    for device in devices:
        d = ctx.device(device)
        pool = relabeled(subset_tasks(d.programs, d.train_ids))
        ids = pool.program_ids.astype(str)
        for label in SAMPLERS:
            stats = []
            for key, row in ctx.selections.items():
                p = key.split("|")
                if p[0] != "heldout" or p[1] != device or p[3] != label or p[4] != str(share):
                    continue
                i = np.flatnonzero(np.isin(ids, row["ids"]))
                g = pl.DataFrame({"t": pool.task_ids[i].astype(str), "y": pool.labels[i]}) \
                    .group_by("t").agg(pl.len().alias("n"), pl.col("y").max().alias("best"),
                                       (pl.col("y").max() - pl.col("y").min()).alias("spread"))
                multi = g.filter(pl.col("n") > 1)
                stats.append((float((pool.labels[i] == 0).mean()), multi["spread"].mean(),
                              float((g["best"] > 0.999).mean()), float(pool.labels[i].mean())))
            if stats:
                m = np.array(stats, float).mean(0)
                lines.append(f"| {device} | {label} | {len(stats)} | {m[0]:.3f} | {m[1]:.3f} | "
                             f"{m[2]:.3f} | {m[3]:.3f} |")
    return "\n".join(lines)


def summarize(args) -> str:
    rows = read_results(args.results)
    if not rows:
        return f"no results in {args.results}"
    rows = [r for r in rows if r.get("epochs_rule", "fixed") == args.epochs_rule
            and r.get("early_stop", "picked") == args.early_stop]
    frame = pl.DataFrame(rows, infer_schema_length=None)
    out = [f"Results: {args.results} ({len(frame)} cells). Mean ± standard error over seeds "
           "(n=5 unless marked). `full`: the whole pool (share 100, no sampler).", ""]
    held = frame.filter(pl.col("protocol") == "heldout")
    for metric in ("top1", "pairwise", "top5"):
        for (device, model), part in held.group_by("device", "model", maintain_order=True):
            shares = sorted(s for s in part["share"].unique().to_list() if s != 100)
            out += [f"#### {metric}: target {device}, model {model} (held-out networks)", "",
                    "| sampler | " + " | ".join(f"{s}%" for s in shares) + " | 100% |",
                    "|---|" + "---|" * (len(shares) + 1)]
            full = part.filter(pl.col("sampler") == FULL)[metric].to_list()
            for label in order_samplers(part["sampler"].unique().to_list()):
                r = part.filter(pl.col("sampler") == label)
                out.append(f"| {label} | " + " | ".join(
                    cell(r.filter(pl.col("share") == s)[metric].to_list()) for s in shares)
                    + " | |")
            out += ["| full pool | " + " | " * len(shares) + f"{cell(full)} |", ""]
    aware = frame.filter(pl.col("protocol").is_in(["strict", "aware"]))
    if not aware.is_empty():
        out += ["#### Target-aware selection vs strict hold-out (top-1 / pairwise on the "
                "deployed networks' evaluation halves)", "",
                "Both protocols measure the same number of programs: the share of the training "
                "pool; `aware` may spend it on the deployed networks' candidate halves too "
                "(`deploy picks`: how many it did).", ""]
        for (device, model), part in aware.group_by("device", "model", maintain_order=True):
            shares = sorted(x for x in part["share"].unique().to_list() if x != 100)
            out += [f"##### target {device}, model {model}", "",
                    "| protocol | sampler | " + " | ".join(f"{x}% top1" for x in shares)
                    + " | 10% pairwise | deploy picks at 10% | all measured (100%) top1 |",
                    "|---|---|" + "---|" * (len(shares) + 3)]
            for protocol in ("strict", "aware"):
                pp = part.filter(pl.col("protocol") == protocol)
                full = pp.filter(pl.col("sampler") == FULL)["top1"].to_list()
                for label in AWARE_SAMPLERS:
                    r = pp.filter(pl.col("sampler") == label)
                    if r.is_empty():
                        continue
                    ten = r.filter(pl.col("share") == 10)
                    out.append(f"| {protocol} | {label} | " + " | ".join(
                        cell(r.filter(pl.col("share") == x)["top1"].to_list()) for x in shares)
                        + f" | {cell(ten['pairwise'].to_list())} | "
                        f"{cell([float(v) for v in ten['n_picked_deploy'].to_list()], 0)} | "
                        f"{cell(full)} |")
            out.append("")
    # targets: RDU at 10% against the full pool and against random, paired by seed
    out += ["#### Targets at 10% (paired by seed; top-1)", "",
            "| device | model | seeds | full top1 | rdu top1 | rdu / full | random top1 | "
            "rdu - random | rdu - full |", "|---|---|---|---|---|---|---|---|---|"]
    for (device, model), part in held.group_by("device", "model", maintain_order=True):
        wide = part.filter(((pl.col("share") == 10) & pl.col("sampler").is_in(["rdu", "random"]))
                           | (pl.col("sampler") == FULL)).pivot(
            on="sampler", index="seed", values="top1")
        if not {"rdu", "random", FULL} <= set(wide.columns):
            continue
        wide = wide.drop_nulls()
        if wide.is_empty():
            continue
        rdu, rnd, full = (wide[c].to_numpy() for c in ("rdu", "random", FULL))
        out.append(f"| {device} | {model} | {len(wide)} | {cell(full)} | {cell(rdu)} | "
                   f"{cell(rdu / full)} | {cell(rnd)} | {cell(rdu - rnd)} | {cell(rdu - full)} |")
    out.append("")
    out += paired_table(frame)
    sel = frame.filter(pl.col("protocol") == "selection")
    if not sel.is_empty():
        out += ["#### Per-task allocation vs global greedy, training side only (a quarter of the "
                "training tasks evaluated, the rest the pool; paired by seed)", "",
                "| device | model | share | rdu top1 | rdu-global top1 | per-task - global top1 "
                "| per-task - global pairwise | random top1 | random-global top1 | full top1 |",
                "|---|---|---|---|---|---|---|---|---|---|"]
        pooled = {"top1": [], "pairwise": []}
        for (device, model), part in sel.group_by("device", "model", maintain_order=True):
            full = part.filter(pl.col("sampler") == FULL)
            for share in sorted(s for s in part["share"].unique().to_list() if s != 100):
                p = part.filter(pl.col("share") == share)
                get = lambda label, m: p.filter(pl.col("sampler") == label)  # noqa: E731
                diffs = {}
                for m in ("top1", "pairwise"):
                    w = p.filter(pl.col("sampler").is_in(["rdu", "rdu-global"])).pivot(
                        on="sampler", index="seed", values=m)
                    diffs[m] = (w.drop_nulls()["rdu"] - w.drop_nulls()["rdu-global"]).to_list() \
                        if {"rdu", "rdu-global"} <= set(w.columns) else []
                    pooled[m] += diffs[m]
                out.append(f"| {device} | {model} | {share}% | {cell(get('rdu', 0)['top1'])} | "
                           f"{cell(get('rdu-global', 0)['top1'])} | {cell(diffs['top1'])} | "
                           f"{cell(diffs['pairwise'])} | {cell(get('random', 0)['top1'])} | "
                           f"{cell(get('random-global', 0)['top1'])} | "
                           f"{cell(full['top1'].to_list())} |")
        out += [f"| all | | all | | | {cell(pooled['top1'])} | {cell(pooled['pairwise'])} "
                "| | | |", ""]
    # time per cell
    out += ["#### Time per cell (one core; mean seconds)", "",
            "| model | share | cells | selection s | training s | epochs run | cell s |",
            "|---|---|---|---|---|---|---|"]
    t = frame.group_by("model", "share").agg(
        pl.len().alias("n"), pl.col("select_s").mean(), pl.col("train_s").mean(),
        pl.col("epochs_run").mean(), pl.col("cell_s").mean()).sort("model", "share")
    for r in t.iter_rows(named=True):
        out.append(f"| {r['model']} | {r['share']}% | {r['n']} | {r['select_s']:.2f} | "
                   f"{r['train_s']:.1f} | {r['epochs_run']:.0f} | {r['cell_s']:.1f} |")
    out.append("")
    if args.data is not None:
        ctx = Context(args)
        out += ["#### The pools (training tasks of the pipeline's selection)", "",
                pool_stats(ctx, sorted(frame["device"].unique().to_list())), "",
                "#### What the samplers pick at 10% (held-out protocol's pool; judged by the "
                "pool's own latencies, the training side)", "",
                pick_stats(ctx, sorted(held["device"].unique().to_list())), ""]
    if args.plot:
        plot(held, args.plot)
        out.append(f"Plot: {args.plot}")
    return "\n".join(out)


def plot(held: pl.DataFrame, path: Path) -> None:
    import matplotlib

    from tcl.config import save_figure

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = [k for k, _ in held.group_by("device", "model", maintain_order=True)]
    groups = sorted(groups, key=lambda k: (k[1] != "tenset-mlp", k[0]))
    fig, axes = plt.subplots(len(groups), 2, figsize=(11, 3.4 * len(groups)), squeeze=False)
    styles = {"rdu": ("k", "-", "o"), "rdu-global": ("k", "--", "s"),
              "random": ("tab:red", "-", "o"), "random-global": ("tab:red", "--", "s"),
              "kcenter": ("tab:blue", "-", "^"), "uncertainty": ("tab:green", "-", "v"),
              "representative": ("tab:purple", "-", "D"), "rdu-noR": ("tab:orange", ":", "x"),
              "rdu-noD": ("tab:brown", ":", "+"), "rdu-noU": ("tab:gray", ":", "*")}
    for row, (device, model) in enumerate(groups):
        part = held.filter((pl.col("device") == device) & (pl.col("model") == model))
        for col, metric in enumerate(("top1", "pairwise")):
            ax = axes[row][col]
            full = part.filter(pl.col("sampler") == FULL)[metric].to_numpy()
            for label in order_samplers(part["sampler"].unique().to_list()):
                r = part.filter(pl.col("sampler") == label).group_by("share").agg(
                    pl.col(metric).mean().alias("m"), pl.col(metric).std().alias("s"),
                    pl.len().alias("n")).sort("share")
                x = r["share"].to_numpy()
                if len(full):   # the full pool closes every curve at 100%
                    x = np.append(x, 100)
                m = np.append(r["m"].to_numpy(), full.mean()) if len(full) else r["m"].to_numpy()
                sd = r["s"].fill_null(0).to_numpy() / np.sqrt(r["n"].to_numpy())
                sd = np.append(sd, se(full) if len(full) > 1 else 0) if len(full) else sd
                c, ls, mk = styles.get(label, (None, "-", "."))
                ax.errorbar(x, m, yerr=sd, color=c, ls=ls, marker=mk, ms=4, lw=1, capsize=2,
                            label=label)
            if len(full):
                ax.axhline(full.mean(), color="0.6", lw=0.8, ls="--")
            ax.set_xscale("log")
            ax.set_xticks(list(SHARES), [f"{s}%" for s in SHARES])
            ax.set_xlabel("share of the pool measured")
            ax.set_ylabel(metric)
            ax.set_title(f"{device}, {model}: {metric} on held-out networks", fontsize=9)
    axes[0][0].legend(fontsize=7, ncol=2)
    fig.tight_layout()
    save_figure(fig, path, "plot", dpi=100)
    plt.close(fig)


# -- main ----------------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, help="a tcl data root with features")
    ap.add_argument("--params", default="params.yaml", help="task selection and train.hyper")
    ap.add_argument("--results", type=Path, default=Path("docs/bench-sampler.jsonl"))
    ap.add_argument("--cache", type=Path, help="default <data>/.cache/bench-sampler")
    ap.add_argument("--targets", default="cpu-avx2,cpu-sse42")
    ap.add_argument("--source", action="append", default=[], metavar="TARGET=SOURCE",
                    help=f"the cold-start model's device per target (default {SOURCES})")
    ap.add_argument("--models", default="tenset-mlp,mamba")
    ap.add_argument("--samplers", default=",".join(SAMPLERS))
    ap.add_argument("--shares", default=",".join(map(str, SHARES)), help="percent of the pool")
    ap.add_argument("--seeds", default="0,1,2,3,4")
    ap.add_argument("--members", type=int, default=3, help="cold-start ensemble size")
    ap.add_argument("--epochs-rule", choices=("steps", "fixed"), default="steps",
                    help="steps: a subset trains for the whole pool's number of gradient steps "
                    "(epochs and patience scaled); fixed: train.hyper's epochs as they are")
    ap.add_argument("--early-stop", choices=("picked", "none"), default="picked",
                    help="picked: 10%% of the picked programs' tasks stop training early; none: "
                    "train on every picked program for the epochs given")
    ap.add_argument("--phase", help="run only the plan's phases whose name contains this")
    ap.add_argument("--protocols", help="run only these protocols' cells (comma-separated: "
                    "heldout, selection, strict, aware)")
    ap.add_argument("--no-aware", dest="aware", action="store_false",
                    help="skip the target-aware vs strict hold-out jobs")
    ap.add_argument("--no-selection", dest="selection", action="store_false",
                    help="skip the training-side per-task vs global jobs")
    ap.add_argument("--estimate", action="store_true",
                    help="time one seed on the first target and project the full plan")
    ap.add_argument("--summarize", action="store_true", help="print the Markdown tables")
    ap.add_argument("--plot", type=Path, help="with --summarize: write the plot here")
    args = ap.parse_args(argv)
    args.targets = [t for t in args.targets.split(",") if t]
    args.models = [m for m in args.models.split(",") if m]
    args.samplers = [s for s in args.samplers.split(",") if s]
    unknown = [s for s in args.samplers if s not in SAMPLERS]
    if unknown:
        ap.error(f"unknown samplers {unknown}; known: {', '.join(SAMPLERS)}")
    args.shares = [int(s) for s in args.shares.split(",") if s]
    if any(s not in SHARES for s in args.shares):
        ap.error(f"shares must be among {SHARES}")
    args.seeds = [int(s) for s in args.seeds.split(",") if s]
    args.source = dict(s.split("=", 1) for s in args.source)
    args.protocols = [p for p in (args.protocols or "").split(",") if p]
    if args.summarize:
        print(summarize(args))
        return 0
    if args.data is None:
        ap.error("--data is required unless --summarize")
    import torch

    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    warnings.filterwarnings("ignore", category=UserWarning, module="torch")
    if args.estimate:
        estimate(args)
        return 0
    run(args, plan(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
