"""``tune_network``: one ``tcl tune`` run from start to end, and the cost model it searches with
(``cost_model_for``).

The search is MetaSchedule's own (what ``relax_integration.tune_relax`` runs: task extraction,
``tune_tasks`` with the gradient task scheduler and evolutionary search, the builder and runner
tcl measures with; tcl calls its two steps itself so that a run can resume: ``resume``); only
the cost model changes: a tcl model through the ``PyCostModel`` adapter
(``tcl.models.adapter``), frozen (``update="none"``), refit on what the search measures
(``"refit"``) or kept as a prior that an online XGBoost corrects on its residual
(``"residual"``: ``tcl.models.residual``, the default: ``plan.tuning_defaults``); MetaSchedule's
XGBoost trained online from scratch (``xgb-online``), or its random model (``random``, the
floor). ``MetaScheduleTuneIRMod`` is not used: it ignores a custom cost model.

Outputs under ``out``: ``network.so`` (``export_library``), ``database/`` (the MetaSchedule
JSONDatabase), ``curve.csv`` / ``curve.png`` (``curve``), ``summary.json`` (the
``TuneResult`` but its curve, with ``online``: the model's pairwise accuracy and top-1 on the
candidates the search measured, per task and weighted like the network, as each round's model
scored them and as the final model does: ``tcl.online``; and ``time_split``: where the tuning
wall time went, ``timing.time_split``), and ``run.json`` / ``curve.jsonl`` for a resume. The
tuning records join the store with source ``tune``, so tuning logs become training data.
"""
from __future__ import annotations

import json
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..config import Paths, TclError, atomic_write, write_text
from ..dataset import program_set, training_records, tune_source
from ..measure.msjson import import_database
from ..measure.devices import create
from ..measure.devices.base import stop_runner
from ..measure.timed import Stopwatch, timed
from ..models.base import ProgramSet
from ..progress import Progress
from ..resolve import resolve_model
from ..store.devices import Device
from ..store.records import task_id_of
from ..tvm_compat import meta_schedule, reset_meta_schedule_logging
from .choices import choose, chosen_lines
from .curve import progress_callback, write_curve
from .layout import (compile_network, describe, network_module, run_suffix,
                     tunable_tasks)
from .plan import (ONLINE, SCHEDULERS, plan_tuning, resolve_instance, task_scheduler,
                   trials_per_iter, tunable_device, tuning_defaults)
from .result import TuneResult
from .resume import CURVE_FILE, RUN_FILE, ResumeState, prepare_out, resume_state
from .timing import Timed, time_compiled, time_split
from .winograd import check_compilable

TOLERANCE = {"rtol": 1e-3, "atol": 1e-3}             # tuned outputs against PyTorch's, fp32


def refit_base(paths: Paths, device: str, sources: Sequence[str] | None = None) -> ProgramSet:
    """What ``--update refit`` learns from besides the search's own measurements: the device's
    training records (``sources``: params ``train.sources``, None: every record; never a
    held-out network's task), the records its models were trained on."""
    return program_set(paths, training_records(paths, device, sources))


def cost_model_for(paths: Paths, device: str, model: str, update: str,
                   any_device: bool = False, sources: Sequence[str] | None = None):
    """(what tune_relax takes as cost_model, a description); ``any_device``: accept a model
    made for another device (``resolve.check_model_device``); ``sources``: ``refit_base``'s."""
    if model in ONLINE:
        if update != "none":
            raise TclError(f"--update applies to tcl's models; {model} is MetaSchedule's own "
                           "(xgb-online always learns online)")
        return ONLINE[model], f"MetaSchedule {ONLINE[model]} (online, from scratch)"

    # the model first: a refused one costs no MetaSchedule import (lazy: the adapter's, ~23 s)
    found = resolve_model(paths, device, model, any_device=any_device)
    from ..models.adapter import TclCostModel

    base = refit_base(paths, device, sources) if update == "refit" else None
    how = {"none": "frozen", "refit": "refit online",
           "residual": "prior + online residual XGBoost"}[update]
    return TclCostModel(found.model, update, base), f"{found.what} ({how})"


def tune_network(paths: Paths, network: str, device_name: str, model: str = "latest", *,
                 trials: int = 1000, update: str | None = None, seed: int = 0,
                 population: int | None = None, generations: int | None = None,
                 scheduler: str = "gradient", layout: str = "nchw", fast_math: bool = False,
                 fuse: bool = True, conv: str = "direct", out: str | Path | None = None,
                 progress: bool = True, any_device: bool = False,
                 set_aside: bool | None = None,
                 sources: Sequence[str] | None = None) -> TuneResult:
    """Tune ``network`` for ``device_name`` with ``trials`` measured candidates, MetaSchedule's
    evolutionary search (``population`` schedules scored by the model per generation, for
    ``generations`` generations: MetaSchedule's defaults are 512 and 4) guided by ``model``
    (``any_device``: even one made for another device), tasks picked by ``scheduler``
    (``SCHEDULERS``); ``update``, ``population`` and ``generations`` left None take
    ``tuning_defaults``'; the network laid out and compiled as ``layout`` says, with
    ``fast_math`` its approximations, unfused if not ``fuse`` (``tcl.tune.layout``), its
    stride-1 3x3 convolutions by ``conv``'s algorithm (``tcl.tune.winograd``). ``out``:
    the run's directory (default: one under the data root's ``tuning/`` named by network,
    device, model, update mode and seed, and the compile choices but the defaults:
    ``run_suffix``). An interrupted run of this device with other parameters found there is
    moved aside (``set_aside``: its records join the store, and this run starts over) or
    refused; None: moved aside from the default directory, refused from one the caller named
    (``tcl tune --out``: ``resume.prepare_out``). ``sources``: the records a refit learns
    from (``refit_base``).

    Four steps: ``prepare`` (the run settled, its directory and tasks), ``search`` (MetaSchedule
    measures the trials), ``verify`` (the network compiled, checked against PyTorch and timed)
    and ``finish`` (the records stored, the summary written)."""
    run = prepare(paths, network, device_name, model, trials=trials, update=update, seed=seed,
                  population=population, generations=generations, scheduler=scheduler,
                  layout=layout, fast_math=fast_math, fuse=fuse, conv=conv, out=out,
                  progress=progress, any_device=any_device, set_aside=set_aside,
                  sources=sources)
    searched = search(run)
    return finish(run, searched, verify(run))


@dataclass
class Prepared:
    """A run settled, its directory written and its tasks extracted (``prepare``): what the
    search, the check and the summary work from."""

    paths: Paths
    inst: Any                  # the network instance (``resolve_instance``)
    device: Device
    settings: dict             # RUN_FILE's: what a resume must find the same
    layout: str
    fast_math: bool
    fuse: bool
    conv: str
    what: str                  # the cost model, in words
    out: Path
    resuming: bool
    net: Any                   # the PyTorch module, and its example inputs
    example: Any
    target: Any
    mod: Any                   # the Relax module tuned and compiled
    tasks: list
    per_iter: int              # trials per task per round
    scheduler: str             # MetaSchedule's task scheduler (``task_scheduler``)
    before: ResumeState        # what an interrupted run here had measured
    todo: list[int]            # the tasks this process tunes
    left: int                  # the trials left to measure
    scored: Any                # the cost model, counting its seconds (``ScoredCostModel``)
    callback: Any              # the progress callback (``progress_callback``)
    database: Any              # MetaSchedule's JSONDatabase in ``out``
    chosen: tuple[str, ...]    # why each compile choice made for the user (tcl.tune.choices)


@dataclass
class Searched:
    """What the search did (``search``): its wall time and where it went."""

    tune_s: float
    watch: Stopwatch           # building and running, as the timed builder and runner counted
    split: dict                # ``time_split``
    scoring: dict
    online: dict               # the model's quality on what the search measured (tcl.online)


@dataclass
class Verified:
    """The compiled network (``verify``): its compile time, its time and the frameworks', and
    its largest difference from PyTorch."""

    compile_s: float
    timed: Timed
    max_abs_err: float


def prepare(paths: Paths, network: str, device_name: str, model: str, *, trials: int,
            update: str | None, seed: int, population: int | None, generations: int | None,
            scheduler: str, layout: str, fast_math: bool, fuse: bool, conv: str,
            out: str | Path | None,
            progress: bool, any_device: bool, set_aside: bool | None,
            sources: Sequence[str] | None = None) -> Prepared:
    """``tune_network``'s first step, with its arguments (their defaults are its): the settings
    checked and the model's defaults filled in, the run's directory made (or an interrupted run
    there resumed: ``resume.prepare_out``) with its run file, the network extracted into tasks,
    and the cost model, progress callback and database the search uses."""
    import torch

    update, population, generations = tuning_defaults(model, update, population, generations)
    from ..online import ScoredCostModel   # lazy: MetaSchedule costs ~25 s at import

    ms = meta_schedule()
    device = tunable_device(paths, device_name)
    inst = resolve_instance(paths, network)
    chosen = choose(paths, inst.key, layout, conv)
    layout, conv = chosen.layout, check_compilable(chosen.conv)
    for line in chosen_lines(chosen.reasons):   # said once, with the result's lines
        print(f"tune: {line}")
    cm, what = cost_model_for(paths, device_name, model, update, any_device, sources)
    set_aside = not out if set_aside is None else set_aside
    # the defaults add nothing, so the directories of earlier runs keep their names
    out = Path(out) if out else paths.tuning_dir / (f"{inst.key}-{device_name}-"
        f"{Path(model).stem}-{update}-s{seed}{run_suffix(layout, fast_math, fuse, conv)}")
    if scheduler not in SCHEDULERS:
        raise TclError(f"scheduler {scheduler!r}: expected one of {', '.join(SCHEDULERS)}")
    run = {"network": inst.key, "device": device_name, "model": model, "update": update,
           "seed": seed, "trials": trials, "population": population, "generations": generations,
           "scheduler": scheduler}
    if layout != "nchw":   # absent from the default's, so its earlier runs still resume
        run["layout"] = layout
    if fast_math:
        run["fast_math"] = True
    if not fuse:
        run["fuse"] = False
    if conv != "direct":
        run["conv"] = conv
    resuming = prepare_out(paths, out, device, run, set_aside)
    out.mkdir(parents=True, exist_ok=True)
    with atomic_write(out / RUN_FILE, "tuning run file") as tmp:   # a torn one is no run's
        tmp.write_text(json.dumps(run) + "\n")
    torch.manual_seed(seed)
    net, example = inst.module(), inst.example()
    target = device.tvm_target()
    mod = network_module(inst, net, example, layout, target, fast_math, fuse, conv)
    tasks = tunable_tasks(mod, target)
    per_iter = trials_per_iter(trials, len(tasks), inst.key)
    kind = task_scheduler(scheduler, trials, len(tasks), per_iter)
    before = resume_state(out, tasks) if resuming else ResumeState()
    # Resumed: the rest of the budget, to the tasks the interrupted run had not reached (a
    # round's measurements enter the database together when its task is joined, so a task has
    # all of its first round or none), or to every task once all had theirs
    todo = [i for i in range(len(tasks)) if i not in before.trials] or list(range(len(tasks)))
    left = trials - before.measured
    if resuming:
        print(f"tune: resuming the interrupted run in {out}: {before.measured} of {trials} "
              f"trials measured on {len(before.trials)} of {len(tasks)} tasks; {max(0, left)} "
              f"left for {len(todo)} tasks", file=sys.stderr)
    # MetaSchedule's own models are made here as tune_tasks makes them, so they can be wrapped
    scored = ScoredCostModel(cm if not isinstance(cm, str) else ms.cost_model.CostModel.create(
        cm, num_tuning_cores=ms.utils.cpu_count(logical=False), tree_method="auto"))
    weights = {i: float(t.weight) for i, t in enumerate(tasks)}
    try:   # the dry run's estimate, for the first results to be held against
        plan = plan_tuning(paths, network, device_name, model, trials=trials,
                           population=population, generations=generations, layout=layout,
                           fast_math=fast_math, fuse=fuse, conv=conv, scheduler=scheduler)
        planned = plan.trials / plan.eta_s if plan.eta_s > 0 else None
    except TclError:   # a plan the zoo's tables cannot make (the run's own tasks differ)
        planned = None
    callback = progress_callback(trials, weights, progress, todo, before, out / CURVE_FILE,
                                 planned_rate=planned)
    (out / "database").mkdir(exist_ok=True)
    database = ms.database.JSONDatabase(work_dir=str(out / "database"))
    return Prepared(paths, inst, device, run, layout, fast_math, fuse, conv, what, out,
                    resuming, net, example, target, mod, tasks, per_iter, kind, before, todo,
                    left, scored, callback, database, chosen.reasons)


def search(run: Prepared) -> Searched:
    """``tune_network``'s second step: MetaSchedule's search measures the trials left on the
    device's builder and runner (timed: ``Stopwatch``), then stops their workers, on a Ctrl-C
    too."""
    ms = meta_schedule()
    population, generations = run.settings["population"], run.settings["generations"]
    reset_meta_schedule_logging()
    start = time.perf_counter()
    strategy = ms.search_strategy.EvolutionarySearch(
        population_size=population, init_min_unmeasured=min(50, population),
        genetic_num_iters=generations)
    watch = Stopwatch(on_built=run.callback.built)
    kind = create(run.device)
    pool_builder, local_runner = kind.builder(pooled=True), kind.runner()
    builder, runner = timed(pool_builder, local_runner, watch)
    tasks, todo, work = run.tasks, run.todo, str(run.out / "work")
    try:
        if run.left > 0:
            # what tune_relax does after extracting the tasks; every task's context is made, so
            # each keeps the random stream a run of all tasks gives it (fork_seed, in task order)
            contexts, _ = ms.relax_integration.extracted_tasks_to_tune_contexts(
                tasks, work_dir=work, strategy=strategy, seed=run.settings["seed"])
            ms.tune_tasks(
                tasks=[contexts[i] for i in todo], task_weights=[tasks[i].weight for i in todo],
                work_dir=work, max_trials_global=run.left, num_trials_per_iter=run.per_iter,
                builder=builder, runner=runner, database=run.database, cost_model=run.scored,
                task_scheduler=run.scheduler,
                measure_callbacks=[ms.measure_callback.AddToDatabase(),
                                   ms.measure_callback.RemoveBuildArtifact(),
                                   ms.measure_callback.UpdateCostModel(), run.callback])
        tune_s = time.perf_counter() - start
    finally:
        # the workers stop here, on a Ctrl-C too: quietly, and before compiling needs the cores
        try:
            pool_builder.close()
        finally:
            stop_runner(local_runner)
    run.callback.close()
    scored = run.scored
    split = time_split(tune_s, watch.build_s, watch.run_s, scored.seconds())
    scoring = {"predict_calls": scored.predict_calls, "scored": scored.scored}
    if hasattr(scored.inner, "cache"):   # the tcl adapter's feature cache
        scoring["feature_cache"] = scored.inner.cache.stats()
    online = scored.quality({task_id_of(t.dispatched[0]): float(t.weight) for t in tasks})
    return Searched(tune_s, watch, split, scoring, online)


def verify(run: Prepared) -> Verified:
    """``tune_network``'s third step: the network compiled with the tuned database
    (``network.so``), its outputs checked against PyTorch's (``TOLERANCE``: a TclError, the
    directory kept, when they differ) and timed beside the frameworks (``time_compiled``)."""
    import torch

    inst, out = run.inst, run.out
    start = time.perf_counter()
    with Progress(f"tune {inst.key}: compile", 1, unit="networks"):
        executable = compile_network(run.database, run.mod, run.target, run.layout, run.fuse)
        lib = out / "network.so"
        with atomic_write(lib, "compiled network") as tmp:   # its suffix: TVM's format
            executable.export_library(str(tmp))
    compile_s = time.perf_counter() - start

    with torch.no_grad():
        expected = run.net(*run.example)
    if not isinstance(expected, (tuple, list)):
        expected = [expected]
    expected = [e.numpy() for e in expected]
    timed_ = time_compiled(lib, inst, run.example, run.device, onnxruntime=True)
    got = timed_.outputs
    if len(got) != len(expected) or any(g.shape != e.shape for g, e in zip(got, expected)):
        raise TclError(f"the tuned {inst.key} returns shapes {[g.shape for g in got]}; PyTorch "
                       f"returns {[e.shape for e in expected]}")
    err = max(float(np.max(np.abs(g - e))) if g.size else 0.0 for g, e in zip(got, expected))
    for g, e in zip(got, expected):
        if not np.allclose(g, e, **TOLERANCE):
            raise TclError(f"the tuned {inst.key} differs from PyTorch by up to {err:.3g} "
                           f"(tolerance rtol {TOLERANCE['rtol']}, atol {TOLERANCE['atol']}); "
                           f"kept in {out} for inspection")
    return Verified(compile_s, timed_, err)


def finish(run: Prepared, searched: Searched, verified: Verified) -> TuneResult:
    """``tune_network``'s last step: the tuning records imported into the store (source
    ``tune``), the result made and its curve and ``summary.json`` written."""
    paths, inst, out, settings = run.paths, run.inst, run.out, run.settings
    stats = import_database(paths, out / "database", run.device,
                            source=tune_source(inst.key))
    callback, before, watch, t = run.callback, run.before, searched.watch, verified.timed
    per_task = {run.tasks[i].task_name: n for i, n in sorted(callback.trials.items())}
    result = TuneResult(inst.key, settings["device"], run.what, settings["update"],
                        settings["seed"], sum(callback.trials.values()), len(run.tasks), per_task,
                        t.mean_ms, t.std_ms, t.torch_ms, verified.max_abs_err,
                        round(searched.tune_s, 1), round(watch.build_s, 1),
                        round(watch.run_s, 1), round(verified.compile_s, 1), stats.records,
                        str(out), callback.curve, searched.online, time_split=searched.split,
                        scoring=searched.scoring,
                        search={"population": settings["population"],
                                "generations": settings["generations"],
                                "scheduler": run.scheduler},
                        resumed={"trials": before.measured, "tasks": len(before.trials),
                                 "wall_s": before.wall_s} if run.resuming else {},
                        onnxruntime_ms=t.onnxruntime_ms,
                        compile={**describe(run.layout, run.target, run.fast_math,
                                                  run.fuse, run.conv),
                                 **({"chosen": list(run.chosen)} if run.chosen else {})})
    write_curve(result, out)
    summary = {k: v for k, v in asdict(result).items() if k != "curve"}
    write_text(out / "summary.json", json.dumps(
        {**summary, "overhead_share": round(result.overhead_share, 4)}, indent=2) + "\n",
        "tuning summary")
    return result
