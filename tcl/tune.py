"""``tcl tune``: tune a network's Relax module with MetaSchedule, driven by a chosen cost model;
compile it with the tuned database, check it against PyTorch and time it end to end.

The search is MetaSchedule's own (what ``relax_integration.tune_relax`` runs: task extraction,
``tune_tasks`` with the gradient task scheduler and evolutionary search, the builder and runner
tcl measures with; tcl calls its two steps itself so that a run can resume); only the cost model
changes: a tcl model through the ``PyCostModel`` adapter (``tcl.models.adapter``), frozen
(``update="none"``), refit on what the search measures (``"refit"``) or kept as a prior that an
online XGBoost corrects on its residual (``"residual"``: ``tcl.models.residual``, the default:
``tuning_defaults``); MetaSchedule's XGBoost trained online from scratch (``xgb-online``), or its
random model (``random``, the floor).
``MetaScheduleTuneIRMod`` is not used: it ignores a custom cost model.

The budget covers every task before any task gets a second round: the scheduler's first round
gives each task ``num_trials_per_iter`` trials, so that is ``trials // tasks`` (at most 64).

Outputs under ``out``: ``network.so`` (``export_library``), ``database/`` (the MetaSchedule
JSONDatabase), ``curve.csv`` / ``curve.png`` (the best network latency estimated from the
tasks' best measured latencies, weighted, against trials and wall time), ``summary.json`` (with
``online``: the model's pairwise accuracy and top-1 on the candidates the search measured, per
task and weighted like the network, as each round's model scored them and as the final model
does: ``tcl.online``) and ``time_split`` (where the tuning wall time went: ``time_split``).
The tuning records join the store with source ``tune``, so tuning logs become training data.
An interrupted run resumes where it stopped when started again with the same parameters and
``out`` (``run.json``): its measured rounds stay in its database and the rest of the budget
goes to the tasks it had not reached (``resume_state``).
``plan_tuning`` says what a run would do and about how long it would take, without tuning.
"""
from __future__ import annotations

import concurrent.futures as cf
import functools
import json
import multiprocessing
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from .config import Paths, TclError, atomic_write
from .dataset import load_program_set
from .measure.collect import DEFAULT_RECORDS_PER_SEC, measured_throughput
from .measure.interrupt import quiet_interrupts
from .measure.msjson import import_database
from .measure.pooled_builder import pooled_builder
from .measure.runner import _pin_worker, make_runner
from .measure.timed import Stopwatch, median_ms, timed
from .predict import resolve_model
from .store.devices import DeviceRegistry, check_runnable
from .store.records import RecordStore, task_id_of
from .train import holdout_task_ids
from .tvm_compat import compile_database, meta_schedule
from .zoo.extract import load_networks, relax_module

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
TOLERANCE = {"rtol": 1e-3, "atol": 1e-3}             # tuned outputs against PyTorch's, fp32
RUN_FILE = "run.json"        # a run's parameters, written before it tunes: what a resume matches
CURVE_FILE = "curve.jsonl"   # the curve's points as they come, for a resumed run to continue


@dataclass
class TuneResult:
    network: str
    device: str
    model: str
    update: str
    seed: int
    trials: int                    # measured (MetaSchedule may stop early when spaces run out)
    tasks: int
    trials_per_task: dict[str, int]
    latency_ms: float              # the compiled network, end to end, mean of the repeats
    latency_std_ms: float
    torch_ms: float                # PyTorch eager on the same cores
    max_abs_err: float             # against PyTorch's outputs
    tune_s: float
    build_s: float                 # of tune_s: building candidates
    run_s: float                   # of tune_s: running them on the device
    compile_s: float
    records_added: int
    out: str
    curve: list[dict] = field(default_factory=list)
    # the model's pairwise accuracy and top-1 on what the search measured (tcl.online)
    online: dict = field(default_factory=dict)
    # where tune_s went: {part: {"s", "share"}} (time_split), the search's predict calls and
    # candidates scored, and the adapter's feature cache (tcl models only)
    time_split: dict = field(default_factory=dict)
    scoring: dict = field(default_factory=dict)
    # the evolutionary search's size: schedules scored per generation, and generations
    search: dict = field(default_factory=dict)
    # a run that continued an interrupted one (``resume_state``): its trials, tasks and tuning
    # wall time before; tune_s, time_split and online cover this process's part only
    resumed: dict = field(default_factory=dict)

    @property
    def overhead_share(self) -> float:
        """The share of tuning wall time spent neither building nor running kernels."""
        if not self.tune_s:
            return 0.0
        return max(0.0, self.tune_s - self.build_s - self.run_s) / self.tune_s


SPLIT = ("search", "featurize", "predict", "update", "build", "run")


def time_split(tune_s: float, build_s: float, run_s: float, model: dict[str, float]) -> dict:
    """``{part: {"s", "share"}}`` for the parts of ``SPLIT``: build and run as the timed builder
    and runner counted them, featurize, predict and update (model fitting) as
    ``ScoredCostModel.seconds`` did; search is the rest of the wall time (the evolutionary
    search's sampling, mutation, post-processing, and MetaSchedule's bookkeeping)."""
    parts = {"featurize": model.get("featurize", 0.0), "predict": model.get("predict", 0.0),
             "update": model.get("update", 0.0), "build": build_s, "run": run_s}
    parts["search"] = max(0.0, tune_s - sum(parts.values()))
    return {k: {"s": round(parts[k], 2), "share": round(parts[k] / tune_s, 4) if tune_s else 0.0}
            for k in SPLIT}


def report_lines(r: TuneResult) -> list[str]:
    """What ``tcl tune`` prints at the end about the search: where the time went and how the
    model ranked what the search measured."""
    split = r.time_split
    lines = [f"time: {r.tune_s:.0f}s tuning = " + ", ".join(
        f"{k} {split[k]['s']:.1f}s ({split[k]['share']:.0%})" for k in SPLIT if k in split)]
    sc = r.scoring
    if sc.get("predict_calls"):
        line = (f"scoring: {sc['scored']} candidates in {sc['predict_calls']} predict calls "
                f"({sc['scored'] / sc['predict_calls']:.0f} a call)")
        cache = sc.get("feature_cache")
        if cache and cache.get("hit_rate") is not None:
            line += (f"; featurized once each: {cache['hit_rate']:.0%} cache hits "
                     f"({cache['hits']} of {cache['hits'] + cache['misses']}), about "
                     f"{cache['saved_s']:.1f}s saved")
        lines.append(line)
    for name, what in (("as_used", "as each round's model scored them"),
                       ("final", "by the final model")):
        q = r.online.get(name)
        if q:
            lines.append(f"online ranking ({q['candidates']} measured candidates, {q['tasks']} "
                         f"tasks, weighted like the network; {what}): pairwise "
                         f"{_fmt(q['pairwise'])}, top-1 {_fmt(q['top1'])}")
    return lines


def _fmt(x) -> str:
    return "-" if x is None else f"{x:.2f}"


def _task_scheduler(scheduler: str, trials: int, tasks: int, per_iter: int) -> str:
    """The MetaSchedule task scheduler ``scheduler`` (one of ``SCHEDULERS``, checked by
    tune_network before it writes anything) means here."""
    if scheduler != "auto":
        return scheduler
    return "round-robin" if trials <= tasks * per_iter else "gradient"


def trials_per_iter(trials: int, tasks: int, key: str) -> int:
    """Trials per round (``num_trials_per_iter``): the budget covers every task's first round
    (at most 64 trials) before any task gets a second."""
    if trials < tasks:
        raise TclError(f"--trials {trials} is fewer than the {tasks} tasks of {key}: "
                       "every task needs its first round")
    return max(1, min(64, trials // tasks))


# For a device with no earlier tuning run to measure from: seconds of search, featurizing and
# predicting per candidate the search scores, an assumption of the order of featurizing one
# conv2d candidate (docs/architecture.md); the dry run says when it used it.
ASSUMED_SEARCH_S_PER_SCORED = 0.01


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
        return "\n".join([
            f"tune {self.network} on {self.device} with {self.model}: {self.trials} trials over "
            f"{self.tasks} tasks",
            f"trials per task: {self.per_iter} each in the first round ({self.tasks} x "
            f"{self.per_iter} = {self.tasks * self.per_iter}), then {max(0, later)} more in rounds "
            f"of {self.per_iter} to the tasks MetaSchedule's gradient scheduler picks "
            f"({self.trials / self.tasks:.1f} a task on average)",
            f"estimated time: about {self.eta_s:.0f} s of tuning = {self.measure_s:.0f} s building "
            f"and running ({self.trials} trials at {self.records_per_s:.2f} records/s, "
            f"{self.rate_basis}) + {self.search_s:.0f} s search, featurizing and predicting "
            f"({self.rounds} rounds x {self.population} candidates x "
            f"{self.generations + 1} populations = {self.scored} scored, at "
            f"{self.search_s_per_scored * 1e3:.1f} ms each, {self.search_basis}); compiling "
            "and timing the network come after",
            "nothing was tuned or written (dry run)"])


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


def plan_tuning(paths: Paths, network: str, device_name: str, model: str = "latest", *,
                trials: int = 1000, population: int | None = None,
                generations: int | None = None) -> TuningPlan:
    """``tcl tune --dry-run``: the tasks (the zoo's extraction of the network), trials per task
    and an estimated time, without tuning, loading a model, importing TVM or writing anything
    (``population``/``generations``: None for ``tuning_defaults``')."""
    import statistics

    _, population, generations = tuning_defaults(model, None, population, generations)
    device = DeviceRegistry(paths).get(device_name)
    inst = resolve_instance(paths, network)
    nets = load_networks(paths)
    tasks = int((nets["network_key"] == inst.key).sum())
    if not tasks:
        raise TclError(f"{inst.key} is not extracted yet, so its tasks are not known without "
                       "tuning: run `tcl zoo` (or tune: the run extracts them first)")
    per_iter = trials_per_iter(trials, tasks, inst.key)   # refuses a budget below the tasks
    rate = measured_throughput(RecordStore(paths), device.name)
    rate_basis = (f"measured from {device.name}'s collections" if rate != DEFAULT_RECORDS_PER_SEC
                  else "assumed: too few records on this device to measure")
    # Earlier runs on this device: their search overhead per scored candidate
    per_scored = []
    for f in sorted(paths.tuning_dir.glob("*/summary.json")):
        try:
            got = json.loads(f.read_text())
            split, scored = got["time_split"], got["scoring"]["scored"]
        except (OSError, ValueError, KeyError, TypeError):
            continue   # an older or unreadable summary: not one to estimate from
        if got.get("device") == device.name and scored:
            per_scored.append(sum(split[k]["s"] for k in ("search", "featurize", "predict",
                                                          "update")) / scored)
    if per_scored:
        search, basis = statistics.median(per_scored), \
            f"median of {len(per_scored)} earlier tuning run(s) on {device.name}"
    else:
        search, basis = ASSUMED_SEARCH_S_PER_SCORED, \
            f"assumed: no earlier tuning run on {device.name} to measure from"
    return TuningPlan(inst.key, device.name, model, trials, tasks,
                      per_iter, population, generations, rate,
                      rate_basis, search, basis)


def resolve_instance(paths: Paths, network: str):
    """A network name (its first batch-1 variant, else its first) or an instance key."""
    # lazy: the networks (torch) cost ~3 s at import
    from .zoo.networks import NETWORKS, zoo_instances
    from .zoo.user import user_networks

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


def cost_model_for(paths: Paths, device: str, model: str, update: str,
                   any_device: bool = False):
    """(what tune_relax takes as cost_model, a description); ``any_device``: accept a model
    made for another device (``predict.check_model_device``)."""
    if model in ONLINE:
        if update != "none":
            raise TclError(f"--update applies to tcl's models; {model} is MetaSchedule's own "
                           "(xgb-online always learns online)")
        return ONLINE[model], f"MetaSchedule {ONLINE[model]} (online, from scratch)"

    # the model first: a refused one costs no MetaSchedule import (lazy: the adapter's, ~23 s)
    scorer, what = resolve_model(paths, device, None if model == "latest" else model, any_device)
    from .models.adapter import TclCostModel

    base = None
    if update == "refit":
        # What refitting learns from besides the search's own measurements: the device's
        # training programs (never a held-out network's), as the model was trained on.
        base = load_program_set(paths, device)
        keep = ~np.isin(base.task_ids.astype(str), sorted(holdout_task_ids(paths)))
        base = base.subset(np.flatnonzero(keep))
    how = {"none": "frozen", "refit": "refit online",
           "residual": "prior + online residual XGBoost"}[update]
    return TclCostModel(scorer, update, base), f"{what} ({how})"


def _progress_callback(total: int, weights: dict[int, float], show: bool,
                       tuned: list[int], before: ResumeState, curve_file: Path):
    """A MetaSchedule measure callback: the tasks' best latencies as trials come in (the curve,
    each point also appended to ``curve_file`` so that a resumed run continues it) and a
    progress line with trials, the estimated network latency and the ETA. ``tuned`` maps the
    scheduler's task ids to the network's (a resumed run tunes a subset); ``before``: what the
    interrupted run had measured."""
    from tqdm import tqdm

    ms = meta_schedule()
    from tvm.ir.utils import derived_object

    from .online import run_latency   # lazy: MetaSchedule (~25 s), after meta_schedule()

    @derived_object
    class Progress(ms.measure_callback.PyMeasureCallback):
        def __init__(self):
            super().__init__()
            self.start = time.perf_counter() - before.wall_s
            self.best: dict[int, float] = dict(before.best)
            self.trials: dict[int, int] = dict(before.trials)
            self.curve: list[dict] = list(before.curve)
            self.bar = tqdm(total=total, initial=before.measured, unit="trial",
                            desc="tune", disable=not show)

        def apply(self, task_scheduler, task_id, measure_candidates, builder_results,
                  runner_results) -> None:
            task_id = tuned[task_id]
            for r in runner_results:
                latency = run_latency(r)
                if latency == latency:   # not NaN: the run succeeded
                    self.best[task_id] = min(self.best.get(task_id, np.inf), latency)
            self.trials[task_id] = self.trials.get(task_id, 0) + len(measure_candidates)
            n = sum(self.trials.values())
            # defined once every task has had its first round; a task none of whose candidates
            # ran (e.g. an embedding gather, which MetaSchedule's runner feeds random indices)
            # is left out of the sum, as it has no latency to add
            estimate = (sum(weights[t] * self.best[t] for t in weights if t in self.best) * 1e3
                        if all(t in self.trials for t in weights) else float("nan"))
            elapsed = time.perf_counter() - self.start
            self.curve.append({"trials": n, "wall_s": round(elapsed, 2),
                               "estimate_ms": estimate})
            with curve_file.open("a") as f:
                f.write(json.dumps(self.curve[-1]) + "\n")
            self.bar.update(len(measure_candidates))
            self.bar.set_postfix_str("best est. " + (f"{estimate:.2f} ms" if estimate == estimate
                                                     else f"- ({len(self.best)}/{len(weights)} tasks)"))

    return Progress()


def time_compiled(lib: Path, inst, example, device) -> tuple[list[np.ndarray], float, float,
                                                               float]:
    """(outputs, mean ms, std ms, PyTorch eager ms) of the compiled network ``lib`` and of
    PyTorch on the same cores, in a fresh process pinned to the device profile's cores."""
    m = device.measure
    spec = None if inst.source is not None else (inst.network, inst.batch, inst.size)
    with cf.ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"),
                                initializer=functools.partial(quiet_interrupts, _pin_worker,
                                                              device.num_cores)) as pool:
        return pool.submit(_measure_in_pinned_process, str(lib), [x.numpy() for x in example],
                           device.num_cores, m.number, max(m.repeat, 5), m.min_repeat_ms,
                           spec, device.framework_isa_env()).result()


def retime(paths: Paths, run_dir: str | Path) -> dict[str, float]:
    """The finished tuning run's compiled network (``network.so``) and PyTorch eager timed again,
    as the run timed them: for a quieter host than the one the run shared."""
    run_dir = Path(run_dir)
    summary_file, lib = run_dir / "summary.json", run_dir / "network.so"
    if not summary_file.exists() or not lib.exists():
        raise TclError(f"{run_dir} is not a finished tuning run (summary.json and network.so "
                       "expected)")
    summary = json.loads(summary_file.read_text())
    inst = resolve_instance(paths, summary["network"])
    device = DeviceRegistry(paths).get(summary["device"])
    _, mean, std, torch_ms = time_compiled(lib, inst, inst.example(), device)
    return {"latency_ms": mean, "latency_std_ms": std, "torch_ms": torch_ms}


def _measure_in_pinned_process(lib_file: str, inputs: list[np.ndarray], num_cores: int,
                               number: int, repeat: int, min_repeat_ms: int,
                               torch_spec: tuple | None, torch_env: dict[str, str]):
    """Runs in a fresh process pinned to the profile's cores (``runner._pin_worker``): the
    compiled network's outputs and latency, and PyTorch eager's latency on the same cores, at
    the profile's ISA (``torch_env``: ``Device.framework_isa_env``, set before PyTorch's first
    operation, when it reads them)."""
    import tvm
    from tvm import relax

    dev = tvm.cpu()
    vm = relax.VirtualMachine(tvm.runtime.load_module(lib_file), dev)
    args = [tvm.runtime.tensor(x, dev) for x in inputs]
    out = vm["main"](*args)
    outs = [np.asarray(o.numpy()) for o in (out if isinstance(out, (list, tuple)) or
                                             type(out).__name__ == "Array" else [out])]
    timer = vm.time_evaluator("main", dev, number=number, repeat=repeat,
                              min_repeat_ms=min_repeat_ms)
    res = np.asarray(timer(*args).results) * 1e3
    torch_ms = float("nan")
    if torch_spec is not None:
        os.environ.update(torch_env)
        import torch

        from .zoo.networks import NETWORKS   # lazy: torch, in the timing process only

        torch.set_num_threads(num_cores)
        name, batch, size = torch_spec
        model = NETWORKS[name].model(size)
        example = NETWORKS[name].example(batch, size)
        with torch.no_grad():
            torch_ms = median_ms(lambda: model(*example), max(repeat, 5))
    return outs, float(res.mean()), float(res.std()), torch_ms


def _reset_meta_schedule_logging() -> None:
    """Before each tuning run: drop the handlers the last run left on MetaSchedule's logger (its
    config would fail on them in a second run in one process, and they log into the last run's
    directory) and keep its console output to warnings; the full log goes to ``work/logs``."""
    import logging

    logger = logging.getLogger("tvm.s_tir.meta_schedule")
    for handler in list(logger.handlers):
        logger.removeHandler(handler)
        handler.close()
    logger.setLevel(logging.WARNING)


def tune_network(paths: Paths, network: str, device_name: str, model: str = "latest", *,
                 trials: int = 1000, update: str | None = None, seed: int = 0,
                 population: int | None = None, generations: int | None = None,
                 scheduler: str = "gradient",
                 out: str | Path | None = None, progress: bool = True,
                 any_device: bool = False) -> TuneResult:
    """Tune ``network`` for ``device_name`` with ``trials`` measured candidates, MetaSchedule's
    evolutionary search (``population`` schedules scored by the model per generation, for
    ``generations`` generations: MetaSchedule's defaults are 512 and 4) guided by ``model``
    (``any_device``: even one made for another device), tasks picked by ``scheduler``
    (``SCHEDULERS``); ``update``, ``population`` and ``generations`` left None take
    ``tuning_defaults``'."""
    import torch

    update, population, generations = tuning_defaults(model, update, population, generations)
    from .online import ScoredCostModel   # lazy: MetaSchedule costs ~25 s at import

    ms = meta_schedule()
    device = DeviceRegistry(paths).get(device_name)
    check_runnable(device)
    if device.is_remote:
        raise TclError(f"device {device_name!r} is remote: tcl tune times the compiled network "
                       "on this host, so it tunes local devices only")
    inst = resolve_instance(paths, network)
    cm, what = cost_model_for(paths, device_name, model, update, any_device)
    out = Path(out) if out else paths.tuning_dir / \
        f"{inst.key}-{device_name}-{Path(model).stem}-{update}-s{seed}"
    if scheduler not in SCHEDULERS:
        raise TclError(f"scheduler {scheduler!r}: expected one of {', '.join(SCHEDULERS)}")
    run = {"network": inst.key, "device": device_name, "model": model, "update": update,
           "seed": seed, "trials": trials, "population": population, "generations": generations,
           "scheduler": scheduler}
    resuming = _prepare_out(paths, out, device, run)
    out.mkdir(parents=True, exist_ok=True)
    with atomic_write(out / RUN_FILE, "tuning run file") as tmp:   # a torn one is no run's
        tmp.write_text(json.dumps(run) + "\n")
    torch.manual_seed(seed)
    net, example = inst.module(), inst.example()
    mod = relax_module(inst, net, example)
    target = device.tvm_target()
    # an already scheduled task has nothing to tune (tune_relax skips it too)
    tasks = [t for t in ms.relax_integration.extract_tasks(mod, target)
             if not t.mod.attrs.get("tirx.is_scheduled", False)]
    per_iter = trials_per_iter(trials, len(tasks), inst.key)
    kind = _task_scheduler(scheduler, trials, len(tasks), per_iter)
    before = resume_state(out, tasks) if resuming else ResumeState()
    # Resumed: the rest of the budget, to the tasks the interrupted run had not reached (a
    # round's measurements enter the database together when its task is joined, so a task has
    # all of its first round or none), or to every task once all had theirs
    todo = [i for i in range(len(tasks)) if i not in before.trials] or list(range(len(tasks)))
    left = trials - before.measured
    if resuming:
        import sys

        print(f"tune: resuming the interrupted run in {out}: {before.measured} of {trials} "
              f"trials measured on {len(before.trials)} of {len(tasks)} tasks; {max(0, left)} "
              f"left for {len(todo)} tasks", file=sys.stderr)
    # MetaSchedule's own models are made here as tune_tasks makes them, so they can be wrapped
    scored = ScoredCostModel(cm if not isinstance(cm, str) else ms.cost_model.CostModel.create(
        cm, num_tuning_cores=ms.utils.cpu_count(logical=False), tree_method="auto"))
    weights = {i: float(t.weight) for i, t in enumerate(tasks)}
    callback = _progress_callback(trials, weights, progress, todo, before, out / CURVE_FILE)
    (out / "database").mkdir(exist_ok=True)
    database = ms.database.JSONDatabase(work_dir=str(out / "database"))
    _reset_meta_schedule_logging()
    start = time.perf_counter()
    strategy = ms.search_strategy.EvolutionarySearch(
        population_size=population, init_min_unmeasured=min(50, population),
        genetic_num_iters=generations)
    watch = Stopwatch()
    builder, runner = timed(pooled_builder(), make_runner(device), watch)
    if left > 0:
        # what tune_relax does after extracting the tasks; every task's context is made, so
        # each keeps the random stream a run of all tasks gives it (fork_seed, in task order)
        contexts, _ = ms.relax_integration.extracted_tasks_to_tune_contexts(
            tasks, work_dir=str(out / "work"), strategy=strategy, seed=seed)
        ms.tune_tasks(
            tasks=[contexts[i] for i in todo], task_weights=[tasks[i].weight for i in todo],
            work_dir=str(out / "work"), max_trials_global=left, num_trials_per_iter=per_iter,
            builder=builder, runner=runner, database=database, cost_model=scored,
            task_scheduler=kind, measure_callbacks=[ms.measure_callback.AddToDatabase(),
                               ms.measure_callback.RemoveBuildArtifact(),
                               ms.measure_callback.UpdateCostModel(), callback])
    tune_s = time.perf_counter() - start
    callback.bar.close()
    split = time_split(tune_s, watch.build_s, watch.run_s, scored.seconds())
    scoring = {"predict_calls": scored.predict_calls, "scored": scored.scored}
    if hasattr(scored.inner, "cache"):   # the tcl adapter's feature cache
        scoring["feature_cache"] = scored.inner.cache.stats()
    online = scored.quality({task_id_of(t.dispatched[0]): float(t.weight) for t in tasks})
    start = time.perf_counter()
    executable = ms.relax_integration.compile_relax(compile_database(database), mod, target,
                                                   None)
    lib = out / "network.so"
    executable.export_library(str(lib))
    compile_s = time.perf_counter() - start

    with torch.no_grad():
        expected = net(*example)
    expected = [e.numpy() for e in (expected if isinstance(expected, (tuple, list)) else [expected])]
    got, mean, std, torch_ms = time_compiled(lib, inst, example, device)
    if len(got) != len(expected) or any(g.shape != e.shape for g, e in zip(got, expected)):
        raise TclError(f"the tuned {inst.key} returns shapes {[g.shape for g in got]}; PyTorch "
                       f"returns {[e.shape for e in expected]}")
    err = max(float(np.max(np.abs(g - e))) if g.size else 0.0 for g, e in zip(got, expected))
    for g, e in zip(got, expected):
        if not np.allclose(g, e, **TOLERANCE):
            raise TclError(f"the tuned {inst.key} differs from PyTorch by up to {err:.3g} "
                           f"(tolerance rtol {TOLERANCE['rtol']}, atol {TOLERANCE['atol']}); "
                           f"kept in {out} for inspection")
    stats = import_database(paths, out / "database", device, source="tune")
    per_task = {tasks[t].task_name: n for t, n in sorted(callback.trials.items())}
    result = TuneResult(inst.key, device_name, what, update, seed, sum(callback.trials.values()),
                        len(tasks), per_task, mean, std, torch_ms, err, round(tune_s, 1),
                        round(watch.build_s, 1), round(watch.run_s, 1), round(compile_s, 1),
                        stats.records, str(out), callback.curve, online, time_split=split,
                        scoring=scoring,
                        search={"population": population, "generations": generations,
                                "scheduler": kind},
                        resumed={"trials": before.measured, "tasks": len(before.trials),
                                 "wall_s": before.wall_s} if resuming else {})
    write_curve(result, out)
    summary = {k: v for k, v in asdict(result).items() if k != "curve"}
    (out / "summary.json").write_text(json.dumps(
        {**summary, "overhead_share": round(result.overhead_share, 4)}, indent=2) + "\n")
    return result



@dataclass
class ResumeState:
    """What an interrupted run in the same directory had done (``resume_state``): measured
    trials and best latency (s) per task (the network's task index), its curve and wall time."""

    trials: dict[int, int] = field(default_factory=dict)
    best: dict[int, float] = field(default_factory=dict)
    curve: list[dict] = field(default_factory=list)
    wall_s: float = 0.0

    @property
    def measured(self) -> int:
        return sum(self.trials.values())


def resume_state(out: Path, tasks) -> ResumeState:
    """The interrupted run's tuning records (its database, matched to ``tasks`` by the task
    module's structural hash, as MetaSchedule's database matches workloads) and curve file."""
    import tvm_ffi

    from .online import run_latency   # lazy: MetaSchedule (~25 s)

    state = ResumeState()
    if (out / CURVE_FILE).is_file():
        state.curve = [json.loads(line) for line in (out / CURVE_FILE).read_text().splitlines()
                       if line.strip()]
        state.wall_s = state.curve[-1]["wall_s"] if state.curve else 0.0
    records = out / "database" / "database_tuning_record.json"
    if not records.is_file() or not records.stat().st_size:
        return state
    index = {tvm_ffi.structural_hash(t.dispatched[0]): i for i, t in enumerate(tasks)}
    db = meta_schedule().database.JSONDatabase(work_dir=str(out / "database"))
    for rec in db.get_all_tuning_records():
        i = index.get(tvm_ffi.structural_hash(rec.workload.mod))
        if i is None:
            raise TclError(f"{out}'s database holds a task that is not one of this network's: "
                           "not the run to resume (choose another --out)")
        state.trials[i] = state.trials.get(i, 0) + 1
        latency = run_latency(rec)
        if latency == latency:
            state.best[i] = min(state.best.get(i, np.inf), latency)
    return state


def _prepare_out(paths: Paths, out: Path, device, run: dict) -> bool:
    """Whether the run resumes one interrupted in ``out``. A finished run there is refused. An
    interrupted one (no ``summary.json``) of the same parameters (``RUN_FILE``: network, device,
    model, update mode, seed, budget and search size) is continued; one of this device with
    other parameters gives its measurements to the store (source ``tune``) and is moved aside
    to ``<out>.interrupted-<n>``, and the new run starts afresh and says so. Any other
    directory (no run file: the user's own, whatever MetaSchedule log it holds; or another
    device's run) is refused, untouched."""
    if not out.exists() or not any(out.iterdir()):
        return False
    if (out / "summary.json").exists():
        raise TclError(f"{out} holds a finished tuning run: a run writes a fresh directory "
                       "(choose --out, or remove it)")
    import sys

    try:
        recorded = json.loads((out / RUN_FILE).read_text())
    except (OSError, ValueError):
        recorded = None
    if not isinstance(recorded, dict) or not {"network", "device"} <= set(recorded):
        raise TclError(f"{out} is a directory that is not a tcl tune run (it has no {RUN_FILE} "
                       "naming a run's parameters), so it is neither resumed nor imported: "
                       "choose another --out, or empty it")
    if recorded == run:
        return True
    if recorded["device"] != run["device"]:
        raise TclError(f"{out} holds an interrupted tcl tune run for device "
                       f"{recorded['device']!r}, not {run['device']!r}: its measurements are "
                       "not this device's; choose another --out, or empty it")
    added = 0
    db = out / "database"
    if (db / "database_tuning_record.json").is_file() and \
            (db / "database_tuning_record.json").stat().st_size > 0:
        added = import_database(paths, db, device, source="tune").records
    n = 1
    while out.with_name(f"{out.name}.interrupted-{n}").exists():
        n += 1
    aside = out.with_name(f"{out.name}.interrupted-{n}")
    out.rename(aside)
    print(f"tune: {out} held an interrupted run; starting over, as its parameters are not "
          f"this run's (its {added} new measurements joined the store, its files are in "
          f"{aside})", file=sys.stderr)
    return False


def write_curve(result: TuneResult, out: Path) -> None:
    import polars as pl

    frame = pl.DataFrame(result.curve, schema={"trials": pl.Int64, "wall_s": pl.Float64,
                                               "estimate_ms": pl.Float64})
    frame.write_csv(out / "curve.csv", float_precision=4)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.5))
    for ax, x in zip(axes, ("trials", "wall_s")):
        ax.plot(frame[x], frame["estimate_ms"], label="best estimate (tasks' best, weighted)")
        ax.axhline(result.latency_ms, color="k", ls="--", lw=1, label="compiled, end to end")
        if result.torch_ms == result.torch_ms:
            ax.axhline(result.torch_ms, color="r", ls=":", lw=1, label="PyTorch eager")
        ax.set_xlabel(x)
        ax.set_ylabel("ms")
        ax.set_yscale("log")
    axes[0].legend(fontsize=7)
    fig.suptitle(f"{result.network} on {result.device}: {result.model}", fontsize=9)
    fig.tight_layout()
    fig.savefig(out / "curve.png", dpi=100)
    plt.close(fig)
