"""Where a tuned network's time goes, against the estimate (issue 26, point 1): for finished
``tcl tune`` run directories, the compiled network's time per task next to the task's best
measured latency in the run's database.

For each RUN_DIR (what ``tcl tune`` wrote: ``summary.json``, ``database/``, ``curve.csv``) the
network is extracted and compiled with the run's database as ``tcl tune`` does
(``tcl.tune.layout.network_module`` in the run's layout and math: fused runs in nchw or nchwc,
``tcl.tvm_compat.compile_database``), through a database view
that records which fused functions the compile looked up and whether a tuned record was found
(cause (b): a record that does not apply); kernels map to tasks by structural hash. Each task's
best record is also built as the tuning's builder built it (``tcl.measure.builder``) and measured
again by ``tcl tune``'s runner (the device's ``DeviceKind.runner``). The compiled network then
runs where ``tcl tune`` times it (the device's ``DeviceKind.timer``: a fresh pinned process):

- end to end with ``tcl.tune.measure_in_pinned_process`` (the timer ``tcl tune`` uses), and as
  the median of plain runs alternating with the profiled ones (both see the same load);
- under a VM instrument that times every call (TVM 0.27's Relax VM has no ``profile=True``:
  ``VirtualMachine.set_instrument`` is called before and after each call instruction), median
  over ``--repeats`` runs per call site;
- each kernel alone (``ALONE``): the best record as tuning built it, and the network's own
  kernel on the runner's random inputs (warm, back to back: what the runner does), on the inputs
  it gets in the network, and on those with the caches flushed before each single call.

One table per run: per task, its kernel(s), whether each got the tuned record, weight, calls in
the profile, the database's best x weight (the estimate's share), the alone timings x calls, the
time in the network, network / estimate and network / alone; then the kernels outside every
task, the VM's builtins, the VM's own overhead (end to end minus every timed call) and the
totals against ``summary.json``'s latency and the curve's final estimate. ``--json FILE`` keeps
the measurements. Reads the run directory only (its database is opened from a copy).

    python benchmarks/network_gap.py --data data data/tuning/resnet18-b1-224-cpu-sse42-... [...]
"""
from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

import numpy as np
import polars as pl

from _common import report_errors
from tcl.config import Paths, TclError, atomic_write

BUILTIN = "vm.builtin."   # the Relax VM's own calls (allocation, shape checks, tuples)


# -- the run directory --------------------------------------------------------------------------
def load_run(run_dir: Path) -> dict:
    """``summary.json`` of a finished ``tcl tune`` run, with the curve's final estimate (ms)."""
    summary_file = run_dir / "summary.json"
    if not summary_file.is_file() or not (run_dir / "database").is_dir():
        raise TclError(f"{run_dir} is not a finished tcl tune run: expected summary.json and "
                       "database/ (a run without summary.json was interrupted)")
    try:
        summary = json.loads(summary_file.read_text())
        for key in ("network", "device", "seed", "latency_ms"):
            summary[key]
    except (ValueError, KeyError) as e:
        raise TclError(f"{summary_file}: not a tcl tune summary ({e})") from e
    from tcl.tune.layout import compile_choices, compiled_by_compile_relax

    # it recompiles the run's module through compile_relax, with a view of the database that
    # records each lookup: what tcl tune does for a fused run in nchw or nchwc; prepack and
    # unfused runs apply their kernels before compiling, and no Winograd run is ever compiled
    choices = compile_choices(summary)
    if not compiled_by_compile_relax(choices["layout"], choices["fuse"]) or \
            choices["conv"] != "direct":
        raise TclError(f"{run_dir} was tuned with {choices}: this script reads fused runs of "
                       "direct convolutions in nchw or nchwc only")
    summary["choices"] = choices
    estimate = math.nan
    if (run_dir / "curve.csv").is_file():
        curve = pl.read_csv(run_dir / "curve.csv")["estimate_ms"].drop_nans().drop_nulls()
        estimate = float(curve[-1]) if len(curve) else math.nan
    return {**summary, "estimate_ms": estimate}


# -- the pure part: profile rows to tasks, and the totals ----------------------------------------
def median_calls(runs: list[list[tuple[str, float]]]) -> list[tuple[str, float]]:
    """One (name, ms) per call site: the median over runs of the same call sequence."""
    if not runs:
        raise TclError("no profiled runs")
    names = [n for n, _ in runs[0]]
    if any([n for n, _ in r] != names for r in runs):
        raise TclError("the profiled runs called different functions: the VM's call sequence "
                       "is expected to be the same every run")
    return [(name, statistics.median(r[i][1] for r in runs)) for i, name in enumerate(names)]


def attribute(calls: list[tuple[str, float]], kernel_task: dict[str, str],
              tasks: dict[str, dict], alone_ms: dict[str, dict[str, float]],
              end_to_end_ms: float) -> dict:
    """The gap table's numbers. ``calls``: (function name, ms) per call site of one run;
    ``kernel_task``: compiled kernel name -> task name (kernels of no task are absent);
    ``tasks``: task name -> {"weight", "best_ms" (the database's best, NaN if none ran),
    "tuned": kernels that got the tuned schedule, "kernels": every kernel of the task};
    ``alone_ms``: kernel -> {mode: ms of one call alone}; ``end_to_end_ms``: the uninstrumented
    network. Returns {"tasks": [...], "outside": [...], "builtins": {...}, "totals": {...}}."""
    per_kernel: dict[str, list[float]] = {}
    builtin_ms, builtin_calls = 0.0, 0
    for name, ms in calls:
        if name.startswith(BUILTIN):
            builtin_ms += ms
            builtin_calls += 1
        else:
            per_kernel.setdefault(name, []).append(ms)
    modes = sorted({m for v in alone_ms.values() for m in v})

    def alone(kernels: list[str]) -> dict[str, float]:
        return {m: sum(alone_ms.get(k, {}).get(m, math.nan) * len(per_kernel.get(k, []))
                       for k in kernels) for m in modes}

    rows = []
    for task, info in tasks.items():
        kernels = sorted(k for k, t in kernel_task.items() if t == task and k in per_kernel)
        calls_n = sum(len(per_kernel[k]) for k in kernels)
        network_ms = sum(sum(per_kernel[k]) for k in kernels)
        estimate = info["weight"] * info["best_ms"]
        rows.append({"task": task, "kernels": kernels, "weight": info["weight"],
                     "calls": calls_n, "tuned": f"{len(info['tuned'])}/{len(info['kernels'])}",
                     "best_ms": info["best_ms"], "estimate_ms": estimate,
                     "alone_ms": alone(kernels), "network_ms": network_ms,
                     "ratio": network_ms / estimate if estimate > 0 else math.nan,
                     "ratio_alone": _ratio(network_ms, alone(kernels).get("runner", math.nan))})
    outside = [{"kernel": k, "calls": len(v), "network_ms": sum(v), "alone_ms": alone([k])}
               for k, v in per_kernel.items() if k not in kernel_task]
    timed = sum(ms for _, ms in calls)
    in_tasks = sum(r["network_ms"] for r in rows)
    estimate = sum(r["estimate_ms"] for r in rows if r["estimate_ms"] == r["estimate_ms"])
    totals = {"estimate_ms": estimate, "tasks_network_ms": in_tasks,
              "outside_ms": sum(r["network_ms"] for r in outside), "builtins_ms": builtin_ms,
              "vm_overhead_ms": end_to_end_ms - timed, "end_to_end_ms": end_to_end_ms,
              # kernels not timed alone in a mode (a gather on random indices) are left out
              "tasks_alone_ms": {m: sum(r["alone_ms"][m] for r in rows
                                        if r["alone_ms"][m] == r["alone_ms"][m]) for m in modes},
              "tuned_tasks": sum(1 for t in tasks.values()
                                 if t["kernels"] and len(t["tuned"]) == len(t["kernels"])),
              "tasks": len(tasks)}
    return {"tasks": rows, "outside": outside,
            "builtins": {"calls": builtin_calls, "network_ms": builtin_ms}, "totals": totals}


def _ratio(a: float, b: float) -> float:
    return a / b if b > 0 else math.nan


# how each kernel is timed alone, in the order of the table's columns (ms of one call)
ALONE = {"remeasured": "tune's runner again",           # the best record, as tuning measured
         "built": "best record built as tuned",          # the same program, in this process
         "runner": "network's kernel, random inputs",   # the compiled kernel, like the runner
         "inputs": "network's kernel, its inputs",      # ... on what it gets in the network
         "flushed": "its inputs, caches flushed"}       # ... one call after a cache flush


def format_table(run: dict, table: dict) -> str:
    """The gap table as Markdown, with the totals against the run's summary."""
    def f(x: float) -> str:
        return "-" if x != x else f"{x:.2f}"

    def row(cells: list) -> str:
        return "| " + " | ".join(map(str, cells)) + " |"

    t, b = table["totals"], table["builtins"]
    modes = [m for m in ALONE if m in t["tasks_alone_ms"]]
    dash = ["-"] * len(modes)
    head = (["task", "kernels", "tuned", "weight", "calls", "best ms", "best x weight"]
            + [f"{ALONE[m]} x calls" for m in modes]
            + ["in network", "network / estimate", "network / alone"])
    lines = [row(head), "|" + "---|" * len(head)]
    for r in sorted(table["tasks"], key=lambda r: -r["network_ms"]):
        lines.append(row([r["task"], ", ".join(r["kernels"]) or "(none called)", r["tuned"],
                          r["weight"], r["calls"], f(r["best_ms"]), f(r["estimate_ms"])]
                         + [f(r["alone_ms"][m]) for m in modes]
                         + [f(r["network_ms"]), f(r["ratio"]), f(r["ratio_alone"])]))
    for r in table["outside"]:
        lines.append(row(["(no task)", r["kernel"], "-", "-", r["calls"], "-", "-"]
                         + [f(r["alone_ms"][m]) for m in modes]
                         + [f(r["network_ms"]), "-",
                            f(_ratio(r["network_ms"], r["alone_ms"].get("runner", math.nan)))]))
    lines.append(row(["(VM builtins)", BUILTIN + "*", "-", "-", b["calls"], "-", "-"] + dash
                     + [f(b["network_ms"]), "-", "-"]))
    lines.append(row(["(VM overhead)", "end to end - every timed call", "-", "-", "-", "-", "-"]
                     + dash + [f(t["vm_overhead_ms"]), "-", "-"]))
    lines.append(row(["total", f"{t['tuned_tasks']}/{t['tasks']} tasks tuned", "", "", "", "",
                      f(t["estimate_ms"])] + [f(t["tasks_alone_ms"][m]) for m in modes]
                     + [f(t["end_to_end_ms"]), f(_ratio(t["end_to_end_ms"], t["estimate_ms"])),
                        f(_ratio(t["tasks_network_ms"], t["tasks_alone_ms"].get("runner",
                                                                                 math.nan)))]))
    unmeasured = [r["task"] for r in table["tasks"] if r["best_ms"] != r["best_ms"]]
    differ = [f"{r['task']} (weight {r['weight']}, {r['calls']} calls)"
              for r in table["tasks"] if r["weight"] != r["calls"]]
    lines += [
        "",
        f"end to end now {t['end_to_end_ms']:.2f} ms = tasks {t['tasks_network_ms']:.2f} + "
        f"outside every task {t['outside_ms']:.2f} + VM builtins {t['builtins_ms']:.2f} + VM "
        f"overhead {t['vm_overhead_ms']:.2f}",
        f"tcl tune's timer now (vm.time_evaluator, mean): {f(run.get('timer_ms', math.nan))} ms "
        "(the table's end to end: the median of plain runs alternating with the profiled ones)",
        f"the run's summary: latency {run['latency_ms']:.2f} ms, the curve's final estimate "
        f"{f(run['estimate_ms'])} ms (ratio {f(_ratio(run['latency_ms'], run['estimate_ms']))}); "
        f"the estimate recomputed from the database: {t['estimate_ms']:.2f} ms",
        "tasks with no successful measurement (left out of the estimate, as the curve does): "
        + (", ".join(unmeasured) or "none"),
        "tasks whose weight is not their calls in the profile: " + (", ".join(differ) or "none"),
    ]
    return "\n".join(lines)


# -- compiling, with the lookups recorded --------------------------------------------------------
def recording_view(database, lookups: dict[str, tuple[tuple[str, str], bool]]):
    """``tcl.tvm_compat.compile_database(database)`` that also records, per fused function the
    compile looks up (TVM 0.27's MetaScheduleApplyDatabase queries each PrimFunc's tuning record
    by its name), its task ids (as it is and without the compile-only attributes) and whether a
    tuned record was found."""
    from tvm.ir.utils import derived_object

    from tcl.store.records import task_id_of
    from tcl.tvm_compat import compile_database, meta_schedule, without_compile_attrs

    ms = meta_schedule()
    view = compile_database(database)

    def record(mod, name, found):
        # fused functions carry op_pattern at compile time and their tasks do not; unfused
        # ones carry it in both (tcl.tvm_compat.without_compile_attrs): keep both ids
        ids = (task_id_of(mod), task_id_of(without_compile_attrs(mod)))
        lookups[str(name)] = (ids, found is not None)
        return found

    @derived_object
    class Recording(ms.database.PyDatabase):
        def has_workload(self, mod):
            return view.has_workload(mod)

        def commit_workload(self, mod):
            return view.commit_workload(mod)

        def commit_tuning_record(self, record):
            return view.commit_tuning_record(record)

        def get_top_k(self, workload, top_k):
            return view.get_top_k(workload, top_k)

        def get_all_tuning_records(self):
            return view.get_all_tuning_records()

        def query_tuning_record(self, mod, target, workload_name=None):
            return record(mod, workload_name,
                          view.query_tuning_record(mod, target, workload_name))

        def query_schedule(self, mod, target, workload_name=None):
            return record(mod, workload_name, view.query_schedule(mod, target, workload_name))

        def query_ir_module(self, mod, target, workload_name=None):
            return view.query_ir_module(mod, target, workload_name)

        def __len__(self):
            return len(view)

    return Recording()


def best_ms(database, task, target) -> float:
    """The task's best measured latency in ``database`` (ms, NaN if none ran), counted as
    ``tcl tune``'s curve counts a measurement (``tcl.online.run_latency``)."""
    from types import SimpleNamespace

    from tcl.online import run_latency

    rec = database.query_tuning_record(task.dispatched[0], target, task.task_name)
    if rec is None:
        return math.nan
    return run_latency(SimpleNamespace(run_secs=rec.run_secs, error_msg=None)) * 1e3


def compile_run(paths: Paths, run: dict, run_dir: Path, out: Path) -> tuple:
    """Compile the run's network with its database (as tcl tune does) into ``out/network.so``,
    and build each task's best record as the tuning's builder did (``tcl.measure.builder``:
    what the runner timed) into ``out/<task>.tar``. Returns (inputs, kernel -> task name,
    task name -> info, device)."""
    import torch
    import tvm

    from tcl.measure.builder import build_to_bytes

    from tcl.store.devices import DeviceRegistry
    from tcl.store.records import task_id_of
    from tcl.tune import resolve_instance
    from tcl.tvm_compat import meta_schedule
    from tcl.tune.layout import network_module

    ms = meta_schedule()
    device = DeviceRegistry(paths).get(run["device"])
    inst = resolve_instance(paths, run["network"])
    torch.manual_seed(run["seed"])
    net, example = inst.module(), inst.example()
    target = device.tvm_target()
    mod = network_module(inst, net, example, target=target, **run["choices"])   # load_run's
    tasks = ms.relax_integration.extract_tasks(mod, target)
    # a copy: opening a JSONDatabase may write, and a run directory is read only here
    with tempfile.TemporaryDirectory() as tmp:
        shutil.copytree(run_dir / "database", Path(tmp) / "database")
        database = ms.database.JSONDatabase(work_dir=str(Path(tmp) / "database"))
        lookups: dict[str, tuple[tuple[str, str], bool]] = {}
        executable = ms.relax_integration.compile_relax(recording_view(database, lookups), mod,
                                                       target, None)
        with atomic_write(out / "network.so", "compiled network") as lib:
            executable.export_library(str(lib))
        by_id = {task_id_of(t.dispatched[0]): t for t in tasks}
        info = {t.task_name: {"weight": int(t.weight), "best_ms": best_ms(database, t, target),
                              "kernels": [], "tuned": []} for t in tasks}
        for t in tasks:
            sch = database.query_schedule(t.dispatched[0], target, t.task_name)
            if sch is None:
                continue
            data, error = build_to_bytes(tvm.ir.save_json(sch.mod), tvm.ir.save_json(target))
            if data is not None:
                with atomic_write(out / f"{t.task_name}.tar", "built kernel") as tmp:
                    tmp.write_bytes(data)
                info[t.task_name]["as_tuned"] = str(out / f"{t.task_name}.tar")
                info[t.task_name]["args"] = ms.arg_info.ArgInfo.from_prim_func(
                    t.dispatched[0]["main"])
    kernel_task = {}
    for name, (ids, found) in lookups.items():
        tid = next((i for i in ids if i in by_id), None)
        if tid is not None:
            task = by_id[tid].task_name
            kernel_task[name] = task
            info[task]["kernels"].append(name)
            if found:
                info[task]["tuned"].append(name)
    return [x.numpy() for x in example], kernel_task, info, device


# -- timing, in a process pinned like tcl tune's --------------------------------------------------
def _kernel_module(lib, name: str):
    """The module among ``lib`` and its imports that defines kernel ``name``."""
    todo = [lib]
    while todo:
        m = todo.pop()
        if m.implements_function(name, False):
            return m
        todo.extend(m.imports)
    raise TclError(f"kernel {name} is not in the compiled library")


def measure_pinned(lib_file: str, inputs: list, num_cores: int, timing, repeats: int,
                   as_tuned: dict[str, str]) -> dict:
    """Runs pinned to the profile's cores: the network end to end (tcl tune's timer and its
    ``timing``, a ``TimingProtocol``: kernels alone are timed with its settings too), its calls
    under the VM instrument (``repeats`` runs), and each kernel alone; ``as_tuned``: kernel ->
    its task's best record as the tuning built it (timed alone too, on the runner's inputs)."""
    import time

    import tvm
    from tvm import relax

    from tcl.tune import measure_in_pinned_process

    _, mean, std, _, _ = measure_in_pinned_process(lib_file, inputs, num_cores, timing, None,
                                                   {})
    number, repeat, min_repeat_ms = timing.number, timing.repeat, timing.min_repeat_ms
    dev = tvm.cpu()
    lib = tvm.runtime.load_module(lib_file)
    plain, vm = relax.VirtualMachine(lib, dev), relax.VirtualMachine(lib, dev)
    args = [tvm.runtime.tensor(x, dev) for x in inputs]
    calls: list = []
    first_args: dict[str, list] = {}

    def instrument(func, name, before, ret, *fargs):
        if before:
            if not name.startswith(BUILTIN) and name not in first_args:
                first_args[name] = [a.numpy() for a in fargs]
            calls.append([name, time.perf_counter_ns()])   # the clock last, after the copies
        else:
            calls[-1][1] = (time.perf_counter_ns() - calls[-1][1]) / 1e6
        return 0

    vm.set_instrument(instrument)
    plain["main"](*args)
    runs, plain_ms = [], []
    # profiled and plain runs alternate, so that both see the same load on a shared host
    for i in range(repeats + 1):   # the first profiled run warms up and copies kernel inputs
        calls = []
        vm["main"](*args)
        runs.append([tuple(c) for c in calls])
        start = time.perf_counter()
        plain["main"](*args)
        plain_ms.append((time.perf_counter() - start) * 1e3)
    alone: dict[str, dict[str, float]] = {}
    fill = tvm.get_global_func("tvm.contrib.random.random_fill_for_measure")
    for name, host_args in first_args.items():
        kmod = _kernel_module(lib, name)
        net_args = [tvm.runtime.tensor(a, dev) for a in host_args]
        warm = kmod.time_evaluator(name, dev, number=number, repeat=repeat,
                                   min_repeat_ms=min_repeat_ms)
        # one call per repeat, each after flushing the caches of every argument but the first
        flushed = kmod.time_evaluator(name, dev, number=1, repeat=max(repeat, 10),
                                      f_preproc="cache_flush_cpu_non_first_arg")
        # medians: on a shared host a mean takes in whatever preempted one repeat
        alone[name] = {"inputs": float(np.median(warm(*net_args).results)) * 1e3,
                       "flushed": float(np.median(flushed(*net_args).results)) * 1e3}
        # random integers are out-of-bounds indices (a gather would read outside its table:
        # MetaSchedule's runner fails on them too, and the estimate leaves such a task out)
        if any(a.dtype.kind not in "fc" for a in host_args):
            continue
        rand_args = [tvm.runtime.empty(a.shape, str(a.dtype), dev) for a in host_args]
        for a in rand_args:
            fill(a)
        alone[name]["runner"] = float(np.median(warm(*rand_args).results)) * 1e3
        if name in as_tuned:
            tuned = tvm.runtime.load_module(as_tuned[name])
            timer = tuned.time_evaluator(tuned.entry_name, dev, number=number, repeat=repeat,
                                         min_repeat_ms=min_repeat_ms)
            alone[name]["built"] = float(np.median(timer(*rand_args).results)) * 1e3
    return {"end_to_end_ms": statistics.median(plain_ms[1:]), "timer_ms": mean,
            "timer_std_ms": std, "runs": runs[1:], "alone": alone,
            "pinned": {"affinity": sorted(os.sched_getaffinity(0)),
                       "TVM_NUM_THREADS": os.environ.get("TVM_NUM_THREADS")}}


def remeasure(device, tasks: dict[str, dict]) -> dict[str, float]:
    """Each task's best record (as the tuning built it) measured again by tcl tune's runner
    (the device's ``DeviceKind.runner``), now: task name -> ms (the mean of its repeats)."""
    from tcl.measure.devices import create
    from tcl.online import run_latency
    from tcl.tvm_compat import meta_schedule

    ms, kind = meta_schedule(), create(device)
    names = [t for t, info in tasks.items() if "as_tuned" in info]
    inputs = [ms.runner.RunnerInput(tasks[t]["as_tuned"], kind.runner_device_type(),
                                    tasks[t].pop("args")) for t in names]
    return {name: run_latency(future.result()) * 1e3
            for name, future in zip(names, kind.runner().run(inputs))}


def gap(paths: Paths, run_dir: Path, repeats: int) -> dict:
    """One run directory's gap table (``attribute``'s numbers) and what it was made from."""
    from tcl.measure.devices import create

    run = load_run(run_dir)
    with tempfile.TemporaryDirectory() as tmp:
        inputs, kernel_task, tasks, device = compile_run(paths, run, run_dir, Path(tmp))
        as_tuned = {k: tasks[t]["as_tuned"] for k, t in kernel_task.items()
                    if "as_tuned" in tasks[t]}
        runner_now = remeasure(device, tasks)
        kind = create(device)
        with kind.timer() as run_pinned:
            got = run_pinned(measure_pinned, str(Path(tmp) / "network.so"), inputs,
                             device.num_cores, kind.timing, repeats, as_tuned)
    for kernel, task in kernel_task.items():
        if task in runner_now and kernel in got["alone"]:
            got["alone"][kernel]["remeasured"] = runner_now[task]
    table = attribute(median_calls(got["runs"]), kernel_task, tasks, got["alone"],
                      got["end_to_end_ms"])
    return {"run_dir": str(run_dir), "run": {k: run[k] for k in ("network", "device", "model",
                                                                "latency_ms", "estimate_ms")
                                             if k in run},
            "pinned": got["pinned"], "timer_ms": got["timer_ms"],
            "timer_std_ms": got["timer_std_ms"],
            "kernel_task": kernel_task, "table": table}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("runs", nargs="+", metavar="RUN_DIR", help="a finished tcl tune run's --out")
    ap.add_argument("--data", default="data", help="the data root the runs' networks are in")
    ap.add_argument("--repeats", type=int, default=5,
                    help="profiled runs of the network (the median per call is reported)")
    ap.add_argument("--json", help="also write the measurements here (one JSON line a run)")
    args = ap.parse_args(argv)

    def job() -> None:
        if args.repeats < 1:
            raise TclError(f"--repeats {args.repeats}: expected at least 1")
        paths = Paths(Path(args.data).resolve())
        for run_dir in map(Path, args.runs):
            result = gap(paths, run_dir, args.repeats)
            run = result["run"]
            print(f"## {run_dir}: {run['network']} on {run['device']}, {run.get('model', '')}; "
                  f"pinned to CPUs {result['pinned']['affinity']}, TVM_NUM_THREADS "
                  f"{result['pinned']['TVM_NUM_THREADS']}\n")
            print(format_table({**run, "timer_ms": result["timer_ms"]}, result["table"]) + "\n")
            if args.json:
                with open(args.json, "a") as f:
                    f.write(json.dumps(result) + "\n")

    return report_errors("network_gap", job)


if __name__ == "__main__":
    sys.exit(main())
