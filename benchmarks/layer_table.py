"""Where the time goes, per layer (issue 43, point 2): a tuned network's kernels against the
same layers in onnxruntime's profiler, on the same core, with one thread each.

For each ``NAME=RUN_DIR`` (a finished ``tcl tune`` run: ``summary.json``, ``network.so``) the
compiled network runs under the Relax VM's instrument (every call timed, with its arguments'
shapes), and the same PyTorch module, exported to ONNX, runs in onnxruntime with its profiler
on. Profiled and plain runs of both alternate, ``--repeats`` times, in this process: run it
under ``taskset`` on a quiet core. Per call site the median over repeats is kept.

Both sides' calls are grouped into layers by what they compute, so that the groups match
across the two compilers' different fusions:
- a convolution by its kernel, stride, channels and output size (``conv 3x3/1 64->64 56x56``),
  whatever is fused into it; blocked NCHWc shapes count as their channels;
- a matmul by its batch and (M, K, N);
- everything else by kind: softmax, layer norm, gelu, pooling, gather, layout transforms,
  elementwise, data movement (reshapes, transposes, slices).
onnxruntime fuses differently (the residual add of a transformer into
``SkipLayerNormalization``, a convolution's add into the convolution), so kinds other than
convolutions and matmuls compare as groups, not one for one.

The totals split each end-to-end time into its layers and what lies outside them: for TVM the
kernels of no tuned task, the VM's builtins and its own overhead (end to end minus every timed
call); for onnxruntime its overhead outside the nodes.

    taskset -c 0 python benchmarks/layer_table.py --results docs/bench-layer-table.jsonl \\
        --runs resnet18-nchwc=data/.cache/layout/resnet18-nchwc-xgb-online-s0
    python benchmarks/layer_table.py --summarize --results docs/bench-layer-table.jsonl
"""
from __future__ import annotations

import argparse
import json
import math
import os
import re
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from _common import host_short, report_errors
from tcl.config import Paths, TclError

BUILTIN = "vm.builtin."
ELEMENTWISE = ("add", "multiply", "subtract", "divide", "cast", "relu", "tanh", "erf", "sqrt",
               "exp", "power", "rsqrt", "sigmoid", "where", "clip")
ORT_KINDS = {
    "matmul": ("Gemm", "MatMul", "FusedMatMul", "FusedGemm"),
    "softmax": ("Softmax",), "gelu": ("Gelu", "FastGelu", "BiasGelu"),
    "layer norm": ("LayerNormalization", "SkipLayerNormalization",
                   "SimplifiedLayerNormalization", "SkipSimplifiedLayerNormalization"),
    "max pool": ("MaxPool",), "global avg pool": ("GlobalAveragePool", "ReduceMean"),
    "gather": ("Gather",), "layout transform": ("ReorderInput", "ReorderOutput"),
    "elementwise": ("Add", "Mul", "Sub", "Div", "Relu", "Tanh", "Erf", "Cast", "Sqrt", "Pow",
                    "Sigmoid", "Where", "Clip"),
}


# -- layers -----------------------------------------------------------------------------------
def _channels(shape: list[int]) -> int:
    """Channels of an NCHW or blocked NCHW[x]c activation."""
    return shape[1] * shape[4] if len(shape) == 5 else shape[1]


def conv_key(data: list[int], weight: list[int], out: list[int]) -> str:
    """A convolution's layer: kernel/stride, channels in->out, output size. ``weight``: OIHW,
    or blocked OIHW[i]i[o]o (6-D). A fused residual add is not in the key: where a block has a
    downsample, TVM adds the residual in the 1x1 convolution and onnxruntime in the 3x3 one."""
    if len(weight) == 6:
        o, i, kh, kw = weight[0] * weight[5], weight[1] * weight[4], weight[2], weight[3]
    else:
        o, i, kh, kw = weight
    stride = max(1, round(data[2] / out[2]))
    return f"conv {kh}x{kw}/{stride} {i}->{o} {out[2]}x{out[3]}"


def matmul_key(a: list[int], out: list[int]) -> str:
    """A matmul's layer: batch x (M, K, N), leading unit dimensions dropped."""
    batch = math.prod(out[:-2]) if len(out) > 2 else 1
    m = out[-2] if len(out) > 1 else 1
    return f"matmul {'%dx' % batch if batch > 1 else ''}{m}x{a[-1]}x{out[-1]}"


def tvm_layer(name: str, shapes: list[list[int]]) -> str:
    """The layer of one compiled kernel call, from its name and its arguments' shapes (inputs
    first, the output last, as Relax passes them)."""
    words = set(re.sub(r"\d+", "", name).split("_"))
    if "conv2d" in name:
        return conv_key(shapes[0], shapes[1], shapes[-1])
    if "matmul" in words or "dense" in words:
        return matmul_key(shapes[0], shapes[-1])
    for word, kind in (("softmax", "softmax"), ("layer_norm", "layer norm"), ("gelu", "gelu"),
                       ("max_pool", "max pool"), ("mean", "global avg pool"),
                       ("adaptive_avg_pool", "global avg pool"), ("take", "gather"),
                       ("layout_transform", "layout transform")):
        if word in name:
            return kind
    return "elementwise" if words & set(ELEMENTWISE) else "data movement"


def ort_layer(op: str, inputs: list[list[int]], outputs: list[list[int]]) -> str:
    """The layer of one onnxruntime node, from its operator and shapes."""
    if op in ("Conv", "FusedConv"):
        return conv_key(inputs[0], inputs[1], outputs[0])
    if op in ORT_KINDS["matmul"]:
        return matmul_key(inputs[0], outputs[0])
    return next((kind for kind, ops in ORT_KINDS.items() if op in ops), "data movement")


# -- measuring --------------------------------------------------------------------------------
def _median_per_site(runs: list[list[tuple]]) -> list[tuple]:
    """(name, shapes..., median ms) per call site over runs of one call sequence."""
    if any(len(r) != len(runs[0]) for r in runs):
        raise TclError("the profiled runs differ in their calls: one sequence was expected")
    return [(*site[:-1], statistics.median(r[i][-1] for r in runs))
            for i, site in enumerate(runs[0])]


def measure(paths: Paths, run_dir: Path, repeats: int) -> dict:
    """One run's network and onnxruntime, profiled and plain, alternating ``repeats`` times."""
    import numpy as np
    import tvm
    from tvm import relax

    from tcl.store.devices import host_identity
    from tcl.tune import compile_choices, onnxruntime_session, resolve_instance

    summary = json.loads((run_dir / "summary.json").read_text())
    if not (run_dir / "network.so").exists():
        raise TclError(f"{run_dir}: no network.so (a finished tcl tune run was expected)")
    inst = resolve_instance(paths, summary["network"])
    model, example = inst.module(), inst.example()
    dev = tvm.cpu()
    lib = tvm.runtime.load_module(str(run_dir / "network.so"))
    plain, profiled = relax.VirtualMachine(lib, dev), relax.VirtualMachine(lib, dev)
    args = [tvm.runtime.tensor(x.numpy(), dev) for x in example]
    calls: list[list] = []

    def instrument(func, name, before, ret, *fargs):
        if before:
            shapes = [list(a.shape) for a in fargs if hasattr(a, "shape")]
            calls.append([name, shapes, time.perf_counter_ns()])   # the clock last
        else:
            calls[-1][2] = (time.perf_counter_ns() - calls[-1][2]) / 1e6
        return 0

    profiled.set_instrument(instrument)
    threads = len(os.sched_getaffinity(0))
    with tempfile.TemporaryDirectory() as tmp:
        ort_profiled, feeds = onnxruntime_session(model, example, threads, f"{tmp}/ort")
        ort_plain, _ = onnxruntime_session(model, example, threads)
        tvm_runs, tvm_ms, ort_ms = [], [], []
        for _ in range(repeats + 1):   # the first round warms every side up
            calls = []
            profiled["main"](*args)
            tvm_runs.append([(n, s, ms) for n, s, ms in calls])
            for fn, times in ((lambda: plain["main"](*args), tvm_ms),
                              (lambda: ort_plain.run(None, feeds), ort_ms)):
                start = time.perf_counter()
                fn()
                times.append((time.perf_counter() - start) * 1e3)
            ort_profiled.run(None, feeds)
        events = json.loads(Path(ort_profiled.end_profiling()).read_text())
    nodes: dict[str, list] = {}
    run_ms = []
    for e in events:
        if e.get("cat") == "Session" and e["name"] == "model_run":
            run_ms.append(e["dur"] / 1e3)
        if e.get("cat") == "Node" and e["name"].endswith("_kernel_time"):
            a = e["args"]
            shapes = [[list(x.values())[0] for x in a.get(k, [])]
                      for k in ("input_type_shape", "output_type_shape")]
            nodes.setdefault(e["name"], []).append((a["op_name"], *shapes, e["dur"] / 1e3))
    ort_sites = []   # per node: its operator and shapes, and its median after the warm-up
    for runs in nodes.values():
        op, ins, outs, _ = runs[0]
        ort_sites.append((op, ins, outs, statistics.median(x[-1] for x in runs[1:] or runs)))
    return {"run": str(run_dir), "network": summary["network"], "device": summary["device"],
            "model": summary["model"], "layout": compile_choices(summary)["layout"],
            "tasks": sorted(summary["trials_per_task"]), "threads": threads,
            "host": host_identity(), "repeats": repeats,
            "tvm_calls": _median_per_site(tvm_runs[1:]),
            "tvm_ms": float(np.median(tvm_ms[1:])), "ort_nodes": ort_sites,
            "ort_ms": float(np.median(ort_ms[1:])),
            "ort_profiled_ms": float(np.median(run_ms[1:] or run_ms))}


# -- the table --------------------------------------------------------------------------------
def layers(row: dict) -> dict[str, dict]:
    """Per layer: TVM's calls and ms (kernels of tuned tasks and others) and onnxruntime's."""
    out: dict[str, dict] = defaultdict(lambda: {"tvm_n": 0, "tvm_ms": 0.0, "untuned_ms": 0.0,
                                                "ort_n": 0, "ort_ms": 0.0})
    tasks = set(row["tasks"])
    for name, shapes, ms in row["tvm_calls"]:
        if name.startswith(BUILTIN):
            continue
        d = out[tvm_layer(name, shapes)]
        d["tvm_n"] += 1
        d["tvm_ms"] += ms
        if name not in tasks:
            d["untuned_ms"] += ms
    for op, ins, outs, ms in row["ort_nodes"]:
        d = out[ort_layer(op, ins, outs)]
        d["ort_n"] += 1
        d["ort_ms"] += ms
    return dict(out)


def format_table(row: dict) -> str:
    by_layer = layers(row)
    lines = [f"## {row['network']}: {row['run']} ({row['model']}, layout {row['layout']}) on "
             f"{row['device']}; {row['threads']} thread, host {host_short(row['host'])}, "
             f"medians of {row['repeats']} profiled runs\n",
             "| layer | TVM calls | TVM ms | onnxruntime nodes | onnxruntime ms | TVM - ort ms "
             "| TVM / ort |", "|---|---|---|---|---|---|---|"]
    for key, d in sorted(by_layer.items(), key=lambda kv: -(kv[1]["tvm_ms"] - kv[1]["ort_ms"])):
        ratio = d["tvm_ms"] / d["ort_ms"] if d["ort_ms"] > 0 else math.nan
        lines.append(f"| {key} | {d['tvm_n']} | {d['tvm_ms']:.3f} | {d['ort_n']} | "
                     f"{d['ort_ms']:.3f} | {d['tvm_ms'] - d['ort_ms']:+.3f} | "
                     + ("-" if ratio != ratio else f"{ratio:.2f}") + " |")
    kernels = sum(d["tvm_ms"] for d in by_layer.values())
    untuned = sum(d["untuned_ms"] for d in by_layer.values())
    builtins = sum(ms for n, _, ms in row["tvm_calls"] if n.startswith(BUILTIN))
    profiled = kernels + builtins
    nodes = sum(d["ort_ms"] for d in by_layer.values())
    layout = by_layer.get("layout transform", {}).get("tvm_ms", 0.0)
    worst = sorted(by_layer, key=lambda k: -(by_layer[k]["tvm_ms"] - by_layer[k]["ort_ms"]))[:5]
    lines += [
        "",
        f"TVM, end to end {row['tvm_ms']:.2f} ms (plain runs): kernels {kernels:.2f} ms "
        f"(of which outside every tuned task {untuned:.2f}; layout transforms {layout:.2f}), VM "
        f"builtins {builtins:.2f}, VM overhead {row['tvm_ms'] - profiled:+.2f} (end to end "
        f"minus every timed call): {100 * (row['tvm_ms'] - kernels + untuned) / row['tvm_ms']:.1f}"
        "% of end to end outside the tuned tasks",
        f"onnxruntime, end to end {row['ort_ms']:.2f} ms (plain runs; profiled "
        f"{row['ort_profiled_ms']:.2f}): nodes {nodes:.2f} ms, outside them "
        f"{row['ort_ms'] - nodes:+.2f}",
        "the five layers that lose the most (TVM - onnxruntime): " + ", ".join(
            f"{k} ({by_layer[k]['tvm_ms'] - by_layer[k]['ort_ms']:+.2f} ms)" for k in worst),
    ]
    return "\n".join(lines)


def run(args) -> None:
    if args.repeats < 1:
        raise TclError(f"--repeats {args.repeats}: expected at least 1")
    paths = Paths(Path(args.data).resolve())
    for item in args.runs.split(","):
        name, sep, run_dir = item.partition("=")
        if not sep:
            raise TclError(f"--runs item {item!r}: expected NAME=RUN_DIR")
        row = {"name": name, **measure(paths, Path(run_dir), args.repeats)}
        print(format_table(row) + "\n")
        if args.results:
            with open(args.results, "a") as f:
                f.write(json.dumps(row) + "\n")


def summarize(args) -> None:
    for line in Path(args.results).read_text().splitlines():
        print(format_table(json.loads(line)) + "\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", help="NAME=RUN_DIR,...: finished tcl tune runs")
    ap.add_argument("--data", default="data")
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--results", help="a JSON-lines file the measurements are appended to")
    ap.add_argument("--summarize", action="store_true", help="print the tables of --results")
    args = ap.parse_args(argv)
    if not args.summarize and not args.runs:
        ap.error("--runs is required unless --summarize")
    return report_errors("layer_table", lambda: (summarize if args.summarize else run)(args))


if __name__ == "__main__":
    sys.exit(main())
