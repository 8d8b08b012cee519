"""What users would run instead of tuning (issue 16, point 4): the same networks in PyTorch eager,
``torch.compile`` (inductor) and onnxruntime, on the same cores and thread count as the profile.

Each (network, device) runs where ``tcl tune`` times its compiled network (the device's
``DeviceKind.timer``: a fresh process pinned to the profile's cores). Latency: the median of
``--repeat`` runs after warm-up (``TimingProtocol.framework_ms``; torch.compile's compile time
is reported apart). onnxruntime is used when it is installed (``pip install -e ".[baselines]"``) and skipped, with a note, when not.
With ``--tuning`` the table adds tcl's tuned latency from ``benchmarks/tuning.py``'s results.

    python benchmarks/frameworks.py --networks resnet18,bert_tiny --devices cpu-sse42,cpu-avx2-1c \\
        --results docs/bench-frameworks.jsonl
    python benchmarks/frameworks.py --summarize --results docs/bench-frameworks.jsonl \\
        --tuning docs/bench-tuning.jsonl
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

import numpy as np

from _common import host_short, report_errors, run_label, search_of
from tcl.config import Paths, TclError
from tcl.measure.devices.settings import TimingProtocol


def measure(network: str, batch: int, size, threads: int, timing: TimingProtocol,
            isa_env: dict[str, str]) -> dict:
    """Runs pinned to the profile's cores: each framework's latency on one network; PyTorch
    (eager and torch.compile) capped at the profile's ISA (``isa_env``,
    ``Device.framework_isa_env``); onnxruntime has no such cap: it uses the host's ISA."""
    os.environ.update(isa_env)
    import torch

    from tcl.tune.frameworks import eager_ms, onnxruntime_ms, onnxruntime_version
    from tcl.zoo.networks import NETWORKS

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    model = NETWORKS[network].model(size).eval()
    example = NETWORKS[network].example(batch, size)
    row: dict = {"eager_ms": eager_ms(model, example, threads, timing)}
    with torch.no_grad():
        start = time.perf_counter()
        compiled = torch.compile(model)
        compiled(*example)
        row["compile_s"] = round(time.perf_counter() - start, 1)
        row["torch_compile_ms"] = timing.framework_ms(lambda: compiled(*example))
    row["onnxruntime_ms"] = onnxruntime_ms(model, example, threads, timing)
    if onnxruntime_version() is None:
        row["onnxruntime_note"] = "onnxruntime not installed"
    else:
        row["onnxruntime_version"] = onnxruntime_version()
    row["torch_version"] = torch.__version__
    return row


def run(args) -> None:
    from tcl.measure.devices import create
    from tcl.store.devices import DeviceRegistry, host_identity
    from tcl.tune import resolve_instance

    paths, results = Paths(Path(args.data).resolve()), Path(args.results)
    done = set()
    if results.exists():
        done = {(r["network_arg"], r["device"]) for r in map(json.loads, results.read_text()
                                                              .splitlines())}
    for network in args.networks.split(","):
        inst = resolve_instance(paths, network)
        for name in args.devices.split(","):
            if (network, name) in done:
                continue
            device = DeviceRegistry(paths).get(name)
            kind = create(device)
            kind.check_runnable()
            with kind.timer() as run_pinned:
                row = run_pinned(measure, inst.network, inst.batch, inst.size, device.num_cores,
                                 TimingProtocol(repeat=args.repeat), device.framework_isa_env())
            row = {"network_arg": network, "network": inst.key, "device": name,
                   "host": host_identity(), "at": time.strftime("%Y-%m-%dT%H:%MZ", time.gmtime()),
                   "threads": device.num_cores, "torch_isa": device.framework_isa_env(), **row}
            with results.open("a") as f:
                f.write(json.dumps(row) + "\n")
            print(f"{inst.key} {name}: eager {row['eager_ms']:.2f} ms, torch.compile "
                  f"{row['torch_compile_ms']:.2f} ms, onnxruntime {row['onnxruntime_ms']:.2f} ms",
                  file=sys.stderr)


def summarize(results: Path, tuning: Path | None) -> None:
    rows = [json.loads(line) for line in results.read_text().splitlines() if line]
    if not rows:
        raise TclError(f"{results} holds no runs yet")
    tuned: dict[tuple, dict[str, list[float]]] = {}
    if tuning is not None and tuning.exists():
        for r in map(json.loads, tuning.read_text().splitlines()):
            name = run_label(r["model_arg"], r["update"], "", search_of(r))
            tuned.setdefault((r["network_arg"], r["device"], r.get("host")), {}).setdefault(
                name, []).append(r["latency_ms"])
    print("| network | device | host | timed | threads | PyTorch eager ms | torch.compile ms (compile s) | "
          "onnxruntime ms | tuned: best model, ms | tuned / eager | tuned / torch.compile | "
          "tuned / onnxruntime |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:   # tuned on the same host only
        models = tuned.get((r["network_arg"], r["device"], r.get("host")), {})
        best = min(models, key=lambda m: np.mean(models[m])) if models else None
        ms = float(np.mean(models[best])) if best else math.nan
        ratio = (lambda x: "-" if ms != ms or x != x else f"{ms / x:.2f}")
        print(f"| {r['network']} | {r['device']} | {host_short(r.get('host'))} | {r.get('at', '-')} | {r['threads']} | {r['eager_ms']:.2f} | "
              f"{r['torch_compile_ms']:.2f} ({r['compile_s']:.0f}) | {r['onnxruntime_ms']:.2f} | "
              + (f"{best}: {ms:.2f}" if best else "not tuned") + f" | {ratio(r['eager_ms'])} | "
              f"{ratio(r['torch_compile_ms'])} | {ratio(r['onnxruntime_ms'])} |")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default="data")
    ap.add_argument("--networks", default="resnet18,bert_tiny")
    ap.add_argument("--devices", default="cpu-sse42,cpu-avx2-1c")
    ap.add_argument("--repeat", type=int, default=30)
    ap.add_argument("--results", default="docs/bench-frameworks.jsonl")
    ap.add_argument("--summarize", action="store_true")
    ap.add_argument("--tuning", help="with --summarize: benchmarks/tuning.py's results")
    args = ap.parse_args(argv)
    if args.summarize:
        return report_errors("frameworks", lambda: summarize(
            Path(args.results), Path(args.tuning) if args.tuning else None))
    return report_errors("frameworks", lambda: run(args))


if __name__ == "__main__":
    sys.exit(main())
