"""The compile pipeline's ceiling (issue 43, point 3): one network tuned at equal trials per task
in each layout of ``tcl tune --layout``, every finished run's compiled network timed again in
one sitting, interleaved, beside PyTorch eager and onnxruntime on the same cores.

Each run is an ordinary ``tcl tune`` output directory (``--runs``: ``LABEL=DIR`` pairs, e.g. the
budget curve's 64-trial xgb-online run for nchw); ``--sittings`` rounds time every run once
each (``tcl.tune.retime``), and the table gives the median per run, its ratio to the first run
and to the frameworks (medians over every sitting).

    taskset -c 0 python benchmarks/layouts.py --sittings 3 --results docs/bench-layouts.jsonl \\
        --runs nchw=data/.cache/budget-curve/resnet18-zen4-1c-xgb-online-b64-s0,...
    python benchmarks/layouts.py --summarize --results docs/bench-layouts.jsonl
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from _common import host_short, report_errors
from tcl.config import Paths, TclError


def run(args) -> None:
    from tcl.store.devices import host_identity
    from tcl.tune import retime

    paths, results = Paths(Path(args.data).resolve()), Path(args.results)
    runs = dict(item.split("=", 1) for item in args.runs.split(","))
    for sitting in range(args.sittings):
        for label, run_dir in runs.items():
            summary = json.loads((Path(run_dir) / "summary.json").read_text())
            got = retime(paths, run_dir)
            row = {"label": label, "run": run_dir, "sitting": sitting, "host": host_identity(),
                   "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                   "network": summary["network"], "device": summary["device"],
                   "model": summary["model"], "trials": summary["trials"],
                   "tasks": summary["tasks"], "tune_s": summary["tune_s"],
                   "compile": summary.get("compile", {"layout_option": "nchw"}), **got}
            with results.open("a") as f:
                f.write(json.dumps(row) + "\n")
            print(f"{label} sitting {sitting}: {got['latency_ms']:.2f} ms (PyTorch "
                  f"{got['torch_ms']:.2f}, onnxruntime {got['onnxruntime_ms']:.2f})",
                  file=sys.stderr)


def summarize(results: Path) -> None:
    rows = [json.loads(x) for x in results.read_text().splitlines() if x]
    if not rows:
        raise TclError(f"{results} holds no sittings yet")
    labels = list(dict.fromkeys(r["label"] for r in rows))
    med = {k: {lab: float(np.median([r[k] for r in rows if r["label"] == lab]))
               for lab in labels} for k in ("latency_ms", "torch_ms", "onnxruntime_ms")}
    eager = float(np.median([r["torch_ms"] for r in rows]))
    ort = float(np.median([r["onnxruntime_ms"] for r in rows]))
    first = rows[0]
    print(f"{first['network']} on {first['device']}, host {host_short(first['host'])}; medians "
          f"of {len(rows) // len(labels)} sittings; PyTorch eager {eager:.1f} ms, onnxruntime "
          f"{ort:.1f} ms (medians over every sitting)\n")
    print("| run | model | trials (tasks) | tuning s | network ms (sittings) | "
          f"vs {labels[0]} | vs eager | vs onnxruntime |")
    print("|---|---|---|---|---|---|---|---|")
    for lab in labels:
        r = next(x for x in rows if x["label"] == lab)
        mine = [x["latency_ms"] for x in rows if x["label"] == lab]
        ms = med["latency_ms"][lab]
        print(f"| {lab} | {r['model']} | {r['trials']} ({r['tasks']}) | {r['tune_s']:.0f} | "
              f"{ms:.2f} ({', '.join(f'{x:.2f}' for x in mine)}) | "
              f"{ms / med['latency_ms'][labels[0]]:.3f} | {ms / eager:.2f} | {ms / ort:.2f} |")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default="data")
    ap.add_argument("--runs", help="LABEL=RUN_DIR,... (tcl tune output directories)")
    ap.add_argument("--sittings", type=int, default=3)
    ap.add_argument("--results", default="docs/bench-layouts.jsonl")
    ap.add_argument("--summarize", action="store_true")
    args = ap.parse_args(argv)
    if args.summarize:
        return report_errors("layouts", lambda: summarize(Path(args.results)))
    if not args.runs:
        ap.error("--runs is required (LABEL=RUN_DIR,...)")
    return report_errors("layouts", lambda: run(args))


if __name__ == "__main__":
    sys.exit(main())
