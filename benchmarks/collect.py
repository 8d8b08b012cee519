"""Collection throughput: records per second and where the wall time goes, per variant of the
collector, on the same programs.

Candidates are sampled before the timer starts (sampling is its own stage); the timed part is
what `tcl collect` does per batch: apply traces, build (LocalBuilder with tcl's build function),
run (LocalRunner), write Parquet. Variants (``--variants``):
- ``plain``: today's collector (build a batch, then run it), on every cpu it may use;
- ``plain-1core``: the same on one cpu, as each of two one-core lanes runs it (the way 1-core
  devices were measured until now: two such lanes give at most twice its rate);
- ``pooled``: plain, with the build workers started once (``tcl.measure.pooled_builder``, what
  `tcl tune` builds with) instead of LocalBuilder's fresh pool per batch;
- ``pipelined-pooled``: `tcl collect --pipelined` (the next batch builds in the pooled builder,
  on the cores the device does not use, while this one runs; issue 39 point 3);
- ``pipelined-pooled-lean``: that, with the evaluator's ``min_repeat_ms`` at ``--lean-ms``;
- ``overlapped-pooled``: pipelined, but the pooled builder's workers on every cpu, the
  device's too: builds then share the device's core with the kernels being timed;
- ``stock``: MetaSchedule's stock build function (imports tvm.s_tir.tensor_intrin per worker).
Each round measures every variant once, in turn, into its own scratch root; ratios are paired
within a round. Rank agreement: per task, the Spearman correlation of a variant's latencies with
the first plain round's on the programs both measured, averaged over tasks; plain's own later
rounds give the noise floor.

    python benchmarks/collect.py --device zen4-1c --networks resnet18 --max-tasks 8 \
        --programs-per-task 16 --batch-size 32 --variants plain,pipelined-pooled,pipelined-pooled-lean --rounds 2
"""
from __future__ import annotations

import argparse
import os
import platform
import shutil
import tempfile
from dataclasses import replace
from datetime import date
from pathlib import Path

import numpy as np
import polars as pl

from _common import mean_se
from tcl.config import Paths
from tcl.store.devices import DeviceRegistry, host_cpu_model
from tcl.measure.builder import local_builder
from tcl.measure.collect import collect
from tcl.measure.pooled_builder import pooled_builder
from tcl.measure.devices import create
from tcl.metrics import spearman


def zoo_tasks(zoo: Paths, networks: list[str], split: str, max_tasks: int) -> pl.DataFrame:
    """The networks' tasks (extracted into the zoo first where needed), heaviest first, at most
    ``max_tasks`` per split, as ``tcl collect --networks`` selects them."""
    from tcl.zoo.extract import build_zoo, select_tasks
    from tcl.zoo.networks import zoo_instances
    from tcl.zoo.user import user_networks

    instances = zoo_instances(networks, user=user_networks(zoo))
    build_zoo(zoo, instances=instances)
    tasks = select_tasks(zoo, [i.key for i in instances], max_tasks, max_tasks)
    return tasks if split == "all" else tasks.filter(pl.col("holdout") == (split == "holdout"))


# variant: (pipelined, builder, evaluator settings)
VARIANTS = {"plain": (False, "local", {}), "plain-1core": (False, "local", {}),
            "pooled": (False, "pooled", {}),
            "pipelined-pooled": (True, "pooled", {}),
            "pipelined-pooled-lean": (True, "pooled", {"min_repeat_ms": None}),   # --lean-ms
            "overlapped-pooled": (True, "pooled-everywhere", {}),
            "stock": (False, "stock", {})}


def run(zoo: Paths, device, tasks, n: int, batch: int, variant: str, lean_ms: int):
    """One variant's collection of the tasks' first ``n`` candidates, in a scratch root: its
    stats and its records."""
    pipelined, builder, measure = VARIANTS[variant]
    if measure:
        device = replace(device, measure=replace(device.measure, min_repeat_ms=lean_ms))
    cpus = os.sched_getaffinity(0)
    if variant == "plain-1core":   # this thread's, which the pools' threads and workers inherit
        os.sched_setaffinity(0, {min(cpus)})
    try:
        return _run(zoo, device, tasks, n, batch, pipelined, builder)
    finally:
        os.sched_setaffinity(0, cpus)


def _run(zoo: Paths, device, tasks, n: int, batch: int, pipelined: bool, kind: str):
    from tcl.store.records import RecordStore

    with tempfile.TemporaryDirectory() as tmp:
        paths = Paths(Path(tmp))
        # A copy of the zoo's candidates: every variant measures the same programs.
        shutil.copytree(zoo.candidates_dir, paths.candidates_dir)
        # A long build timeout for every variant: under load the stock worker's import alone
        # can pass LocalBuilder's default 30 s, and every program would then fail as a timeout.
        cpus = create(device).build_cpus() if pipelined else None
        if kind == "stock":
            from tcl.tvm_compat import meta_schedule

            builder = meta_schedule().builder.LocalBuilder(timeout_sec=300)
        elif kind == "pooled":
            builder = pooled_builder(timeout_sec=300, cpus=cpus)
        elif kind == "pooled-everywhere":
            builder = pooled_builder(timeout_sec=300)
        else:
            builder = local_builder(timeout_sec=300)
        try:
            stats = collect(paths, device, tasks, n, batch_size=batch, progress=False,
                            builder=builder, pipelined=pipelined)
        finally:
            if kind.startswith("pooled"):
                builder.close()
        records = RecordStore(paths).read().select("task_id", "program_id", "status",
                                                   "latencies")
    return stats, records


def agreement(a: pl.DataFrame, b: pl.DataFrame) -> float:
    """Mean over tasks of the Spearman correlation of two runs' mean latencies (programs both
    ran; tasks with at least 3 of them)."""
    def means(r):
        return r.filter(pl.col("status") == "ok").select(
            "task_id", "program_id", pl.col("latencies").list.mean().alias("ms"))

    both = means(a).join(means(b), on=["task_id", "program_id"], suffix="_b")
    rhos = [spearman(g["ms"].to_numpy(), g["ms_b"].to_numpy())
            for _, g in both.group_by("task_id") if len(g) >= 3]
    rhos = [r for r in rhos if r == r]
    return float(np.mean(rhos)) if rhos else float("nan")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default="data")
    ap.add_argument("--device", default="cpu-avx2")
    ap.add_argument("--networks", nargs="+", default=["resnet18"])
    ap.add_argument("--split", choices=["all", "train", "holdout"], default="holdout")
    ap.add_argument("--max-tasks", type=int, default=4)
    ap.add_argument("--programs-per-task", type=int, default=16)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--variants", default="plain,stock",
                    help=f"comma-separated, the first is the baseline: {', '.join(VARIANTS)}")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--lean-ms", type=int, default=10,
                    help="pipelined-pooled-lean's min_repeat_ms (the device's is 40)")
    args = ap.parse_args()
    variants = args.variants.split(",")
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        raise SystemExit(f"--variants: {', '.join(unknown)}: expected some of {', '.join(VARIANTS)}")
    zoo = Paths(Path(args.data).resolve())
    device = DeviceRegistry(zoo).get(args.device)
    tasks = zoo_tasks(zoo, args.networks, args.split, args.max_tasks)
    missing = [t for t in tasks["task_id"] if not zoo.candidates_file(t).exists()]
    if missing:  # never add candidates to the reference data: sample into a scratch root
        raise SystemExit(f"{len(missing)} selected tasks have no candidates in {zoo.root}; "
                         "pick tasks of the reference data (e.g. --split holdout)")
    runs: dict[str, list] = {v: [] for v in variants}
    for r in range(args.rounds):
        for v in variants:
            runs[v].append(run(zoo, device, tasks, args.programs_per_task, args.batch_size, v,
                               args.lean_ms))
            s = runs[v][-1][0]
            print(f"round {r}: {v}: {s.measured} records in {s.wall_secs:.1f} s", flush=True)
    print(f"\nhost: {host_cpu_model()} ({platform.machine()}), date {date.today()}, "
          f"device {args.device} ({device.num_cores} core(s)), {len(tasks)} tasks x "
          f"{args.programs_per_task} programs, batch {args.batch_size}, {args.rounds} round(s) "
          "(candidates sampled beforehand)")
    print()
    base = variants[0]
    print(f"| variant | records | records/s | over {base} | wall s | build % | run % | other % "
          f"| Spearman with {base}'s first round |")
    print("|---|---|---|---|---|---|---|---|---|")
    for v in variants:
        rates = [s.measured / s.wall_secs for s, _ in runs[v]]
        ratios = [a / b for a, b in zip(rates, [s.measured / s.wall_secs for s, _ in runs[base]])]
        rhos = [agreement(runs[base][0][1], rec) for i, (_, rec) in enumerate(runs[v])
                if not (v == base and i == 0)]
        s = runs[v][-1][0]
        w = s.wall_secs
        print(f"| {v} | {s.measured} | {mean_se(rates, 2)} | {mean_se(ratios, 2)}x | {w:.1f} | "
              f"{100 * s.build_secs / w:.1f} | {100 * s.run_secs / w:.1f} | "
              f"{100 * s.other_secs / w:.1f} | {mean_se(rhos, 3) if rhos else '-'} |")
    print("\nrecords/s and ratios: mean ± standard error over rounds; wall and shares: the last "
          "round (pipelined, build and run overlap, so their shares add up past 100%)")


if __name__ == "__main__":
    main()
