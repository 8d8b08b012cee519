"""Collection throughput: records per second and where the wall time goes.

Candidates are sampled before the timer starts (sampling is its own stage); the timed part is
what `tcl collect` does per batch: apply traces, build (LocalBuilder with tcl's build function),
run (LocalRunner), write Parquet. Compares against the stock MetaSchedule build function, which
imports tvm.s_tir.tensor_intrin in every build worker, on the same programs.

    python benchmarks/collect.py --networks resnet18 --split holdout --max-tasks 4 --programs-per-task 16
"""
from __future__ import annotations

import argparse
import platform
import shutil
import tempfile
import time
from datetime import date
from pathlib import Path

import polars as pl

from tcl.config import Paths
from tcl.store.devices import DeviceRegistry, host_cpu_model
from tcl.measure.builder import local_builder
from tcl.measure.collect import collect


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


def run(zoo: Paths, device_name: str, tasks, n: int, batch: int, stock: bool):
    device = DeviceRegistry(zoo).get(device_name)
    with tempfile.TemporaryDirectory() as tmp:
        paths = Paths(Path(tmp))
        # A copy of the zoo's candidates: both variants measure the same programs.
        shutil.copytree(zoo.candidates_dir, paths.candidates_dir)
        # A long build timeout for both: under load the stock worker's import alone can pass
        # LocalBuilder's default 30 s, and every program would then fail as a timeout.
        if stock:
            from tcl.tvm_compat import meta_schedule

            builder = meta_schedule().builder.LocalBuilder(timeout_sec=300)
        else:
            builder = local_builder(timeout_sec=300)
        return collect(paths, device, tasks, n, batch_size=batch, progress=False, builder=builder)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default="data")
    ap.add_argument("--device", default="cpu-avx2")
    ap.add_argument("--networks", nargs="+", default=["resnet18"])
    ap.add_argument("--split", choices=["all", "train", "holdout"], default="holdout")
    ap.add_argument("--max-tasks", type=int, default=4)
    ap.add_argument("--programs-per-task", type=int, default=16)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--skip-stock", action="store_true")
    args = ap.parse_args()
    zoo = Paths(Path(args.data).resolve())
    tasks = zoo_tasks(zoo, args.networks, args.split, args.max_tasks)
    missing = [t for t in tasks["task_id"] if not zoo.candidates_file(t).exists()]
    if missing:  # never add candidates to the reference data: sample into a scratch root
        raise SystemExit(f"{len(missing)} selected tasks have no candidates in {zoo.root}; "
                         "pick tasks of the reference data (e.g. --split holdout)")
    variants = [("tcl (fast f_build)", False)] + ([] if args.skip_stock else [("stock default_build", True)])
    results = {name: run(zoo, args.device, tasks, args.programs_per_task, args.batch_size, stock)
               for name, stock in variants}
    print(f"host: {host_cpu_model()} ({platform.machine()}), date {date.today()}, "
          f"device {args.device}, {len(tasks)} tasks x {args.programs_per_task} programs, "
          f"batch {args.batch_size} (candidates sampled beforehand)")
    print()
    print("| variant | records | records/s | wall s | build % | run % | other % |")
    print("|---|---|---|---|---|---|---|")
    for name, s in results.items():
        w = s.wall_secs
        print(f"| {name} | {s.measured} | {s.measured / w:.2f} | {w:.1f} | "
              f"{100 * s.build_secs / w:.1f} | {100 * s.run_secs / w:.1f} | "
              f"{100 * s.other_secs / w:.1f} |")
    if len(results) == 2:
        a, b = results.values()
        print(f"\nthroughput ratio tcl / stock: {(a.measured / a.wall_secs) / (b.measured / b.wall_secs):.2f}x")


if __name__ == "__main__":
    main()
