"""Active collection: sample a pool of candidates, featurize it, let a sampler pick the budget,
measure only the picks; optionally in rounds.

The pool is the candidates (``pool_per_task`` per task) not yet measured on the device; what is
measured already counts as ``already`` (diversity keeps away from it). Round 0's model (for
uncertainty and the embedding) is the one given, typically an earlier device's (cold start:
nothing is measured on the new device yet); each later round's model is trained on the device's
measurements so far. Every round's selection is written (``tcl.store.selections``) before it is
measured, so an interrupted run measures the same programs when started again and selects
nothing twice.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Callable

import polars as pl

from ..config import Paths, TclError
from ..continual import BACKBONES
from ..dataset import load_program_set, program_set
from ..features import featurize
from ..models import make_model
from ..models.base import ProgramSet
from ..samplers import Pool, make_sampler, parse_budget, sampler_options
from ..sampling import enough_candidates, ensure_candidates, load_candidates
from ..store.devices import Device
from ..store.locks import locked
from ..store.records import RecordStore
from ..store.selections import SelectionStore
from .collect import CollectStats, collect, measured_throughput


@dataclass(frozen=True)
class Selection:
    """What to select: the sampler, its keywords (e.g. r/d/u weights), the budget, the rounds."""

    sampler: str = "rdu"
    budget: int | float = 0.1
    rounds: int = 1
    options: dict[str, Any] = field(default_factory=dict)
    # trained on the rounds so far, for the next round: the first kind a cold start takes
    # (tcl.resolve.COLD_START), a continual backbone
    round_model: str = BACKBONES[0]
    round_hyper: dict[str, Any] = field(default_factory=lambda: {"epochs": 30})
    seed: int = 0
    first_tasks: tuple[str, ...] = ()     # deploy-first: these tasks' share comes first

    @classmethod
    def of(cls, sampler: str, budget: int | float, rounds: int, *, per_task: bool | None = None,
           weights: dict[str, float] | None = None, seed: int = 0,
           first_tasks: tuple[str, ...] = ()) -> "Selection":
        """The selection a user sets (params' ``select`` section, ``tcl collect --select``):
        ``per_task`` None keeps the sampler's default; the term weights go to RDU only (the
        other samplers have no such terms)."""
        options: dict[str, Any] = {} if per_task is None else {"per_task": per_task}
        if sampler == "rdu":
            options.update(weights or {})
        return cls(sampler, budget, rounds, options, seed=seed, first_tasks=first_tasks)

    def run_id(self, device: str, pool_per_task: int, task_ids: list[str]) -> str:
        """One id per (device, selection, pool): the same command resumes the same run."""
        parts = [device, self.sampler, self.budget, self.rounds, self.options,
                 self.round_model, self.seed, pool_per_task, sorted(task_ids)]
        if self.first_tasks:   # (only then: earlier runs keep their ids)
            parts.append(sorted(self.first_tasks))
        key = json.dumps(parts, sort_keys=True, default=str)
        return f"{self.sampler}-{self.budget}-r{self.rounds}-" \
               f"{hashlib.sha256(key.encode()).hexdigest()[:10]}"


@dataclass
class ActivePlan:
    device: Device
    run: str
    pool: int            # unmeasured candidates (sampled, or still to sample)
    measured: int        # already measured on the device (of these tasks' candidates)
    budget: int          # programs to select in all rounds
    per_round: list[int]
    selected: int        # already selected by earlier (interrupted) runs of the same run id
    records_per_sec: float
    to_sample: int = 0   # of the pool: candidates not sampled yet (the run samples them first)
    picked_unmeasured: int = 0   # of the pool: earlier runs' picks that hold no record yet

    @property
    def todo(self) -> int:
        """Programs the run still measures: what it has left to select, and earlier picks
        not measured yet (a finished run, or one stopped between selecting and measuring)."""
        return max(0, self.budget - self.selected) + self.picked_unmeasured

    @property
    def eta_secs(self) -> float:
        return self.todo / self.records_per_sec

    def describe(self) -> str:
        fresh = f", {self.to_sample} of them still to sample," if self.to_sample else ""
        return (f"device {self.device.name}: pool {self.pool} unmeasured candidates{fresh} "
                f"({self.measured} measured already); budget {self.budget} programs "
                f"({self.budget / max(self.pool, 1):.1%} of the pool) in {len(self.per_round)} "
                f"round(s) {self.per_round}; {self.selected} selected earlier (run "
                f"{self.run}); about {self.eta_secs / 60:.1f} min of measurement at "
                f"{self.records_per_sec:.1f} records/s")


@dataclass
class ActiveStats:
    rounds: list[dict] = field(default_factory=list)   # round, selected, measured, errors
    collect: CollectStats = field(default_factory=CollectStats)


def sample_pool(paths: Paths, tasks: pl.DataFrame, pool_per_task: int,
                 seed: int) -> pl.DataFrame:
    """program_id, task_id of the tasks' first ``pool_per_task`` candidates, sampling (and
    storing) the missing ones."""
    cands = [ensure_candidates(paths, row["task_id"], row["workload_json"], pool_per_task,
                               seed).select("program_id", "task_id")
             for row in tasks.iter_rows(named=True)]
    return pl.concat(cands) if cands else pl.DataFrame(schema={"program_id": pl.Utf8,
                                                               "task_id": pl.Utf8})


def _pool(paths: Paths, device: Device, tasks: pl.DataFrame, pool_per_task: int,
          seed: int) -> tuple[ProgramSet, set[str]]:
    """The candidates of ``tasks`` (sampled and featurized where missing) as a ProgramSet
    without labels, and the program ids measured on the device."""
    cands = sample_pool(paths, tasks, pool_per_task, seed)
    featurize(paths, task_ids=tasks["task_id"].to_list(), progress=False)
    done = set(RecordStore(paths).read(device.name, columns=["program_id"])["program_id"])
    return program_set(paths, cands, labels=False), done


def _stored_pool(paths: Paths, tasks: pl.DataFrame, pool_per_task: int
                 ) -> tuple[pl.DataFrame, int]:
    """program_id, task_id of the candidates stored for ``tasks`` (the first ``pool_per_task``
    of each), and how many more sampling would add (the design space may hold fewer: an upper
    bound). Reads only: a plan samples, featurizes and writes nothing."""
    cands, to_sample = [], 0
    for task_id in tasks["task_id"]:
        have = load_candidates(paths, task_id)
        if not enough_candidates(have, pool_per_task):
            to_sample += pool_per_task - len(have)
        cands.append(have.head(pool_per_task).select("program_id", "task_id"))
    frame = pl.concat(cands) if cands else pl.DataFrame(schema={"program_id": pl.Utf8,
                                                                "task_id": pl.Utf8})
    return frame, to_sample


def plan_active(paths: Paths, device: Device, tasks: pl.DataFrame, pool_per_task: int,
                selection: Selection) -> ActivePlan:
    """What an active collection would select and measure, from the stored candidates, records
    and selections alone (``tcl collect --select ... --dry-run``): candidates not sampled yet
    count as unmeasured pool, and nothing is sampled, featurized or written. The budget comes
    from the pool's size (``parse_budget``), so no sampler runs either."""
    frame, to_sample = _stored_pool(paths, tasks, pool_per_task)
    records = RecordStore(paths)
    done = set(records.read(device.name, columns=["program_id"])["program_id"])
    run = selection.run_id(device.name, pool_per_task, tasks["task_id"].to_list())
    store = SelectionStore(paths)
    earlier = [store.read(device.name, run, r) for r in range(selection.rounds)]
    earlier_ids = set().union(*[set(e["program_id"]) for e in earlier if e is not None])
    pool = frame.filter(~pl.col("program_id").is_in(list(done | earlier_ids)))
    unmeasured = len(pool) + to_sample + len(earlier_ids - done)
    if all(e is not None for e in earlier):  # a finished (or fully selected) run: as it was
        per_round = [len(e) for e in earlier]
        budget = sum(per_round)
    else:
        budget = min(parse_budget(selection.budget, unmeasured), unmeasured) if unmeasured else 0
        per_round = [budget // selection.rounds + (r < budget % selection.rounds)
                     for r in range(selection.rounds)]
    measured = int(frame["program_id"].is_in(list(done)).sum())
    return ActivePlan(device, run, unmeasured, measured, budget, per_round, len(earlier_ids),
                      measured_throughput(records, device.name), to_sample,
                      len(earlier_ids - done))


class ActiveRun:
    """One active collection, round by round: ``select(r)`` stores round ``r``'s picks (or
    reads them, when an earlier run stored them), ``measure(r, picks)`` measures them. The
    add-device flow runs the two as separate steps; ``select_and_measure`` runs them in turn.
    Constructing it samples the pool's missing candidates and plans the run (``plan_active``;
    ``records_per_sec`` replaces the plan's rate, e.g. for a device with no records yet).
    """

    def __init__(self, paths: Paths, device: Device, tasks: pl.DataFrame, pool_per_task: int,
                 selection: Selection, model=None, batch_size: int = 64,
                 progress: bool = True, say: Callable[[str], None] = print,
                 model_name: str = "", report: Callable[[str], None] | None = None,
                 records_per_sec: float | None = None):
        from dataclasses import replace

        self.paths, self.device, self.tasks, self.selection = paths, device, tasks, selection
        self.pool_per_task, self.batch_size, self.progress = pool_per_task, batch_size, progress
        self.say, self.report = say, report
        sample_pool(paths, tasks, pool_per_task, selection.seed)  # the plan counts stored ones
        self.plan = plan_active(paths, device, tasks, pool_per_task, selection)
        if records_per_sec:   # the caller knows better (e.g. a similar device's measured rate)
            self.plan = replace(self.plan, records_per_sec=records_per_sec)
        self.stats = ActiveStats()
        if self.plan.budget == 0:
            say(f"select {device.name}: nothing to select: every candidate of the {len(tasks)} "
                f"tasks is measured on {device.name}")
            return
        say(f"select {self.plan.describe()}")
        options = sampler_options(selection.sampler, selection.options, model)
        if options != selection.options:
            say("select: no model to take uncertainty from (an earlier device's, or --model); "
                "selecting by representativeness and diversity only")
        self.sampler = make_sampler(selection.sampler,
                                    on_note=lambda note: say(f"select: {note}"), **options)
        self.weights = dict(zip(tasks["task_id"], tasks["weight"])) \
            if "weight" in tasks.columns else None
        self.model = model
        self.model_name = model_name or ("none" if model is None else "given")

    @property
    def rounds(self) -> int:
        """Rounds to run (0: nothing to select)."""
        return len(self.plan.per_round) if self.plan.budget else 0

    def select(self, r: int) -> pl.DataFrame | None:
        """Round ``r``'s picks (stored before they are measured); None when nothing is left."""
        store, device, selection = SelectionStore(self.paths), self.device, self.selection
        chosen = store.read(device.name, self.plan.run, r)
        if chosen is not None:
            return chosen
        # Two runs of the same selection (two add-device runs of one device) must not both
        # select: the first one writes the round, the other reads it.
        with locked(self.paths, "select", device.name, self.plan.run,
                    what=f"selection run {self.plan.run} of {device.name}"):
            chosen = store.read(device.name, self.plan.run, r)
            if chosen is None:
                if r > 0 and selection.rounds > 1:
                    self.model, self.model_name = \
                        _round_model(self.paths, device, self.tasks, selection, r), \
                        f"{selection.round_model}@round{r}"
                chosen = _select_round(self.paths, device, self.tasks, self.pool_per_task,
                                       selection, self.plan.run, r, self.plan.per_round[r],
                                       self.sampler, self.weights, self.model, self.model_name)
        return chosen

    def measure(self, r: int, chosen: pl.DataFrame, builder=None) -> CollectStats:
        """Measure round ``r``'s picks (resumable: what is stored is skipped)."""
        device = self.device
        ids = set(chosen["program_id"])
        part = self.tasks.join(chosen.select("task_id").unique(), on="task_id", how="semi")
        got = collect(self.paths, device, part, self.pool_per_task, seed=self.selection.seed,
                      batch_size=self.batch_size, progress=self.progress, program_ids=ids,
                      builder=builder, report=self.report,
                      what=f"measure {device.name} round {r} (selection)",
                      planned_rate=self.plan.records_per_sec)
        self.stats.rounds.append({"round": r, "selected": len(ids), "measured": got.measured,
                                  "errors": got.errors})
        _add(self.stats.collect, got)
        self.say(f"select {device.name} round {r}: {len(ids)} selected, {got.measured} "
                 f"measured now ({got.errors} errors), {got.skipped} measured before")
        return got


def select_and_measure(paths: Paths, device: Device, tasks: pl.DataFrame, pool_per_task: int,
                       selection: Selection, model=None, batch_size: int = 64,
                       progress: bool = True, say: Callable[[str], None] = print,
                       model_name: str = "") -> ActiveStats:
    """Select ``selection.budget`` of the pool in ``selection.rounds`` rounds and measure the
    picks on ``device``; resumable (see the module docstring). ``model``: a cost model (or an
    ensemble) for round 0's uncertainty and embedding; None where the sampler needs none."""
    run = ActiveRun(paths, device, tasks, pool_per_task, selection, model, batch_size,
                    progress, say, model_name)
    for r in range(run.rounds):
        chosen = run.select(r)
        if chosen is None:
            break
        run.measure(r, chosen)
    return run.stats


def measure_selected(paths: Paths, device: Device, tasks: pl.DataFrame, batch_size: int = 64,
                     progress: bool = True, report: Callable[[str], None] | None = None
                     ) -> CollectStats:
    """Measure what was ever selected for ``device`` (``tcl.store.selections``) of ``tasks``
    and holds no record now: a selection that ``tcl retire`` took out (measured under load),
    so that the device's model can be made again from it; resumable."""
    chosen = SelectionStore(paths).of_device(device.name).join(
        tasks.select("task_id"), on="task_id", how="semi")
    if chosen.is_empty():
        raise TclError(f"nothing was selected for device {device.name!r} among these tasks "
                       f"(`tcl query \"select run, count(*) from selections where device = "
                       f"'{device.name}' group by run\"`); select with --select first")
    ids = set(chosen["program_id"].to_list())
    # the selected programs are stored candidates: measure as deep into each task's as they lie
    positions = pl.concat([load_candidates(paths, t).select("program_id").with_row_index("i")
                           for t in chosen["task_id"].unique().to_list()])
    depth = int(positions.filter(pl.col("program_id").is_in(list(ids)))["i"].max() or 0) + 1
    part = tasks.join(chosen.select("task_id").unique(), on="task_id", how="semi")
    return collect(paths, device, part, depth, batch_size=batch_size, progress=progress,
                   program_ids=ids, report=report,
                   what=f"measure {device.name}'s selections again")


def _select_round(paths: Paths, device: Device, tasks: pl.DataFrame, pool_per_task: int,
                  selection: Selection, run: str, r: int, k: int, sampler, weights, model,
                  model_name: str) -> pl.DataFrame | None:
    """Select round ``r`` (at most ``k`` programs) and store it; None when nothing is left."""
    store = SelectionStore(paths)
    ps, done = _pool(paths, device, tasks, pool_per_task, selection.seed)
    earlier = set().union(*[set(store.read(device.name, run, q)["program_id"])
                            for q in range(r)])
    # The pool holds the measured candidates too, as ``already``: diversity keeps away from
    # them, and they are never picked again.
    taken = (done | earlier) & set(ps.program_ids.astype(str))
    k = min(k, len(ps) - len(taken))
    if k == 0:
        return None
    pool = Pool(ps, task_weights=weights, first_tasks=selection.first_tasks or None)
    ids = sampler.select(pool, k, model=model, already=taken, seed=selection.seed + r)
    task_of = dict(zip(ps.program_ids.astype(str), ps.task_ids.astype(str)))
    store.write(device.name, run, r, ids, [task_of[i] for i in ids], selection.sampler,
                model_name)
    return store.read(device.name, run, r)


def _add(total: CollectStats, part: CollectStats) -> None:
    for name in ("measured", "errors", "skipped", "dropped", "build_secs", "run_secs",
                 "wall_secs"):
        setattr(total, name, getattr(total, name) + getattr(part, name))
    for k, v in part.per_status.items():
        total.per_status[k] = total.per_status.get(k, 0) + v


def _round_model(paths: Paths, device: Device, tasks: pl.DataFrame, selection: Selection,
                 round_: int):
    """A model trained on the device's measurements so far (the selected rounds before this)."""
    ps = load_program_set(paths, device.name, tasks["task_id"].to_list())
    return make_model(selection.round_model, **selection.round_hyper,
                      seed=selection.seed + round_).fit(ps)
