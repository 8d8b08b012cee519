"""What a ``tcl tune`` run will do, settled before it tunes: the model settings and their
defaults, the network instance, the trials per round and the task scheduler, and the dry run's
plan and estimate (``plan_tuning``: TVM only to check the target, no model, nothing
written).

The budget covers every task before any task gets a second round: the scheduler's first round
gives each task ``num_trials_per_iter`` trials, so that is ``trials // tasks`` (at most 64).
"""
from __future__ import annotations

import json
from dataclasses import dataclass

from ..config import Paths, TclError
from ..measure.collect import throughput
from ..resolve import check_model_spec
from ..measure.devices import create
from ..store.devices import Device, DeviceRegistry
from ..store.records import RecordStore
from ..zoo.extract import load_networks
from .expect import expected_latency
from .choices import choose, chosen_lines
from .winograd import NOT_COMPILED

MODELS_HELP = "latest | a trained kind (mamba, tenset-mlp, tlp, xgb) | xgb-online | random | FILE"
ONLINE = {"xgb-online": "xgb", "random": "random"}   # MetaSchedule's own cost models
UPDATE_MODES = ("none", "refit", "residual")         # tcl.models.adapter.UPDATE_MODES
# MetaSchedule's task schedulers. "gradient" (its default) gives every task a first round
# without collecting any result (no task is joined until the round robin ends), so during that
# round no measurement reaches the database, the curve or an online model (xgb-online, refit,
# residual learn nothing); "round-robin" joins each task once its runs are done. "auto": round
# robin while the budget is at most one round per task (the same allocation), else gradient.
SCHEDULERS = ("auto", "gradient", "round-robin")
# What a run uses where the caller names nothing, measured at 64 trials per task on two
# one-core profiles (docs/results.md, "tcl tune's defaults"): tcl's models as a prior that an
# online XGBoost corrects (residual: where it learns during the run, its networks were faster
# than frozen's in 3 of 4 cells and tied in 1; where it cannot, it is the prior alone; about
# 2 s a run) with a lean evolutionary search (64 x 2: networks 0.95-1.02x those of
# MetaSchedule's 512 x 4, at 5-8% search overhead instead of 35-56%); MetaSchedule's own
# models keep MetaSchedule's search.
TCL_UPDATE = "residual"
TCL_SEARCH = (64, 2)            # population, generations
METASCHEDULE_SEARCH = (512, 4)  # EvolutionarySearch's defaults
# For a device with no earlier tuning run to measure from: seconds of search, featurizing and
# predicting per candidate the search scores, an assumption of the order of featurizing one
# conv2d candidate (docs/architecture.md); the dry run says when it used it.
ASSUMED_SEARCH_S_PER_SCORED = 0.01


def tunable_device(paths: Paths, name: str) -> Device:
    """The device ``name``, if this host can tune it: a device whose code it can run and whose
    compiled network it can time (``DeviceKind.check_can_time``). The run's check and its dry
    run's."""
    device = DeviceRegistry(paths).get(name)
    kind = create(device)
    kind.check_runnable()
    kind.check_can_time()
    return device


def resolve_instance(paths: Paths, network: str):
    """A network name (its first batch-1 variant, else its first) or an instance key."""
    # lazy: the networks (torch) cost ~3 s at import
    from ..zoo.networks import NETWORKS, zoo_instances
    from ..zoo.user import user_networks

    users = user_networks(paths)
    every = zoo_instances(list(NETWORKS) + list(users), user=users)
    by_key = {i.key: i for i in every}
    if network in by_key:
        return by_key[network]
    named = [i for i in every if i.network == network]
    if not named:
        raise TclError(f"unknown network {network!r}: give a zoo network name or an instance key "
                       "(`tcl zoo list`)")
    return next((i for i in named if i.batch == 1), named[0])


def tuning_defaults(model: str, update: str | None = None, population: int | None = None,
                    generations: int | None = None) -> tuple[str, int, int]:
    """(update mode, population, generations) of a run of ``model``, each None filled in:
    ``TCL_UPDATE`` and ``TCL_SEARCH`` for tcl's models, none and ``METASCHEDULE_SEARCH`` for
    MetaSchedule's own (``ONLINE``). Validated here, before anything loads."""
    own = model in ONLINE
    update = update if update is not None else ("none" if own else TCL_UPDATE)
    search = METASCHEDULE_SEARCH if own else TCL_SEARCH
    population = search[0] if population is None else population
    generations = search[1] if generations is None else generations
    if update not in UPDATE_MODES:
        raise TclError(f"--update {update!r}: expected one of {', '.join(UPDATE_MODES)}")
    if population < 2 or generations < 0:
        raise TclError(f"population {population} / generations {generations}: expected a "
                       "population of at least 2 and generations >= 0")
    return update, population, generations


def trials_per_iter(trials: int, tasks: int, key: str) -> int:
    """Trials per round (``num_trials_per_iter``): the budget covers every task's first round
    (at most 64 trials) before any task gets a second."""
    if trials < tasks:
        raise TclError(f"--trials {trials} is fewer than the {tasks} tasks of {key}: "
                       "every task needs its first round")
    return max(1, min(64, trials // tasks))


def task_scheduler(scheduler: str, trials: int, tasks: int, per_iter: int) -> str:
    """The MetaSchedule task scheduler ``scheduler`` (one of ``SCHEDULERS``, checked by
    tune_network before it writes anything) means here."""
    if scheduler != "auto":
        return scheduler
    return "round-robin" if trials <= tasks * per_iter else "gradient"


@dataclass
class TuningPlan:
    """What ``tcl tune`` would do, from the zoo's tables and earlier runs (``plan_tuning``)."""

    network: str
    device: str
    model: str
    trials: int
    tasks: int
    per_iter: int            # each task's first round, and every later round's size
    population: int
    generations: int
    records_per_s: float     # measuring rate
    rate_basis: str
    search_s_per_scored: float
    search_basis: str
    expected: str | None = None   # the budget curve's latency at this budget (tune.expect)
    layout: str = "nchw"          # tcl.tune.layout
    fast_math: bool = False
    fuse: bool = True
    conv: str = "direct"          # tcl.tune.winograd
    chosen: tuple[str, ...] = ()  # why each choice made for the user (tcl.tune.choices)
    scheduler: str = "auto"       # SCHEDULERS

    @property
    def rounds(self) -> int:
        return -(-self.trials // self.per_iter)

    @property
    def scored(self) -> int:
        """Candidates the search scores: each round, the initial population and one per
        generation (a predict call each: the ``scoring`` counts of a run show it)."""
        return self.rounds * self.population * (self.generations + 1)

    @property
    def measure_s(self) -> float:
        return self.trials / self.records_per_s

    @property
    def search_s(self) -> float:
        return self.scored * self.search_s_per_scored

    @property
    def eta_s(self) -> float:
        return self.measure_s + self.search_s

    def describe(self) -> str:
        later = self.trials - self.tasks * self.per_iter
        picks = ("MetaSchedule's gradient scheduler picks"
                 if task_scheduler(self.scheduler, self.trials, self.tasks, self.per_iter)
                 == "gradient" else "the round-robin scheduler takes in turn")
        return "\n".join([
            f"tune {self.network} on {self.device} with {self.model}: {self.trials} trials over "
            f"{self.tasks} tasks",
            f"trials per task: {self.per_iter} each in the first round ({self.tasks} x "
            f"{self.per_iter} = {self.tasks * self.per_iter}), then {max(0, later)} more in rounds "
            f"of {self.per_iter} to the tasks {picks} "
            f"({self.trials / self.tasks:.1f} a task on average)",
            f"estimated time: about {self.eta_s:.0f} s of tuning = {self.measure_s:.0f} s building "
            f"and running ({self.trials} trials at {self.records_per_s:.2f} records/s, "
            f"{self.rate_basis}) + {self.search_s:.0f} s search, featurizing and predicting "
            f"({self.rounds} rounds x {self.population} candidates x "
            f"{self.generations + 1} populations = {self.scored} scored, at "
            f"{self.search_s_per_scored * 1e3:.1f} ms each, {self.search_basis}); compiling "
            "and timing the network come after",
            self.expected or f"expected latency: no budget curve of {self.network} yet (`python "
            "benchmarks/budget_curve.py --publish` makes one)",
            *chosen_lines(self.chosen),
            *([_LAYOUT_NOTES[self.layout]] if self.layout in _LAYOUT_NOTES else []),
            *([_FAST_MATH_NOTE] if self.fast_math else []),
            *([] if self.fuse else [_UNFUSED_NOTE]),
            *([_WINOGRAD_NOTE.format(conv=self.conv)] if self.conv != "direct" else []),
            "nothing was tuned or written (dry run)"])


# What the dry run cannot know of a layout other than the default without extracting its tasks
_LAYOUT_NOTES = {
    "prepack": "layout prepack: the zoo's tasks, their weights marked layout-free (so tasks "
               "that read weights have new ids); the budget curves were measured in NCHW",
    "nchwc": "layout nchwc: the task count is the zoo's NCHW extraction's; the blocked module "
             "has its own (NCHW[x]c convolutions, layout transforms between), known once the "
             "run extracts them; the budget curves were measured in NCHW"}


_FAST_MATH_NOTE = ("fast math: tasks with erf, exp, tanh, softmax or gelu are new ones (their "
                   "approximations); the task count is the zoo's exact extraction's")

_WINOGRAD_NOTE = ("conv {conv}: stride-1 3x3 convolutions are Winograd tasks (new ids); the "
                  "task count is the zoo's direct extraction's; the run refuses it for now: "
                  + NOT_COMPILED)

_UNFUSED_NOTE = ("no fusion: every operator is its own task (more tasks than the zoo's fused "
                 "extraction's count, each with new ids)")


def earlier_runs(paths: Paths, device: str) -> list[dict]:
    """The summaries of finished ``tcl tune`` runs on ``device`` anywhere under the data root
    (``--out`` defaults to its tuning directory; benchmarks keep their runs in its cache)."""
    runs = []
    for f in sorted(paths.root.rglob("summary.json")):
        try:
            got = json.loads(f.read_text())
        except (OSError, ValueError):
            continue   # unreadable: not one to estimate from
        if isinstance(got, dict) and got.get("device") == device and "time_split" in got:
            runs.append(got)
    return runs


def plan_tuning(paths: Paths, network: str, device_name: str, model: str = "latest", *,
                trials: int = 1000, population: int | None = None,
                generations: int | None = None, layout: str = "nchw",
                fast_math: bool = False, fuse: bool = True, conv: str = "direct",
                scheduler: str = "auto") -> TuningPlan:
    """``tcl tune --dry-run``: the tasks (the zoo's extraction of the network), trials per task
    and an estimated time, without tuning, loading a model or writing anything. Refused where
    the run refuses the device (``tunable_device``) or a model spec that names no model
    (``check_model_spec``). ``population``/``generations``: None for ``tuning_defaults``'."""
    import statistics

    _, population, generations = tuning_defaults(model, None, population, generations)
    device = tunable_device(paths, device_name)
    inst = resolve_instance(paths, network)
    chosen = choose(paths, inst.key, layout, conv)
    layout, conv = chosen.layout, chosen.conv
    if model not in ONLINE:   # what the run refuses of the model without loading one
        check_model_spec(paths, device.name, model)
    nets = load_networks(paths)
    tasks = int((nets["network_key"] == inst.key).sum())
    if not tasks:
        raise TclError(f"{inst.key} is not extracted yet, so its tasks are not known without "
                       "tuning: run `tcl zoo` (or tune: the run extracts them first)")
    per_iter = trials_per_iter(trials, tasks, inst.key)   # refuses a budget below the tasks
    runs = earlier_runs(paths, device.name)
    # Building and running: as fast as this device's earlier tuning runs did, else as its
    # collections (which overlap the two, so they read faster than a tuning run's)
    rates = [r["trials"] / (r["build_s"] + r["run_s"]) for r in runs
             if r.get("trials") and r.get("build_s", 0) + r.get("run_s", 0) > 0]
    if rates:
        rate = statistics.median(rates)
        rate_basis = f"median of {len(rates)} earlier tuning run(s) on {device.name}"
    else:
        rate, rate_basis = throughput(RecordStore(paths), device.name)
    # The search's own overhead per scored candidate, from the same runs
    per_scored = []
    for got in runs:
        try:
            split, scored = got["time_split"], got["scoring"]["scored"]
            if scored:
                per_scored.append(sum(split[k]["s"] for k in ("search", "featurize", "predict",
                                                              "update")) / scored)
        except (KeyError, TypeError):
            continue   # an older summary, or a model that reports no scoring
    if per_scored:
        search, basis = statistics.median(per_scored), \
            f"median of {len(per_scored)} earlier tuning run(s) on {device.name}"
    else:
        search, basis = ASSUMED_SEARCH_S_PER_SCORED, \
            f"assumed: no earlier tuning run on {device.name} to measure from"
    expected = expected_latency(paths, device.name, inst.key, model, trials / tasks)
    return TuningPlan(inst.key, device.name, model, trials, tasks,
                      per_iter, population, generations, rate,
                      rate_basis, search, basis,
                      expected.describe(trials / tasks) if expected else None, layout,
                      fast_math, fuse, conv, chosen.reasons, scheduler)
