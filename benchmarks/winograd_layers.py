"""Fewer FLOPs for 3x3 convolutions (issue 57, point 1): each stride-1 3x3 convolution of resnet18
as one layer (conv2d + ReLU, as the network fuses it), tuned by MetaSchedule in every arm at
equal trials, against onnxruntime and PyTorch eager on the same core, in one process.

Arms: the direct convolution in NCHW and in the blocked NCHW[x]c layout (``tcl tune --layout
nchwc``), and Winograd F(2x2,3x3) and F(4x4,3x3) (``tcl tune --conv winograd-2|winograd-4``).
Each arm's layer module is what ``tcl.tune.layout.lowered_module`` makes of it for the network;
MetaSchedule's own search and XGBoost model tune it (``--trials`` per layer and arm, the same
seed), ``compile_relax`` applies the best, and the compiled layer is timed in ``--sittings``
rounds, interleaved with onnxruntime and PyTorch eager running the same layer (one thread
each: run it under ``taskset`` on a quiet core). Each row also holds the largest absolute error
against PyTorch's output. The table gives medians over sittings and each arm's ratio to
onnxruntime.

    taskset -c 1 python benchmarks/winograd_layers.py --device rocketlake-1c --trials 64 \\
        --sittings 3 --results docs/bench-winograd-layers.jsonl
    python benchmarks/winograd_layers.py --summarize --results docs/bench-winograd-layers.jsonl
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from _common import host_short, report_errors

ARMS = {"direct-nchw": ("nchw", "direct"), "direct-nchwc": ("nchwc", "direct"),
        "winograd-2": ("nchw", "winograd-2"), "winograd-4": ("nchw", "winograd-4")}
REPEAT = 50   # timed calls per sitting, after warm-up (median)
SEARCH = (256, 3)   # evolutionary search: population, generations


def resnet18_layers() -> list[tuple[int, int]]:
    """(channels, size) of resnet18's stride-1 3x3 convolutions (the zoo's resnet18-b1-224),
    once each."""
    import torch

    from tcl.config import Paths
    from tcl.tune.plan import resolve_instance

    inst = resolve_instance(Paths.default(), "resnet18-b1-224")
    net, size = inst.module().eval(), {}

    def hook(module, inputs, _):
        if (module.kernel_size == (3, 3) and module.stride == (1, 1)
                and module.in_channels == module.out_channels and module.groups == 1):
            size[(module.in_channels, inputs[0].shape[-1])] = True

    handles = [m.register_forward_hook(hook) for m in net.modules()
               if isinstance(m, torch.nn.Conv2d)]
    with torch.no_grad():
        net(*inst.example())
    for h in handles:
        h.remove()
    return sorted(size)


def layer(channels: int):
    import torch

    return torch.nn.Sequential(torch.nn.Conv2d(channels, channels, 3, 1, 1, bias=False),
                               torch.nn.ReLU()).eval()


def tune_layer(net, example, layout: str, conv: str, kind, trials: int, seed: int,
               work_dir: Path):
    """The layer lowered as the arm says, tuned by MetaSchedule with the device's builder and
    runner (``kind``: its ``DeviceKind``, what ``tcl tune`` measures with), compiled: (vm,
    tasks)."""
    import torch
    import tvm
    from tvm import relax
    from tvm.relax.frontend.torch import from_exported_program

    from tcl.tune.layout import lowered_module
    from tcl.tvm_compat import meta_schedule

    from tcl.measure.devices.base import stop_runner

    ms = meta_schedule()
    target = kind.device.tvm_target()
    exported = from_exported_program(torch.export.export(net, example),
                                     keep_params_as_input=False)
    mod = lowered_module(exported, layout, target, conv=conv)
    tasks = [t for t in ms.relax_integration.extract_tasks(mod, target)
             if not t.mod.attrs.get("tirx.is_scheduled", False)]
    # a smaller population than MetaSchedule's 512 x 4 generations: the same for every arm
    strategy = ms.search_strategy.EvolutionarySearch(population_size=SEARCH[0],
                                                     init_min_unmeasured=50,
                                                     genetic_num_iters=SEARCH[1])
    builder, runner = kind.builder(pooled=True), kind.runner()
    try:
        database = ms.relax_integration.tune_relax(
            mod, params={}, target=target, work_dir=str(work_dir),
            max_trials_global=trials * len(tasks), num_trials_per_iter=min(trials, 64),
            seed=seed, strategy=strategy, builder=builder, runner=runner)
    finally:
        builder.close()
        stop_runner(runner)
    with target:
        lib = ms.relax_integration.compile_relax(database, mod, target, params={})
    return relax.VirtualMachine(lib, tvm.cpu()), [t.task_name for t in tasks]


def vm_ms(vm, x, repeat: int) -> float:
    import tvm

    from tcl.measure.timed import median_ms

    arg = tvm.runtime.tensor(x)
    return median_ms(lambda: vm["main"](arg), repeat)


def run(args) -> None:
    import numpy as np
    import torch
    import tvm

    from tcl.config import Paths
    from tcl.measure.devices import create
    from tcl.store.devices import host_identity
    from tcl.tune.plan import tunable_device
    from tcl.tune.frameworks import eager_ms, onnxruntime_ms

    torch.set_num_threads(1)
    kind = create(tunable_device(Paths.default(), args.device))
    results = Path(args.results)
    done = set()
    if results.exists():
        done = {(r["channels"], r["arm"]) for r in map(json.loads, results.read_text().splitlines())}
    for channels, size in resnet18_layers():
        if args.layers and channels not in args.layers:
            continue
        torch.manual_seed(args.seed)
        net, x = layer(channels), torch.randn(1, channels, size, size)
        reference = net(x).detach().numpy()
        compiled = {}
        for arm, (layout, conv) in ARMS.items():
            if (channels, arm) in done:
                continue
            start = time.perf_counter()
            with tempfile.TemporaryDirectory() as tmp:
                vm, tasks = tune_layer(net, (x,), layout, conv, kind, args.trials, args.seed,
                                       Path(tmp))
            out = vm["main"](tvm.runtime.tensor(x.numpy()))
            out = (out if hasattr(out, "numpy") else out[0]).numpy()   # a tuple of one
            compiled[arm] = (vm, tasks, float(np.abs(out - reference).max()),
                             time.perf_counter() - start)
        if not compiled:
            continue
        timings = {arm: [] for arm in compiled} | {"onnxruntime": [], "pytorch": []}
        for _ in range(args.sittings):   # interleaved: a drift in the host's speed hits all
            for arm, (vm, *_rest) in compiled.items():
                timings[arm].append(vm_ms(vm, x.numpy(), REPEAT))
            timings["onnxruntime"].append(onnxruntime_ms(net, (x,), 1, REPEAT))
            timings["pytorch"].append(eager_ms(net, (x,), 1, REPEAT))
        with results.open("a") as f:
            for arm, (vm, tasks, err, secs) in compiled.items():
                f.write(json.dumps({
                    "layer": f"conv 3x3/1 {channels}->{channels} {size}x{size}",
                    "channels": channels, "size": size, "arm": arm, "trials": args.trials,
                    "seed": args.seed, "tasks": tasks, "max_abs_err": err,
                    "tune_s": round(secs, 1), "ms": timings[arm],
                    "onnxruntime_ms": timings["onnxruntime"], "pytorch_ms": timings["pytorch"],
                    "device": args.device, "host": host_identity(), "threads": 1,
                    "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}) + "\n")
        print(f"conv {channels}x{size}: " + ", ".join(
            f"{k} {statistics.median(v):.3f} ms" for k, v in timings.items()), flush=True)


def summarize(results: Path) -> None:
    rows = [json.loads(line) for line in results.read_text().splitlines()]
    print(f"host: {host_short(rows[0]['host'])}; {rows[0]['trials']} trials per layer and arm, "
          f"{len(rows[0]['ms'])} sittings, 1 thread; ms = median over sittings\n")
    arms = list(ARMS)
    print("| layer | " + " | ".join(arms) + " | onnxruntime | PyTorch | best / onnxruntime |")
    print("|---" * (len(arms) + 4) + "|")
    total = {a: 0.0 for a in arms} | {"onnxruntime": 0.0, "pytorch": 0.0}
    for layer_name in dict.fromkeys(r["layer"] for r in rows):
        mine = {r["arm"]: r for r in rows if r["layer"] == layer_name}
        ort = statistics.median(next(iter(mine.values()))["onnxruntime_ms"])
        eager = statistics.median(next(iter(mine.values()))["pytorch_ms"])
        ms = {a: statistics.median(mine[a]["ms"]) for a in arms if a in mine}
        best = min(ms, key=ms.get)
        for a, v in ms.items():
            total[a] += v
        total["onnxruntime"] += ort
        total["pytorch"] += eager
        cells = [f"{ms[a]:.3f} ({ms[a] / ort:.2f}x)" if a in ms else "-" for a in arms]
        print(f"| {layer_name} | " + " | ".join(cells) + f" | {ort:.3f} | {eager:.3f} | "
              f"{best} {ms[best] / ort:.2f}x |")
    print("| sum | " + " | ".join(f"{total[a]:.3f} ({total[a] / total['onnxruntime']:.2f}x)"
                                  for a in arms)
          + f" | {total['onnxruntime']:.3f} | {total['pytorch']:.3f} | |")
    errs = {a: max(r["max_abs_err"] for r in rows if r["arm"] == a) for a in arms
            if any(r["arm"] == a for r in rows)}
    print("\nlargest absolute error against PyTorch: "
          + ", ".join(f"{a} {e:.1e}" for a, e in errs.items()))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", default="docs/bench-winograd-layers.jsonl")
    parser.add_argument("--device", required=True,
                        help="a one-core device of this host (tcl device list), e.g. rocketlake-1c")
    parser.add_argument("--trials", type=int, default=64)
    parser.add_argument("--sittings", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--layers", type=int, nargs="*", help="only these channel counts")
    parser.add_argument("--summarize", action="store_true")
    args = parser.parse_args(argv)
    job = (lambda: summarize(Path(args.results))) if args.summarize else (lambda: run(args))
    return report_errors("winograd_layers", job)


if __name__ == "__main__":
    sys.exit(main())
