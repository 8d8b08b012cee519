"""Where a tuning run's time goes, and how fast its compiled network is.

``time_split`` divides the tuning wall time into ``SPLIT``'s parts. ``time_compiled`` times the
compiled network end to end, and PyTorch eager (and onnxruntime, where asked and installed) on
the same cores, where the device's timer runs it (``DeviceKind.timer``: for a CPU of this host,
a fresh process pinned to the profile's cores) as its timing protocol says
(``DeviceKind.timing``; ``measure_in_pinned_process``); ``retime`` times a finished run's
network again.
"""
from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import NamedTuple

import numpy as np

from ..config import Paths, TclError
from ..measure.devices import create
from ..measure.devices.settings import TimingProtocol
from .frameworks import eager_ms, onnxruntime_ms
from ..store.devices import DeviceRegistry
from .plan import resolve_instance

SPLIT = ("search", "featurize", "predict", "update", "build", "run")


class Timed(NamedTuple):
    """The compiled network's outputs and latency, and the frameworks' on the same cores (NaN:
    not timed: a network that is not the zoo's, or onnxruntime not asked for or installed)."""
    outputs: list[np.ndarray]
    mean_ms: float
    std_ms: float
    torch_ms: float
    onnxruntime_ms: float = math.nan


def time_split(tune_s: float, build_s: float, run_s: float, model: dict[str, float]) -> dict:
    """``{part: {"s", "share"}}`` for the parts of ``SPLIT``: build and run as the timed builder
    and runner counted them, featurize, predict and update (model fitting) as
    ``ScoredCostModel.seconds`` did; search is the rest of the wall time (the evolutionary
    search's sampling, mutation, post-processing, and MetaSchedule's bookkeeping)."""
    parts = {"featurize": model.get("featurize", 0.0), "predict": model.get("predict", 0.0),
             "update": model.get("update", 0.0), "build": build_s, "run": run_s}
    parts["search"] = max(0.0, tune_s - sum(parts.values()))
    return {k: {"s": round(parts[k], 2), "share": round(parts[k] / tune_s, 4) if tune_s else 0.0}
            for k in SPLIT}


def time_compiled(lib: Path, inst, example, device, *, onnxruntime: bool = False) -> Timed:
    """The compiled network ``lib`` timed, and PyTorch eager (and onnxruntime with
    ``onnxruntime``) on the same cores, by the device's timer and timing protocol."""
    kind = create(device)
    spec = None if inst.source is not None else (inst.network, inst.batch, inst.size)
    with kind.timer() as run:
        return run(measure_in_pinned_process, str(lib), [x.numpy() for x in example],
                   device.num_cores, kind.timing, spec, device.framework_isa_env(), onnxruntime)


def retime(paths: Paths, run_dir: str | Path) -> dict[str, float]:
    """The finished tuning run's compiled network (``network.so``), PyTorch eager and
    onnxruntime (where installed) timed again, as the run timed them: for a quieter host than
    the one the run shared."""
    run_dir = Path(run_dir)
    summary_file, lib = run_dir / "summary.json", run_dir / "network.so"
    if not summary_file.exists() or not lib.exists():
        raise TclError(f"{run_dir} is not a finished tuning run (summary.json and network.so "
                       "expected)")
    summary = json.loads(summary_file.read_text())
    inst = resolve_instance(paths, summary["network"])
    device = DeviceRegistry(paths).get(summary["device"])
    t = time_compiled(lib, inst, inst.example(), device, onnxruntime=True)
    return {"latency_ms": t.mean_ms, "latency_std_ms": t.std_ms, "torch_ms": t.torch_ms,
            "onnxruntime_ms": t.onnxruntime_ms}


def measure_in_pinned_process(lib_file: str, inputs: list[np.ndarray], num_cores: int,
                              timing: TimingProtocol, torch_spec: tuple | None,
                              torch_env: dict[str, str], onnxruntime: bool = False) -> Timed:
    """Runs in a fresh process pinned to the profile's cores (``LocalCPU.timer``): the
    compiled network's outputs and latency, and PyTorch eager's latency on the same cores, as
    ``timing`` times each, at the profile's ISA (``torch_env``: ``Device.framework_isa_env``,
    set before PyTorch's first operation, when it reads them), and with ``onnxruntime``
    onnxruntime's (no ISA cap). A spawned pool pickles it by reference: it stays a
    module-level function of this module."""
    import tvm
    from tvm import relax

    dev = tvm.cpu()
    vm = relax.VirtualMachine(tvm.runtime.load_module(lib_file), dev)
    args = [tvm.runtime.tensor(x, dev) for x in inputs]
    out = vm["main"](*args)
    outs = [np.asarray(o.numpy()) for o in (out if isinstance(out, (list, tuple)) or
                                             type(out).__name__ == "Array" else [out])]
    mean, std = timing.network_ms(vm, dev, args)
    torch_ms = ort_ms = math.nan
    if torch_spec is not None:
        os.environ.update(torch_env)
        from ..zoo.networks import NETWORKS   # lazy: torch, in the timing process only

        name, batch, size = torch_spec
        model = NETWORKS[name].model(size).eval()
        example = NETWORKS[name].example(batch, size)
        torch_ms = eager_ms(model, example, num_cores, timing)
        if onnxruntime:
            ort_ms = onnxruntime_ms(model, example, num_cores, timing)
    return Timed(outs, mean, std, torch_ms, ort_ms)
