"""What a user would run instead of a tuned network: PyTorch eager and onnxruntime, timed in the
calling process, on its cores, with ``threads`` threads each.

Both are timed as ``median_ms`` times them (the median of ``repeat`` calls after warm-up), so
their figures compare with each other across runs. onnxruntime is optional (``pip install -e
".[baselines]"``): without it ``onnxruntime_ms`` is NaN. It has no ISA cap, unlike PyTorch
(``Device.framework_isa_env``): on a device capped below the host's ISA it runs the host's.
"""
from __future__ import annotations

import math
import tempfile

from ..measure.timed import median_ms


def eager_ms(model, example: tuple, threads: int, repeat: int) -> float:
    """PyTorch eager's median latency of ``model(*example)`` in ms."""
    import torch

    torch.set_num_threads(threads)
    with torch.no_grad():
        return median_ms(lambda: model(*example), repeat)


def onnxruntime_version() -> str | None:
    """The installed onnxruntime's version, or None where it is not installed."""
    try:
        import onnxruntime
    except ImportError:
        return None
    return onnxruntime.__version__


def onnxruntime_session(model, example: tuple, threads: int, profile_prefix: str | None = None):
    """``model`` exported to ONNX (torch's dynamo exporter) in an onnxruntime CPU session with
    ``threads`` intra-op threads and one inter-op, and its feeds for ``example``: (session,
    feeds). ``profile_prefix``: onnxruntime's profiler on, writing there (``end_profiling``)."""
    import onnxruntime as ort
    import torch

    with tempfile.TemporaryDirectory() as tmp, torch.no_grad():
        path = f"{tmp}/model.onnx"
        torch.onnx.export(model, tuple(example), path, dynamo=True, verbose=False)
        opts = ort.SessionOptions()
        opts.intra_op_num_threads, opts.inter_op_num_threads = threads, 1
        if profile_prefix is not None:
            opts.enable_profiling, opts.profile_file_prefix = True, profile_prefix
        session = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
    return session, {i.name: x.numpy() for i, x in zip(session.get_inputs(), example)}


def onnxruntime_ms(model, example: tuple, threads: int, repeat: int) -> float:
    """onnxruntime's median latency in ms of ``model`` (``onnxruntime_session``); NaN where it
    is not installed."""
    if onnxruntime_version() is None:
        return math.nan
    session, feeds = onnxruntime_session(model, example, threads)
    return median_ms(lambda: session.run(None, feeds), repeat)
