"""Tuning real networks: time to latency with each cost model, against TenSet-MLP and PyTorch.

Protocol (issue 16, point 3). For each (network, device, model, seed), ``tcl.tune.tune_network``
runs MetaSchedule's own search with the same trial budget, then compiles the network and times
it end to end (not the sum of task estimates), with PyTorch eager timed on the same cores.
Models: ``tcl`` (the device's registered continual model where distillation made one, else its
Mamba model: the row says which), ``tenset-mlp`` (trained on the device's full data),
``xgb-online`` (MetaSchedule's default, online from scratch) and ``random`` (the floor);
``--update refit`` adds the online-refit mode of the tcl models.

Results: one JSON line per run in ``--results`` (the run's summary and its curve); a rerun skips
what is there. ``--summarize`` prints, per (network, device): final latency (mean±SE over seeds),
PyTorch's latency, and the trials and wall time each model took to reach TenSet-MLP's final
latency on the curve of tasks' best latencies (the paper's "faster tuning" ratio).

    python benchmarks/tuning.py --data data --networks resnet18,bert_tiny \\
        --devices cpu-avx2,cpu-sse42 --trials 1500 --seeds 0,1
    python benchmarks/tuning.py --summarize --results docs/bench-tuning.jsonl
"""
from __future__ import annotations

import argparse
import json
import math
import shutil
import sys
from dataclasses import asdict
from pathlib import Path

import numpy as np

from tcl.config import Paths, TclError

MODELS = ("tcl", "tenset-mlp", "xgb-online", "random")


def tcl_model(paths: Paths, device: str) -> str:
    """The device's TCL model: the registry's latest continual model, else its Mamba model."""
    from tcl.registry import ModelRegistry

    return "continual" if ModelRegistry(paths).latest(device) is not None else "mamba"


def run(args) -> None:
    from tcl.tune import tune_network

    paths, results = Paths(Path(args.data).resolve()), Path(args.results)
    results.parent.mkdir(parents=True, exist_ok=True)
    done = set()
    if results.exists():
        for line in results.read_text().splitlines():
            r = json.loads(line)
            done.add((r["network_arg"], r["device"], r["model_arg"], r["update"], r["seed"]))
    for network in args.networks.split(","):
        for device in args.devices.split(","):
            for model in args.models.split(","):
                updates = ["none"] + (["refit"] if args.refit and model == "tcl" else [])
                for update in updates:
                    for seed in [int(s) for s in args.seeds.split(",")]:
                        key = (network, device, model, update, seed)
                        if key in done:
                            continue
                        which = tcl_model(paths, device) if model == "tcl" else model
                        out = Path(args.work) / f"{network}-{device}-{model}-{update}-s{seed}"
                        shutil.rmtree(out, ignore_errors=True)   # an interrupted run restarts
                        r = tune_network(paths, network, device, which, trials=args.trials,
                                         update=update, seed=seed, out=out, progress=False)
                        row = {"network_arg": network, "model_arg": model, **asdict(r)}
                        with results.open("a") as f:
                            f.write(json.dumps(row) + "\n")
                        print(f"{network} {device} {model}/{update} seed {seed}: "
                              f"{r.latency_ms:.2f} ms (PyTorch {r.torch_ms:.2f}), "
                              f"{r.tune_s:.0f}s", file=sys.stderr)


def _reach(curve: list[dict], target_ms: float) -> tuple[float, float]:
    """Trials and wall seconds at which the curve's estimate first reaches ``target_ms``."""
    for point in curve:
        est = point["estimate_ms"]
        if est is not None and est == est and est <= target_ms:
            return point["trials"], point["wall_s"]
    return math.nan, math.nan


def summarize(results: Path) -> None:
    rows = [json.loads(line) for line in results.read_text().splitlines() if line]
    if not rows:
        raise TclError(f"{results} holds no runs yet")
    print("| network | device | model | runs | latency ms | PyTorch ms | trials to TenSet-MLP's "
          "final | wall s to it | speed-up (wall) |")
    print("|---|---|---|---|---|---|---|---|---|")
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault((r["network_arg"], r["device"]), []).append(r)
    for (network, device), runs in groups.items():
        ref = [r for r in runs if r["model_arg"] == "tenset-mlp" and r["update"] == "none"]
        # TenSet-MLP's final latency on the curve (tasks' best, weighted), mean over its seeds
        target = np.mean([r["curve"][-1]["estimate_ms"] for r in ref]) if ref else math.nan
        ref_wall = np.mean([_reach(r["curve"], target)[1] for r in ref]) if ref else math.nan
        by_model: dict[tuple, list[dict]] = {}
        for r in runs:
            by_model.setdefault((r["model_arg"], r["update"]), []).append(r)
        for (model, update), g in by_model.items():
            lat = np.array([r["latency_ms"] for r in g])
            se = lat.std(ddof=1) / math.sqrt(len(lat)) if len(lat) > 1 else math.nan
            reach = np.array([_reach(r["curve"], target) for r in g])
            trials, wall = np.nanmean(reach[:, 0]) if np.isfinite(reach[:, 0]).any() else math.nan, \
                np.nanmean(reach[:, 1]) if np.isfinite(reach[:, 1]).any() else math.nan
            name = model + ("" if update == "none" else f" ({update})") + \
                (f" [{g[0]['model']}]" if model == "tcl" else "")
            print(f"| {network} | {device} | {name} | {len(g)} | {lat.mean():.2f}±{se:.2f} | "
                  f"{np.mean([r['torch_ms'] for r in g]):.2f} | {trials:.0f} | {wall:.0f} | "
                  f"{ref_wall / wall if wall == wall and wall > 0 else math.nan:.2f} |")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default="data")
    ap.add_argument("--networks", default="resnet18,bert_tiny")
    ap.add_argument("--devices", default="cpu-avx2,cpu-sse42")
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--refit", action="store_true", help="also the tcl model refit online")
    ap.add_argument("--trials", type=int, default=1500)
    ap.add_argument("--seeds", default="0,1")
    ap.add_argument("--results", default="docs/bench-tuning.jsonl")
    ap.add_argument("--work", default="data/.cache/bench-tuning", help="tuning run directories")
    ap.add_argument("--summarize", action="store_true")
    args = ap.parse_args(argv)
    try:
        if args.summarize:
            summarize(Path(args.results))
        else:
            run(args)
    except TclError as e:
        print(f"tuning: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
