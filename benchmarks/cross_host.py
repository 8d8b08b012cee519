"""Cross-host transfer: how different real chips are, beside ISA caps of one chip (issue 39).

Devices (``--devices``) on the programs every one of them measured (the reference programs of
the pipeline's tasks, ``benchmarks/continual.py``'s ``Data``). Each pair of devices differs in
its host (the chip), in its code (the target: an ISA cap, a thread count) or in both.

- Landscapes: per task, the Spearman correlation of the two devices' latencies of the same
  programs, and the best-program transfer (``tcl.datacard.device_pairs``: the other device's best
  latency over its latency of this device's best program; 1: the same program wins on both).
- Model transfer: per device A and seed, the continual backbone (params.yaml's
  ``continual.backbone`` and its training recipe) trained from scratch on A's training pool,
  scored on every device B's held-out programs (``tcl.evaluate``: top-1 and pairwise, mean over
  the held-out networks). A model trained for B on its own pool is the diagonal.

One JSON line per (device trained, seed) in ``--results``, with its scores on every device; a
(device, seed) there already is skipped, so an interrupted run resumes.

    OMP_NUM_THREADS=1 python benchmarks/cross_host.py --seed-list 0 1 --results R.jsonl
    python benchmarks/cross_host.py --summarize --results R.jsonl
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from itertools import combinations
from pathlib import Path

import numpy as np
import polars as pl

from _common import mean_se
from continual import Data, _done, fit_scratch, load_hyper, mean_row

# The reference programs' hosts. Records before 2026-12-01 name their host "AMD EPYC" only;
# docs/data-card.md ("Hosts") gives the collection logs' provenance: cpu-avx2's reference
# programs, cpu-avx2-1c and cpu-sse42 on a Zen 1 host; cpu-avx512, zen4-* on Zen 4 hosts.
HOSTS = {"cpu-avx2": "Zen 1", "cpu-avx2-1c": "Zen 1", "cpu-sse42": "Zen 1",
         "cpu-avx512": "Zen 4", "zen4-1c": "Zen 4", "zen4-1c-haswell": "Zen 4"}
DEVICES = ("cpu-avx2-1c", "cpu-avx2", "cpu-sse42", "zen4-1c-haswell", "zen4-1c", "cpu-avx512")


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def train_and_score(data: Data, scoring: Data, device: str, seed: int, backbone: str,
                    hyper: dict) -> dict:
    """One model of ``device`` (trained on ``data``) and its mean scores on every device's
    held-out programs (``scoring``'s)."""
    from tcl.continual import Settings
    from tcl.evaluate import evaluate

    # a scratch fit reads no distillation or EWC weight: the backbone's recipe and the seed
    model, own, secs = fit_scratch(device, data.train[device], seed,
                                   Settings(backbone, hyper, ewc=0.0, seed=seed))
    scored = {}
    for other, held in scoring.held.items():
        row = mean_row(evaluate({"m": model.for_device(device)}, held, None, data.nets,
                                data.tasks))
        scored[other] = {"top1": row["top1"], "pairwise": row["pairwise"]}
    fit = own.labelled
    log(f"{device} seed {seed} ({len(fit)} programs, {secs:.0f} s): " +
        ", ".join(f"{o} {s['top1']:.3f}" for o, s in scored.items()))
    return {"secs": round(secs, 2), "n_train": len(fit), "scores": scored}


def main_run(args) -> None:
    done = _done(args.results, lambda r: (r["device"], r["seed"]))
    trained = args.train_devices or args.devices
    # training pools: the programs every trained device measured; the held-out programs: those
    # every device measured (a device measured on its held-out tasks only is scored on, not
    # trained: its row stays empty)
    data = Data(args, list(trained))
    scoring = data if list(trained) == list(args.devices) else Data(args, list(args.devices))
    backbone = args.backbone or _continual_backbone(args.params)
    hyper = load_hyper(args.params).get(backbone, {})
    for seed in args.seed_list:
        for device in trained:
            if (device, seed) in done:
                continue
            row = train_and_score(data, scoring, device, seed, backbone, hyper)
            with open(args.results, "a") as fh:
                fh.write(json.dumps({"device": device, "seed": seed, "backbone": backbone,
                                     "devices": list(args.devices), **row}) + "\n")


def _continual_backbone(params_file: str) -> str:
    import yaml

    return yaml.safe_load(Path(params_file).read_text())["continual"]["backbone"]


def differs(a: str, b: str, targets: dict[str, dict], hosts: dict[str, str] = HOSTS) -> str:
    """What a pair of devices differs in: the host, the code (target), or both."""
    host = hosts.get(a, "?") != hosts.get(b, "?")
    code = targets[a] != targets[b]
    return {(True, True): "host and code", (True, False): "host only",
            (False, True): "code only (ISA cap, threads)"}.get((host, code), "nothing")


def landscapes(data_root: Path, devices: list[str]) -> pl.DataFrame:
    """Per pair of ``devices``: tasks, median / p10 per-task Spearman, best-program transfer."""
    from tcl.config import Paths
    from tcl.datacard import device_pairs, device_rank_correlation
    from tcl.store.catalog import Catalog

    cat = Catalog(Paths(data_root.resolve()), in_memory=True)
    try:
        pairs = device_pairs(cat)
    finally:
        cat.close()
    pairs = pairs.filter(pl.col("device_a").is_in(devices) & pl.col("device_b").is_in(devices))
    return device_rank_correlation(pairs)


def summarize(args) -> str:
    from tcl.config import Paths
    from tcl.store.devices import DeviceRegistry

    rows = [json.loads(line) for line in args.results.read_text().splitlines() if line.strip()]
    devices = list(rows[0]["devices"])
    registry = DeviceRegistry(Paths(args.data.resolve()))
    targets = {d: registry.get(d).target for d in devices}
    out = [f"Results: {args.results} ({len(rows)} models; backbone {rows[0]['backbone']}). "
           "Mean ± standard error over seeds.",
           "\nDevices (host, target):\n", "| device | host | target |", "|---|---|---|"]
    out += [f"| {d} | {HOSTS.get(d, '?')} | `{json.dumps(targets[d])}` |" for d in devices]
    for metric in ("top1", "pairwise"):
        out.append(f"\n#### Model transfer, {metric}: the model of the row's device scored on "
                   "the column's held-out programs\n")
        out.append("| trained on \\ scored on | " + " | ".join(devices) + " |")
        out.append("|---|" + "---|" * len(devices))
        for a in devices:
            mine = [r for r in rows if r["device"] == a]
            if not mine:
                continue
            cells = [mean_se([r["scores"][b][metric] for r in mine]) for b in devices]
            out.append(f"| {a} | " + " | ".join(cells) + " |")
    out.append("\n#### Pairs: what differs, the landscapes, and what a model loses across the "
               "pair (transfer loss: the column device's own model minus the row device's, "
               "top-1 on the column device's programs, both directions averaged, paired by "
               "seed)\n")
    out.append("| device a | device b | differs in | tasks | Spearman median | p10 | "
               "best transfer | top-1 loss | pairwise loss |")
    out.append("|---|---|---|---|---|---|---|---|---|")
    land = {(r["device_a"], r["device_b"]): r
            for r in landscapes(args.data, devices).iter_rows(named=True)}
    by_seed: dict = {}   # seed -> device -> its model's scores on every device
    for r in rows:
        by_seed.setdefault(r["seed"], {})[r["device"]] = r["scores"]
    for a, b in combinations(devices, 2):
        lr = land.get((min(a, b), max(a, b)))
        losses = {}
        for metric in ("top1", "pairwise"):
            per_seed = []
            for by in by_seed.values():
                if a in by and b in by:
                    per_seed.append(((by[b][b][metric] - by[a][b][metric]) +
                                     (by[a][a][metric] - by[b][a][metric])) / 2)
            losses[metric] = mean_se(per_seed) or "-"
        land_cells = (f"{lr['tasks']} | {lr['median']:.3f} | {lr['p10']:.3f} | "
                      f"{lr['best_transfer']:.3f}") if lr else "- | - | - | -"
        out.append(f"| {a} | {b} | {differs(a, b, targets)} | {land_cells} | "
                   f"{losses['top1']} | {losses['pairwise']} |")
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, default=Path("data"))
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--results", type=Path, default=Path("docs/bench-cross-host.jsonl"))
    ap.add_argument("--devices", nargs="+", default=list(DEVICES))
    ap.add_argument("--train-devices", nargs="+",
                    help="the devices whose models are trained (default: --devices)")
    ap.add_argument("--backbone", help="default: params.yaml's continual.backbone")
    ap.add_argument("--seed-list", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--summarize", action="store_true")
    args = ap.parse_args()
    if args.summarize:
        print(summarize(args))
    else:
        main_run(args)


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
