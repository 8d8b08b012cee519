"""Two fits on two cores: one after another with 2 threads each, or side by side in two
single-threaded processes (``tcl.train.train_many``, what the train stage does)? Times both
layouts in turns (``--rounds``) on a data root with features; ratios within one run compare.

    .venv/bin/python benchmarks/fit_layout.py --data DATA --device cpu-avx2 \\
        [--kinds mamba,tenset-mlp,xgb] [--epochs 8] [--rounds 2]
"""
from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")   # shared cores: see model_throughput.py

import argparse  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import torch  # noqa: E402
from _common import pipeline_task_ids, report_errors  # noqa: E402

from tcl.config import Paths  # noqa: E402
from tcl.pipeline.params import load_params  # noqa: E402
from tcl.train import train_many  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, required=True, help="data root with features")
    ap.add_argument("--device", default="cpu-avx2")
    ap.add_argument("--kinds", default="mamba,tenset-mlp,xgb")
    ap.add_argument("--epochs", type=int, default=8, help="neural fits: epochs (no early stop)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--params", default=str(ROOT / "params.yaml"))
    args = ap.parse_args()

    def job() -> None:
        params = load_params(args.params, check_models=False)
        paths, tasks = Paths(args.data), pipeline_task_ids(args.data, args.params)
        for kind in args.kinds.split(","):
            hyper = params.train.hyper_of(kind)
            if kind != "xgb":
                hyper.update(epochs=args.epochs, patience=args.epochs + 1)
            times: dict[str, list[float]] = {"1 x 2 threads": [], "2 x 1 thread": []}
            fits: dict[str, list[float]] = {"1 x 2 threads": [], "2 x 1 thread": []}
            for _ in range(args.rounds):
                for layout, workers, threads in (("1 x 2 threads", 1, 2), ("2 x 1 thread", 2, 1)):
                    torch.set_num_threads(threads)
                    os.environ["OMP_NUM_THREADS"] = str(threads)
                    start = time.perf_counter()
                    train_many(paths, [(args.device, kind, hyper)], seeds=[0, 1],
                               task_ids=tasks, workers=workers)
                    times[layout].append(time.perf_counter() - start)
                    secs = [json.loads(paths.train_info_file(args.device, kind, i).read_text())
                            ["train_secs"] for i in (0, 1)]
                    # the fits' own clocks (no process start, no data loading): one after
                    # another they add up, side by side the longer one is the wall time
                    fits[layout].append(sum(secs) if workers == 1 else max(secs))
            a, b = (statistics.median(times[k]) for k in ("1 x 2 threads", "2 x 1 thread"))
            fa, fb = (statistics.median(fits[k]) for k in ("1 x 2 threads", "2 x 1 thread"))
            print(f"{kind}: two fits, wall 1 x 2 threads {a:.1f} s, 2 x 1 thread {b:.1f} s "
                  f"({b / a:.2f}x); fitting alone {fa:.1f} s, {fb:.1f} s ({fb / fa:.2f}x); "
                  f"medians of {args.rounds}, load average {os.getloadavg()[0]:.1f}", flush=True)

    return report_errors("fit_layout", job)


if __name__ == "__main__":
    sys.exit(main())
