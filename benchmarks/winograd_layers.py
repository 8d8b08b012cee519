"""Fewer FLOPs for 3x3 convolutions (issue 57, point 1): each stride-1 3x3 convolution of resnet18
as one layer (conv2d + ReLU, as the network fuses it), tuned by MetaSchedule in every arm at
equal trials, against onnxruntime and PyTorch eager on the same core, in one process.

Arms: the direct convolution in NCHW and in the blocked NCHW[x]c layout (``tcl tune --layout
nchwc``), and Winograd F(2x2,3x3) and F(4x4,3x3) (``tcl tune --conv winograd-2|winograd-4``).
Each arm's layer module is what ``tcl.tune.layout.lowered_module`` makes of it for the network;
MetaSchedule's own search and XGBoost model tune it (``--trials`` per layer and arm, the same
seed) with the device's builder and runner, and the layer's time is its best kernels' as the
runner measured them (the device's evaluator settings; for nchwc its layout transforms too).
TVM 0.27 cannot compile tuned Winograd kernels into a module (``tcl.tune.winograd``), so no arm
is timed compiled. onnxruntime and PyTorch eager run the same layer, one thread each, medians
over ``--sittings`` (run it under ``taskset`` on a quiet core). The table gives each arm's
ratio to onnxruntime.

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
               work_dir: Path) -> tuple[float, dict[str, float]]:
    """The layer lowered as the arm says, tuned by MetaSchedule with the device's builder and
    runner (``kind``: its ``DeviceKind``, what ``tcl tune`` measures with): the layer's time in
    ms, each task's best measured kernel (the mean of its run_secs) times its weight, summed,
    and each task's best. Kernels, not a compiled layer: TVM 0.27 cannot build the tuned
    Winograd kernels into a module (``tcl.tune.winograd.NOT_COMPILED``), so every arm is
    timed the same way, by MetaSchedule's runner with the device's evaluator settings."""
    import torch
    from tvm.relax.frontend.torch import from_exported_program

    from tcl.measure.devices.base import stop_runner
    from tcl.tune.layout import lowered_module
    from tcl.tvm_compat import FAILED_RUN_SECS, meta_schedule

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
    best = {}
    for task in tasks:
        top = database.get_top_k(database.commit_workload(task.dispatched[0]), 1)
        secs = [float(x) for x in top[0].run_secs] if top else []
        ok = secs and max(secs) < FAILED_RUN_SECS
        best[task.task_name] = 1e3 * sum(secs) / len(secs) if ok else float("nan")
    weights = {t.task_name: float(t.weight) for t in tasks}
    return sum(ms_ * weights[n] for n, ms_ in best.items()), best


def run(args) -> None:
    import torch

    from tcl.config import Paths, TclError
    from tcl.measure.devices import create
    from tcl.store.devices import host_identity
    from tcl.measure.devices.settings import TimingProtocol
    from tcl.tune.plan import tunable_device
    from tcl.tune.frameworks import eager_ms, onnxruntime_ms

    torch.set_num_threads(1)
    if not args.device:
        raise TclError("--device is required to run: a one-core device of this host (tcl "
                       "device list)")
    kind = create(tunable_device(Paths.default(), args.device))
    timing = TimingProtocol(repeat=REPEAT)
    results = Path(args.results)
    done = set()
    if results.exists():
        done = {(r["channels"], r["arm"]) for r in map(json.loads, results.read_text().splitlines())}
    for channels, size in resnet18_layers():
        if args.layers and channels not in args.layers:
            continue
        torch.manual_seed(args.seed)
        net, x = layer(channels), torch.randn(1, channels, size, size)
        tuned = {}
        for arm, (layout, conv) in ARMS.items():
            if (channels, arm) in done:
                continue
            start = time.perf_counter()
            with tempfile.TemporaryDirectory() as tmp:
                layer_ms, kernels = tune_layer(net, (x,), layout, conv, kind, args.trials,
                                               args.seed, Path(tmp))
            tuned[arm] = (layer_ms, kernels, time.perf_counter() - start)
            print(f"conv {channels}x{size} {arm}: {layer_ms:.3f} ms ({kernels})", flush=True)
        if not tuned:
            continue
        frameworks = {"onnxruntime": [], "pytorch": []}
        for _ in range(args.sittings):
            frameworks["onnxruntime"].append(onnxruntime_ms(net, (x,), 1, timing))
            frameworks["pytorch"].append(eager_ms(net, (x,), 1, timing))
        with results.open("a") as f:
            for arm, (layer_ms, kernels, secs) in tuned.items():
                f.write(json.dumps({
                    "layer": f"conv 3x3/1 {channels}->{channels} {size}x{size}",
                    "channels": channels, "size": size, "arm": arm, "trials": args.trials,
                    "seed": args.seed, "kernels_ms": kernels, "tune_s": round(secs, 1),
                    "ms": layer_ms, "onnxruntime_ms": frameworks["onnxruntime"],
                    "pytorch_ms": frameworks["pytorch"], "device": args.device,
                    "host": host_identity(), "threads": 1,
                    "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}) + "\n")
        print(f"conv {channels}x{size}: onnxruntime "
              f"{statistics.median(frameworks['onnxruntime']):.3f} ms, PyTorch "
              f"{statistics.median(frameworks['pytorch']):.3f} ms", flush=True)


def summarize(results: Path) -> None:
    rows = [json.loads(line) for line in results.read_text().splitlines()]
    print(f"host: {host_short(rows[0]['host'])}, device {rows[0]['device']}; "
          f"{rows[0]['trials']} trials per layer and arm; TVM: the best tuned kernels as "
          "MetaSchedule's runner measured them; onnxruntime and PyTorch: median over "
          f"{len(rows[0]['onnxruntime_ms'])} sittings, 1 thread\n")
    arms = list(ARMS)
    print("| layer | " + " | ".join(arms) + " | onnxruntime | PyTorch | best / onnxruntime |")
    print("|---" * (len(arms) + 4) + "|")
    total = {a: 0.0 for a in arms} | {"onnxruntime": 0.0, "pytorch": 0.0}
    for layer_name in dict.fromkeys(r["layer"] for r in rows):
        mine = {r["arm"]: r for r in rows if r["layer"] == layer_name}
        ort = statistics.median(next(iter(mine.values()))["onnxruntime_ms"])
        eager = statistics.median(next(iter(mine.values()))["pytorch_ms"])
        ms = {a: mine[a]["ms"] for a in arms if a in mine}
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", default="docs/bench-winograd-layers.jsonl")
    parser.add_argument("--device",
                        help="(required to run) a one-core device of this host (tcl device list), e.g. rocketlake-1c")
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
