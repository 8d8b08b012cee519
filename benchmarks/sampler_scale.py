"""Selection time and memory of the samplers on a large synthetic pool.

    OMP_NUM_THREADS=1 python benchmarks/sampler_scale.py --tasks 1000 --per-task 1000 --budget 0.1

Each sampler runs in its own process on a freshly generated pool of ``tasks x per-task``
candidates with real-width per-store features (164 columns, 1-4 stores per program; 2.4 on
average in the measured data) and no trace tokens (no sampler reads them without a model).
Uncertainty reads a precomputed 4-member score matrix (``Pool.scores``): model inference is not
part of selection time. Reported: wall time of ``select``, the tracemalloc peak of what it
allocates, and the process's peak RSS (which includes the pool itself).
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
import tracemalloc

import numpy as np

CASES = [("random", {}), ("kcenter", {}), ("representative", {}), ("uncertainty", {}),
         ("rdu", {}), ("rdu", {"per_task": False})]


def synthetic_pool(n_tasks: int, per_task: int, seed: int = 0):
    """Pool whose programs of a task share their stores' structure and differ along a few
    latent decisions (tile sizes, unrolling ...), on the log scale of real features."""
    from tcl.tokens import TOKEN_WIDTH
    from tcl.models.base import PER_STORE_WIDTH, ProgramSet
    from tcl.samplers import Pool

    rng = np.random.default_rng(seed)
    n = n_tasks * per_task
    stores = rng.integers(1, 5, n)
    offsets = np.concatenate([[0], np.cumsum(stores)]).astype(np.int64)
    rows = np.empty((int(offsets[-1]), PER_STORE_WIDTH), np.float32)
    mix = rng.standard_normal((6, PER_STORE_WIDTH)).astype(np.float32)
    step = 50   # tasks per generation chunk (bounded temporaries)
    for t0 in range(0, n_tasks, step):
        t1 = min(n_tasks, t0 + step)
        lo, hi = offsets[t0 * per_task], offsets[t1 * per_task]
        owner = np.repeat(np.arange(t0 * per_task, t1 * per_task), stores[t0 * per_task:
                                                                          t1 * per_task])
        pos = np.arange(hi - lo) - (offsets[owner] - lo)
        base = np.log2(1 + rng.integers(0, 4096, (t1 - t0, 4, PER_STORE_WIDTH))).astype(
            np.float32) * (rng.random((t1 - t0, 4, PER_STORE_WIDTH)) < 0.3)
        latent = rng.standard_normal((t1 * per_task - t0 * per_task, 6)).astype(np.float32)
        chunk = base[owner // per_task - t0, pos] + (latent @ mix)[owner - t0 * per_task]
        rows[lo:hi] = np.maximum(chunk, 0) * (base[owner // per_task - t0, pos] > 0)
    group = np.repeat(np.arange(n_tasks), per_task)
    quality = rng.standard_normal(n)
    scores = quality[:, None] + 0.3 * rng.standard_normal((n, 4))
    ps = ProgramSet(np.char.add("p", np.arange(n).astype(str)), group, rows, offsets,
                    np.zeros((0, TOKEN_WIDTH), np.float32), np.zeros(n + 1, np.int64))
    weights = {str(t): float(w) for t, w in enumerate(rng.integers(1, 20, n_tasks))}
    return Pool(ps, task_weights=weights, scores=scores)


def run_one(name: str, kwargs: dict, args) -> dict:
    from tcl.samplers import make_sampler

    t = time.perf_counter()
    pool = synthetic_pool(args.tasks, args.per_task, args.seed)
    made = time.perf_counter() - t
    sampler = make_sampler(name, **kwargs)
    tracemalloc.start()
    t = time.perf_counter()
    chosen = sampler.select(pool, args.budget, seed=args.seed)
    wall = time.perf_counter() - t
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return {"sampler": name + ("" if kwargs.get("per_task", True) else " (global)"),
            "selected": len(chosen), "wall_s": wall, "select_peak_mb": peak / 2**20,
            "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "pool_s": made}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tasks", type=int, default=1000)
    ap.add_argument("--per-task", type=int, default=1000)
    ap.add_argument("--budget", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--one", help=argparse.SUPPRESS)   # internal: run one case, print JSON
    args = ap.parse_args()
    if args.one:
        name, kwargs = CASES[int(args.one)]
        print(json.dumps(run_one(name, kwargs, args)))
        return
    print(f"pool: {args.tasks} tasks x {args.per_task} programs = {args.tasks * args.per_task:,}"
          f" candidates, budget {args.budget}; OMP_NUM_THREADS="
          f"{os.environ.get('OMP_NUM_THREADS', 'unset')}, load average "
          f"{os.getloadavg()[0]:.1f} at start")
    print(f"{'sampler':<22}{'selected':>10}{'select s':>10}{'select peak MB':>16}"
          f"{'process RSS MB':>16}{'pool gen s':>12}")
    for i in range(len(CASES)):
        out = subprocess.run([sys.executable, __file__, *sys.argv[1:], "--one", str(i)],
                             check=True, capture_output=True, text=True).stdout
        r = json.loads(out.strip().splitlines()[-1])
        print(f"{r['sampler']:<22}{r['selected']:>10,}{r['wall_s']:>10.1f}"
              f"{r['select_peak_mb']:>16,.0f}{r['rss_mb']:>16,.0f}{r['pool_s']:>12.1f}",
              flush=True)
    print(f"load average {os.getloadavg()[0]:.1f} at end")


if __name__ == "__main__":
    main()
