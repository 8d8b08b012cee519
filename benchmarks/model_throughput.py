"""Scoring (and training) throughput of the neural cost models on CPU threads.

Synthetic programs of realistic size (2-10 per-store rows, 30-60 trace tokens per program);
untrained weights (speed does not depend on them). Scoring is ``model.predict`` end to end
(validation, batching, forward); the median of ``--repeats`` wall-clock runs (the models take
turns, one run each per round, so ratios within one run compare like with like), plus the same
in process CPU time, which is what a loaded machine cannot take away from us. Training: one
epoch over ``--train-programs`` programs, the median of ``--train-repeats`` turns.

The arithmetic limit: matmul FLOPs per program (torch's FlopCounterMode over one scoring pass:
matmuls, bmm and linear layers; elementwise work such as the scan's exponentials is not counted)
times programs/s, against the peak of a large fp32 matmul measured in the same run.

    .venv/bin/python benchmarks/model_throughput.py [--threads 2] [--programs 20000]
        [--data DATA_ROOT --device cpu-avx2]   # also real featurized programs
"""
from __future__ import annotations

import os

# Shared cores: OpenMP threads that spin while a peer is descheduled make 2 threads slower than
# 1 (measured: 5-10x on a loaded machine); passive waiting avoids that. Set before torch loads.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

from tcl.models.base import ProgramSet  # noqa: E402
from tcl.models.mamba import MambaModel  # noqa: E402
from tcl.models.mlp import TenSetMLP  # noqa: E402
from tcl.models.nn import synthetic_programs  # noqa: E402
from tcl.models.tlp import TLPModel  # noqa: E402

MODELS = [("mamba (stores, default)", MambaModel, {}),
          ("mamba tokens", MambaModel, {"inputs": "tokens"}),
          ("mamba both", MambaModel, {"inputs": "both"}),
          ("mamba stores, 2 layers", MambaModel, {"n_layers": 2}),
          ("mamba stores, 1 layer", MambaModel, {"n_layers": 1}),
          ("tenset-mlp", TenSetMLP, {}),
          ("tlp", TLPModel, {})]


def median_of_interleaved(fns: list, repeats: int, budget_s: float = 15.0
                          ) -> list[tuple[float, float]]:
    """(median wall seconds, median process CPU seconds) of each function over up to ``repeats``
    rounds, each round running every function once: on a machine whose speed drifts (a shared
    VM), every model sees the same conditions. A function stops early once it has used
    ``budget_s`` (the slow token models)."""
    runs: list[list[tuple[float, float]]] = [[] for _ in fns]
    for _ in range(repeats):
        for fn, r in zip(fns, runs):
            if sum(w for w, _ in r) > budget_s:
                continue
            w, c = time.perf_counter(), time.process_time()
            fn()
            r.append((time.perf_counter() - w, time.process_time() - c))
    return [(float(np.median([w for w, _ in r])), float(np.median([c for _, c in r])))
            for r in runs]


def matmul_peak(threads: int, size: int = 2048, repeats: int = 7) -> float:
    """FLOP/s of a large fp32 matmul on these threads (median of ``repeats``): the machine's
    practical arithmetic peak, measured under the same load as the models."""
    a, b = torch.randn(size, size), torch.randn(size, size)
    out = torch.empty(size, size)
    torch.matmul(a, b, out=out)
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        torch.matmul(a, b, out=out)
        times.append(time.perf_counter() - t)
    return 2 * size ** 3 / float(np.median(times))


def matmul_flops_per_program(model, ps: ProgramSet) -> float:
    with FlopCounterMode(display=False) as counter:
        model.predict(ps)
    return counter.get_total_flops() / len(ps)


def table(ps: ProgramSet, args: argparse.Namespace, peak: float) -> None:
    train = ps.subset(np.arange(min(args.train_programs, len(ps))))
    warm = ps.subset(np.arange(min(2048, len(ps))))
    print(f"{len(ps)} programs: {np.diff(ps.store_offsets).mean():.1f} stores "
          f"(max {np.diff(ps.store_offsets).max()}) and {np.diff(ps.token_offsets).mean():.1f} "
          f"tokens per program on average\n")
    models = [(name, cls(device="cpu", **kw)) for name, cls, kw in MODELS
              if args.models is None or name in args.models or name == "tenset-mlp"]
    flops = [matmul_flops_per_program(model, warm) for _, model in models]
    for _, model in models:
        model.predict(warm)
    times = median_of_interleaved([lambda m=m: m.predict(ps) for _, m in models], args.repeats)
    epoch = [float("nan")] * len(models)
    if args.train_programs:
        for _, model in models:
            model.config["epochs"] = 1
            model.fit(train.subset(np.arange(min(256, len(train)))))   # warm-up
        epoch = [w for w, _ in median_of_interleaved(
            [lambda m=m: m.fit(train) for _, m in models], args.train_repeats, budget_s=60.0)]
    rows = [(name, model.n_parameters(), f, len(ps) / wall, len(ps) / cpu, len(train) / e, e)
            for (name, model), f, (wall, cpu), e in zip(models, flops, times, epoch)]
    mlp = next(r for r in rows if r[0] == "tenset-mlp")
    head = (f"{'model':26} {'params':>8} {'MFLOP/prog':>10} {'score prog/s':>13} "
            f"{'prog/cpu-s':>11} {'vs mlp':>7} {'% peak':>7} {'train prog/s':>13} "
            f"{'epoch vs mlp':>12}")
    print(head)
    print("-" * len(head))
    for name, params, f, rate, cpu_rate, train_rate, e in rows:
        print(f"{name:26} {params:8d} {f / 1e6:10.3f} {rate:13,.0f} {cpu_rate:11,.0f} "
              f"{rate / mlp[3]:6.2f}x {100 * f * rate / peak:6.1f}% {train_rate:13,.0f} "
              f"{e / mlp[6]:11.2f}x")
    print(f"load average {os.getloadavg()[0]:.1f} at end (other processes share these cores)\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--programs", type=int, default=20000)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--train-programs", type=int, default=2048,
                    help="programs for the one-epoch training-speed measurement (0: skip)")
    ap.add_argument("--train-repeats", type=int, default=3)
    ap.add_argument("--models", type=lambda v: v.split(";"), default=None,
                    help="names from the table, separated by ';' (default: all; tenset-mlp, the "
                         "yardstick, always runs)")
    ap.add_argument("--data", help="also measure a data root's featurized, measured programs "
                                   "(repeated up to --programs)")
    ap.add_argument("--device", default="cpu-avx2", help="the device whose records --data reads")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {args.threads} threads, cpu capability "
          f"{torch.backends.cpu.get_cpu_capability()}, {os.cpu_count()} cpus, OMP_WAIT_POLICY "
          f"{os.environ['OMP_WAIT_POLICY']}, load average {os.getloadavg()[0]:.1f} at start")
    peak = matmul_peak(args.threads)
    print(f"matmul peak (2048^3 fp32, median of 7): {peak / 1e9:.1f} GFLOP/s\n")
    print("== synthetic programs (2-10 per-store rows, 30-60 tokens) ==")
    table(synthetic_programs(n_groups=args.programs // 100, per_group=100, seed=1), args,
          peak)
    if args.data:
        from tcl.config import Paths
        from tcl.dataset import load_program_set

        real = load_program_set(Paths(Path(args.data)), args.device)
        print(f"== measured programs of {args.device} in {args.data} "
              f"({len(real)} distinct, repeated) ==")
        table(real.subset(np.resize(np.arange(len(real)), args.programs)), args, peak)


if __name__ == "__main__":
    main()
