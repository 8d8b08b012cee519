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
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np

from ..config import Paths, TclError, atomic_write, write_text
from ..dataset import load_program_set, tune_source
from ..measure.msjson import import_database
from ..measure.pooled_builder import pooled_builder
from ..measure.runner import make_runner, stop_runner
from ..measure.timed import Stopwatch, timed
from ..progress import Progress
from ..registry import resolve_model
from ..store.records import task_id_of
from ..train import holdout_task_ids
from ..tvm_compat import meta_schedule
from .curve import progress_callback, write_curve
from .layout import (check_layout, compile_network, describe, network_module, run_suffix,
                     tunable_tasks)
from .plan import (ONLINE, SCHEDULERS, plan_tuning, resolve_instance, task_scheduler,
                   trials_per_iter, tunable_device, tuning_defaults)
from .result import TuneResult
from .resume import CURVE_FILE, RUN_FILE, ResumeState, prepare_out, resume_state
from .timing import time_compiled, time_split

TOLERANCE = {"rtol": 1e-3, "atol": 1e-3}             # tuned outputs against PyTorch's, fp32


def cost_model_for(paths: Paths, device: str, model: str, update: str,
                   any_device: bool = False):
    """(what tune_relax takes as cost_model, a description); ``any_device``: accept a model
    made for another device (``registry.check_model_device``)."""
    if model in ONLINE:
        if update != "none":
            raise TclError(f"--update applies to tcl's models; {model} is MetaSchedule's own "
                           "(xgb-online always learns online)")
        return ONLINE[model], f"MetaSchedule {ONLINE[model]} (online, from scratch)"

    # the model first: a refused one costs no MetaSchedule import (lazy: the adapter's, ~23 s)
    found = resolve_model(paths, device, model, any_device=any_device)
    from ..models.adapter import TclCostModel

    base = None
    if update == "refit":
        # What refitting learns from besides the search's own measurements: the device's
        # training programs (never a held-out network's), as the model was trained on.
        base = load_program_set(paths, device)
        keep = ~np.isin(base.task_ids.astype(str), sorted(holdout_task_ids(paths)))
        base = base.subset(np.flatnonzero(keep))
    how = {"none": "frozen", "refit": "refit online",
           "residual": "prior + online residual XGBoost"}[update]
    return TclCostModel(found.model, update, base), f"{found.what} ({how})"


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
                 scheduler: str = "gradient", layout: str = "nchw", fast_math: bool = False,
                 fuse: bool = True, out: str | Path | None = None, progress: bool = True,
                 any_device: bool = False, set_aside: bool | None = None) -> TuneResult:
    """Tune ``network`` for ``device_name`` with ``trials`` measured candidates, MetaSchedule's
    evolutionary search (``population`` schedules scored by the model per generation, for
    ``generations`` generations: MetaSchedule's defaults are 512 and 4) guided by ``model``
    (``any_device``: even one made for another device), tasks picked by ``scheduler``
    (``SCHEDULERS``); ``update``, ``population`` and ``generations`` left None take
    ``tuning_defaults``'; the network laid out and compiled as ``layout`` says, with
    ``fast_math`` its approximations, unfused if not ``fuse`` (``tcl.tune.layout``). ``out``:
    the run's directory (default: one under the data root's ``tuning/`` named by network,
    device, model, update mode and seed, and the compile choices but the defaults:
    ``run_suffix``). An interrupted run of this device with other parameters found there is
    moved aside (``set_aside``: its records join the store, and this run starts over) or
    refused; None: moved aside from the default directory, refused from one the caller named
    (``tcl tune --out``: ``resume.prepare_out``)."""
    import torch

    update, population, generations = tuning_defaults(model, update, population, generations)
    from ..online import ScoredCostModel   # lazy: MetaSchedule costs ~25 s at import

    ms = meta_schedule()
    device = tunable_device(paths, device_name)
    inst = resolve_instance(paths, network)
    check_layout(layout)
    cm, what = cost_model_for(paths, device_name, model, update, any_device)
    set_aside = not out if set_aside is None else set_aside
    # the defaults add nothing, so the directories of earlier runs keep their names
    out = Path(out) if out else paths.tuning_dir / (f"{inst.key}-{device_name}-"
        f"{Path(model).stem}-{update}-s{seed}{run_suffix(layout, fast_math, fuse)}")
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
    resuming = prepare_out(paths, out, device, run, set_aside)
    out.mkdir(parents=True, exist_ok=True)
    with atomic_write(out / RUN_FILE, "tuning run file") as tmp:   # a torn one is no run's
        tmp.write_text(json.dumps(run) + "\n")
    torch.manual_seed(seed)
    net, example = inst.module(), inst.example()
    target = device.tvm_target()
    mod = network_module(inst, net, example, layout, target, fast_math, fuse)
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
        import sys

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
                           fast_math=fast_math, fuse=fuse, scheduler=scheduler)
        planned = plan.trials / plan.eta_s if plan.eta_s > 0 else None
    except TclError:   # a plan the zoo's tables cannot make (the run's own tasks differ)
        planned = None
    callback = progress_callback(trials, weights, progress, todo, before, out / CURVE_FILE,
                                 planned_rate=planned)
    (out / "database").mkdir(exist_ok=True)
    database = ms.database.JSONDatabase(work_dir=str(out / "database"))
    _reset_meta_schedule_logging()
    start = time.perf_counter()
    strategy = ms.search_strategy.EvolutionarySearch(
        population_size=population, init_min_unmeasured=min(50, population),
        genetic_num_iters=generations)
    watch = Stopwatch(on_built=callback.built)
    pool_builder, local_runner = pooled_builder(), make_runner(device)
    builder, runner = timed(pool_builder, local_runner, watch)
    try:
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
    finally:
        # the workers stop here, on a Ctrl-C too: quietly, and before compiling needs the cores
        try:
            pool_builder.close()
        finally:
            stop_runner(local_runner)
    callback.close()
    split = time_split(tune_s, watch.build_s, watch.run_s, scored.seconds())
    scoring = {"predict_calls": scored.predict_calls, "scored": scored.scored}
    if hasattr(scored.inner, "cache"):   # the tcl adapter's feature cache
        scoring["feature_cache"] = scored.inner.cache.stats()
    online = scored.quality({task_id_of(t.dispatched[0]): float(t.weight) for t in tasks})
    start = time.perf_counter()
    with Progress(f"tune {inst.key}: compile", 1, unit="networks"):
        executable = compile_network(database, mod, target, layout, fuse)
        lib = out / "network.so"
        with atomic_write(lib, "compiled network") as tmp:   # its suffix: TVM's format
            executable.export_library(str(tmp))
    compile_s = time.perf_counter() - start

    with torch.no_grad():
        expected = net(*example)
    expected = [e.numpy() for e in (expected if isinstance(expected, (tuple, list)) else [expected])]
    got, mean, std, torch_ms, ort_ms = time_compiled(lib, inst, example, device,
                                                     onnxruntime=True)
    if len(got) != len(expected) or any(g.shape != e.shape for g, e in zip(got, expected)):
        raise TclError(f"the tuned {inst.key} returns shapes {[g.shape for g in got]}; PyTorch "
                       f"returns {[e.shape for e in expected]}")
    err = max(float(np.max(np.abs(g - e))) if g.size else 0.0 for g, e in zip(got, expected))
    for g, e in zip(got, expected):
        if not np.allclose(g, e, **TOLERANCE):
            raise TclError(f"the tuned {inst.key} differs from PyTorch by up to {err:.3g} "
                           f"(tolerance rtol {TOLERANCE['rtol']}, atol {TOLERANCE['atol']}); "
                           f"kept in {out} for inspection")
    stats = import_database(paths, out / "database", device, source=tune_source(inst.key))
    per_task = {tasks[t].task_name: n for t, n in sorted(callback.trials.items())}
    result = TuneResult(inst.key, device_name, what, update, seed, sum(callback.trials.values()),
                        len(tasks), per_task, mean, std, torch_ms, err, round(tune_s, 1),
                        round(watch.build_s, 1), round(watch.run_s, 1), round(compile_s, 1),
                        stats.records, str(out), callback.curve, online, time_split=split,
                        scoring=scoring,
                        search={"population": population, "generations": generations,
                                "scheduler": kind},
                        resumed={"trials": before.measured, "tasks": len(before.trials),
                                 "wall_s": before.wall_s} if resuming else {},
                        onnxruntime_ms=ort_ms, compile=describe(layout, target, fast_math, fuse))
    write_curve(result, out)
    summary = {k: v for k, v in asdict(result).items() if k != "curve"}
    write_text(out / "summary.json", json.dumps(
        {**summary, "overhead_share": round(result.overhead_share, 4)}, indent=2) + "\n",
        "tuning summary")
    return result
