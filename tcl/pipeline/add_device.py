"""The add-device run: a newly registered device gets its own model, and nothing else changes.

``add_device_run(params, device)`` runs its steps in order (``start_run`` resolves what they
share once: the device, the teacher, the tasks); the add-device flow runs the same steps as
Prefect tasks:

1. ``select_step``: samples candidates for the pipeline's tasks and selects ``select.budget``
   of the training tasks' candidates with ``select.sampler``, the latest registered model (the
   teacher) as the cold-start model (``tcl.measure.active``; stored before it is measured);
2. ``measure_step``: measures the picks (resumable); with ``select.rounds`` > 1, steps 1-2
   repeat per round;
3. ``evaluation_step``: measures ``add_device.eval_programs_per_task`` candidates of every
   held-out task, the new device's evaluation set;
4. ``featurize_step``: the evaluation set's features;
5. ``distill_step``: distills the teacher into a model that also serves the new device
   (``tcl.pipeline.continual``);
6. ``register_step``: evaluates it (the new device; forgetting on the earlier ones) and
   registers it.

Each step's seconds are kept (``AddDeviceRun.secs``) and the result ends with the table of
time from the command to the registered model. Earlier devices' records and models are only
read. A device whose every measurement failed is marked failed (``tcl status`` shows it) and
gets no model. Running it again for the same device selects, measures and trains nothing new,
and says so. ``plan_add_device`` (``tcl device add --dry-run``) says what a run would do and
how long its measurement takes, writing nothing.
"""
from __future__ import annotations

import base64
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

import polars as pl

from ..config import TclError, save_figure
from ..measure.active import ActiveRun, plan_active, sample_pool
from ..measure.collect import CollectStats, collect, plan as collect_plan, probe_rate, \
    records_rate
from ..registry import Entry
from ..resolve import cold_start_model
from ..store.catalog import records
from ..store.devices import Device, DeviceRegistry, clear_failed, mark_failed
from ..store.records import RecordStore, safe_component
from .continual import (DistillJob, DistillResult, fit_distill, prepare_distill,
                        register_distill)
from .inputs import collect_options, selected_tasks, selection
from .params import Params
from .stages import run_featurize

# The steps of the table that ends a run, in order (``AddDeviceRun.secs``).
STEPS = ("selection", "measurement", "evaluation set", "featurizing", "distillation",
         "registration/evaluation")
PROBE_S = 20.0   # a dry run with no similar device measures this long for its estimate


@dataclass
class AddDeviceResult:
    device: str
    teacher: str              # the teacher model's id
    selected: int             # programs selected (all rounds)
    measured_now: int         # measured by this run
    model: str                # the new model's id
    new_model: bool           # False: nothing new was trained
    metrics: dict
    secs: dict[str, float] = field(default_factory=dict)   # per step (STEPS)
    total_secs: float = 0.0   # from the command to the registered model

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
        if self.secs:
            lines += ["", step_table(self.secs, self.total_secs)]
        return "\n".join(lines) + "\n"

    def report(self, plot: Path) -> str:
        """``markdown()`` with a plot of each device's top-1 and forgetting (written to
        ``plot``) embedded: what the add-device flow publishes."""
        data = base64.b64encode(_plot(self, plot).read_bytes()).decode()
        return self.markdown() + f"\n![scores](data:image/png;base64,{data})\n"


def _plot(result: AddDeviceResult, path: Path) -> Path:
    # lazy: only the add-device flow's report draws; the run and the dry run need no matplotlib
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    devices = list(result.metrics.get("devices", {}))
    top1 = [result.metrics["devices"][d].get("top1", 0) for d in devices]
    forgot = [(result.metrics.get("forgetting", {}).get(d) or {}).get("pairwise", {})
              .get("overall") or 0 for d in devices]
    fig, axes = plt.subplots(1, 2, figsize=(8, 3))
    axes[0].bar(devices, top1, color=["C1" if d == result.device else "C0" for d in devices])
    axes[0].set_ylabel("top-1, held-out networks")
    axes[0].set_ylim(0, 1)
    axes[1].bar(devices, forgot)
    axes[1].set_ylabel("forgetting (pairwise)")
    for ax in axes:
        ax.tick_params(axis="x", labelsize=7, rotation=20)
    fig.tight_layout()
    save_figure(fig, path, "add-device plot", dpi=90)
    plt.close(fig)
    return path


def step_table(secs: dict[str, float], total: float) -> str:
    """Markdown: the time from the command to the registered model, per step, with shares;
    what no step accounts for (start-up: Python, TVM, Prefect) is its own row."""
    total = max(total, sum(secs.values()))
    rows = [(s, secs.get(s, 0.0)) for s in STEPS] + \
        [(s, v) for s, v in secs.items() if s not in STEPS]
    rows.append(("start-up and other (command, Prefect)", total - sum(v for _, v in rows)))
    lines = ["| step | seconds | share |", "|---|---:|---:|"]
    lines += [f"| {s} | {v:.1f} | {v / total:.0%} |" if total > 0 else f"| {s} | {v:.1f} | |"
              for s, v in rows]
    lines.append(f"| **command to registered model** | **{total:.1f}** | 100% |")
    return "\n".join(lines)


def _fmt(v) -> str:
    return "" if v is None else f"{v:.3f}"


def _no_teacher(params: Params, device: str) -> TclError:
    return TclError(f"no registered {params.continual.backbone} model to distill {device!r} "
                    f"from: run the continual sequence first (`tcl stage distill`)")


def _teacher(params: Params, device: str, load: bool = True):
    """The cold-start model (``tcl.resolve.COLD_START``) that is a registered model of the
    continual backbone: distilling it needs its registry row. ``load`` False: a plan's, named
    only."""
    return cold_start_model(params.paths, device, backbone=params.continual.backbone,
                            registered=True, load=load)


def check_device(params: Params, name: str) -> Device:
    """The device an add-device run may be for: a name that cannot be a path (checked before
    anything reads it), registered in the params' data root; anything else is a TclError."""
    return DeviceRegistry(params.paths).get(safe_component(name, "device name"))


@dataclass
class AddDeviceRun:
    """What the steps of one add-device run share, resolved once by ``start_run``."""

    params: Params
    device: Device
    teacher: Entry
    teacher_model: object          # the teacher, loaded once (a MultiDeviceModel)
    tasks: pl.DataFrame            # the pipeline's tasks (selected_tasks), computed once
    say: Callable[[str], None]
    progress: bool
    started: float                 # epoch seconds of the command's start
    secs: dict[str, float] = field(default_factory=dict)
    active: ActiveRun | None = None
    evaluation: CollectStats = field(default_factory=CollectStats)
    job: DistillJob | None = None
    distilled: tuple | None = None          # (model, train seconds) from distill_step
    result: DistillResult | None = None

    @property
    def train(self) -> pl.DataFrame:
        return self.tasks.filter(~pl.col("holdout"))

    @property
    def held(self) -> pl.DataFrame:
        return self.tasks.filter(pl.col("holdout"))

    def timed(self, step: str, fn: Callable, *args, **kwargs):
        """``fn(*args, **kwargs)``, its seconds added to ``step``'s."""
        t0 = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            self.secs[step] = self.secs.get(step, 0.0) + time.perf_counter() - t0


def start_run(params: Params, device: str, say: Callable[[str], None] = print,
              progress: bool = False, started: float | None = None) -> AddDeviceRun:
    """Resolve the device, the teacher (resolved and loaded here only) and the tasks."""
    dev = check_device(params, device)   # unknown or path-like: a clear error
    teacher = _teacher(params, device)
    if teacher is None:
        raise _no_teacher(params, device)
    e = teacher.entry
    say(f"add-device {device}: teacher model {e.id} ({e.device}, {e.method})")
    return AddDeviceRun(params, dev, e, teacher.model, selected_tasks(params), say,
                        progress, time.time() if started is None else started)


def select_step(run: AddDeviceRun, r: int = 0) -> pl.DataFrame | None:
    """Round ``r``'s picks (round 0 first samples the candidates and plans the selection);
    None when nothing is left to select."""
    def select() -> pl.DataFrame | None:
        if run.active is None:
            p = run.params
            sample_pool(p.paths, run.held, p.sample.programs_per_task, p.sample.seed)
            found = similar_device(p, run.device)
            if found is not None:
                run.say(f"add-device {run.device.name}: time estimates at {found[1]:.2f} "
                        f"records/s, the measured rate of {found[0]} ({found[2]})")
            run.active = ActiveRun(p.paths, run.device, run.train, p.sample.programs_per_task,
                                   selection(p), model=run.teacher_model.for_device(
                                       run.teacher.device),
                                   batch_size=p.measure.batch_size, progress=run.progress,
                                   say=run.say, model_name=run.teacher.id, report=run.say,
                                   records_per_sec=found[1] if found else None)
        return run.active.select(r) if r < run.active.rounds else None
    return run.timed("selection", select)


def rounds(run: AddDeviceRun) -> int:
    """Selection rounds of the run (known after ``select_step(run, 0)``)."""
    return run.active.rounds if run.active is not None else run.params.select.rounds


def measure_step(run: AddDeviceRun, r: int, chosen: pl.DataFrame) -> CollectStats:
    """Measure round ``r``'s picks; resumable (what is stored is skipped)."""
    return run.timed("measurement", run.active.measure, r, chosen)


def select_and_measure_rounds(run: AddDeviceRun, select: Callable = select_step,
                              measure: Callable = measure_step) -> None:
    """Round by round, select then measure, until nothing is left to select; the flow passes
    its Prefect tasks of the two steps (each round a task run of each), the library the steps."""
    r, chosen = 0, select(run, 0)
    while chosen is not None:
        measure(run, r, chosen)
        r += 1
        chosen = select(run, r) if r < rounds(run) else None


def evaluation_step(run: AddDeviceRun) -> CollectStats:
    """Measure the new device's evaluation set (held-out tasks); resumable."""
    p = run.params
    got = run.timed("evaluation set", collect, p.paths, run.device, run.held,
                    p.add_device.eval_programs_per_task, **collect_options(p, run.device),
                    progress=run.progress, report=run.say,
                    what=f"measure {run.device.name} evaluation set")
    run.evaluation = got
    run.say(f"evaluation set {run.device.name}: {got.measured} measured now ({got.errors} "
            f"errors), {got.skipped} measured before")
    return got


def featurize_step(run: AddDeviceRun) -> int:
    """Features of the programs measured so far (the evaluation set's); then a device whose
    every measurement failed is marked failed and the run stops."""
    p, device = run.params, run.device.name
    n = run.timed("featurizing", run_featurize, p, progress=run.progress,
                  task_ids=run.tasks["task_id"].to_list())
    if _ok_records(p, device) == 0:
        errors = run.evaluation.errors + (run.active.stats.collect.errors if run.active else 0)
        reason = f"no measurement of {device} succeeded ({errors} errors this run)"
        mark_failed(p.paths, device, reason)
        raise TclError(f"device {device!r}: {reason}; it is marked failed (`tcl status`) and "
                       "gets no model. Check its target and host, then run it again")
    clear_failed(p.paths, device)
    return n


def distill_step(run: AddDeviceRun) -> bool:
    """Train the student from the teacher (passed down, not resolved again); False when the
    same inputs made a registered model already (nothing trained)."""
    def distill() -> bool:
        run_params = replace(run.params, continual=replace(run.params.continual,
                                                           subset_from="selections"))
        job = prepare_distill(run_params, run.device.name, say=run.say,
                              teacher=(run.teacher, run.teacher_model),
                              tasks=run.train["task_id"].to_list())
        if isinstance(job, DistillResult):
            run.result = job
            return False
        run.job, run.distilled = job, fit_distill(job)
        return True
    return run.timed("distillation", distill)


def register_step(run: AddDeviceRun) -> AddDeviceResult:
    """Evaluate and register the student (unless nothing was new); the run's result, with the
    table of its steps' seconds."""
    if run.result is None:
        run.result = run.timed("registration/evaluation", register_distill, run.job,
                               *run.distilled, say=run.say)
    stats = run.active.stats if run.active is not None else None
    selected = sum(r["selected"] for r in stats.rounds) if stats else 0
    measured_now = (stats.collect.measured if stats else 0) + run.evaluation.measured
    r = run.result
    return AddDeviceResult(run.device.name, run.teacher.id, selected, measured_now, r.entry.id,
                           r.new, r.metrics, dict(run.secs), time.time() - run.started)


def add_device_run(params: Params, device: str, say: Callable[[str], None] = print,
                   progress: bool = False, started: float | None = None) -> AddDeviceResult:
    """The steps in order (the module docstring); ``started``: the command's start (epoch
    seconds) for the table's total, default now."""
    run = start_run(params, device, say, progress, started)
    select_and_measure_rounds(run)
    evaluation_step(run)
    featurize_step(run)
    distill_step(run)
    return register_step(run)


def _ok_records(params: Params, device: str) -> int:
    return records(params.paths, device, ("record_id",), status="ok").height


# -- the dry run ---------------------------------------------------------------------------------
@dataclass
class AddDevicePlan:
    device: Device
    teacher: Entry
    pool: int                  # unmeasured candidates of the training tasks
    to_sample: int             # of the pool: not sampled yet
    budget: int                # programs the selection picks, earlier runs' picks included
    to_measure: int            # of those, still unmeasured (``ActivePlan.todo``)
    eval_tasks: int
    eval_programs: int         # the evaluation set's programs still to measure
    rate: float                # records per second the estimate assumes
    source: str                # where the rate comes from
    distill_secs: float | None  # the teacher's own training time, if registered

    @property
    def measure_secs(self) -> float:
        return (self.to_measure + self.eval_programs) / self.rate

    def describe(self) -> str:
        lines = [f"dry run: device {self.device.name} (target {self.device.target}; nothing "
                 "registered, sampled or measured)",
                 f"teacher: model {self.teacher.id} ({self.teacher.device})",
                 f"pool: {self.pool} unmeasured candidates of the training tasks"
                 + (f" ({self.to_sample} still to sample)" if self.to_sample else ""),
                 f"budget: {self.budget} programs"
                 + (f" ({self.budget / self.pool:.1%} of the pool)"
                    if self.pool >= self.budget else "")
                 + f", {self.to_measure} of them still to measure",
                 f"evaluation set: {self.eval_programs} programs of {self.eval_tasks} held-out "
                 "tasks to measure",
                 f"estimate: {self.measure_secs:.0f} s of measurement ({self.to_measure} + "
                 f"{self.eval_programs} programs at {self.rate:.2f} records/s, {self.source})"]
        if self.distill_secs is not None:
            lines.append(f"  + about {self.distill_secs:.0f} s of distillation (the teacher's "
                         "own training time); sampling and featurizing not counted")
        return "\n".join(lines)


def plan_add_device(params: Params, device: Device, probe_s: float = PROBE_S,
                    say: Callable[[str], None] = print) -> AddDevicePlan:
    """What an add-device run of ``device`` (registered or not) would do, from the stored
    candidates, records and models alone; the estimate's rate comes from the closest device
    with records (``similar_device``), or else from a probe that measures for ``probe_s``
    seconds (stored nowhere). Writes nothing but caches."""
    found = _teacher(params, device.name, load=False)   # named only: a plan loads no model
    if found is None:
        raise _no_teacher(params, device.name)
    teacher = found.entry
    tasks = selected_tasks(params)
    train, held = tasks.filter(~pl.col("holdout")), tasks.filter(pl.col("holdout"))
    active = plan_active(params.paths, device, train, params.sample.programs_per_task,
                         selection(params))
    evaluation = collect_plan(params.paths, device, held, params.add_device.eval_programs_per_task)
    found = similar_device(params, device)
    if found is not None:
        name, rate, why = found
        source = f"measured rate of {name}, the closest device with records ({why})"
    else:
        say(f"dry run: no similar device has records; measuring {device.name} for "
            f"{probe_s:.0f} s to estimate its rate (nothing is stored)")
        rate, n = probe_rate(params.paths, device, tasks, probe_s)
        source = f"a {probe_s:.0f} s probe: {n} programs measured on {device.name}, not stored"
    return AddDevicePlan(device, teacher, active.pool, active.to_sample, active.budget,
                         active.todo,
                         len(held), evaluation.todo, rate, source, teacher.train_secs)


def similar_device(params: Params, device: Device) -> tuple[str, float, str] | None:
    """(name, records/s, why) of the registered device most like ``device`` (itself, once it has
    records) with enough records for a rate (``records_rate``): same host first, then the same
    core count and CPU; only devices of the same target kind and device kind (``Device.kind``:
    a CPU of this host, a board behind a tracker); None when none has enough."""
    store = RecordStore(params.paths)
    # A rate is the hardware's: only the full host identity counts as the same host (records
    # from before hosts were told apart carry the bare model name of any host of that model).
    hosts = [device.host_cpu]
    best = None
    for name, other in DeviceRegistry(params.paths).all().items():   # itself, if it has some
        if other.target.get("kind") != device.target.get("kind") \
                or other.kind != device.kind:
            continue
        frame = store.read(name, columns=["measured_at", "host_cpu"])
        if frame.is_empty():
            continue
        here = frame.filter(pl.col("host_cpu").is_in(hosts))
        rate = records_rate(here["measured_at"])
        same_host = rate is not None
        if rate is None:
            rate = records_rate(frame["measured_at"])
        if rate is None:
            continue
        same = [name == device.name, same_host, other.num_cores == device.num_cores,
                other.target.get("mcpu") == device.target.get("mcpu")]
        if best is None or same > best[0]:
            why = ", ".join(w for w, s in zip(("this device", "same host", "same core count",
                                               "same CPU"), same) if s)
            best = (same, name, rate, f"{why or 'same target kind only'}; "
                                      f"target {other.target.get('kind')}")
    return None if best is None else best[1:]
