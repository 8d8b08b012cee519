"""What a user would run instead of a tuned network: PyTorch eager and onnxruntime, timed in the
calling process, on its cores, with ``threads`` threads each.

Both are timed by the device's ``TimingProtocol`` (``framework_ms``: the median of its ``repeat``
calls after warm-up), so their figures compare with each other across runs. onnxruntime is optional (``pip install -e
".[baselines]"``): without it ``onnxruntime_ms`` is NaN. It has no ISA cap, unlike PyTorch
(``Device.framework_isa_env``): on a device capped below the host's ISA it runs the host's.
"""
from __future__ import annotations

import math
import tempfile

from ..measure.devices.settings import TimingProtocol


def eager_ms(model, example: tuple, threads: int, timing: TimingProtocol) -> float:
    """PyTorch eager's latency of ``model(*example)`` in ms, as ``timing`` times a framework."""
    import torch

    torch.set_num_threads(threads)
    with torch.no_grad():
        return timing.framework_ms(lambda: model(*example))


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


def onnxruntime_ms(model, example: tuple, threads: int, timing: TimingProtocol) -> float:
    """onnxruntime's latency in ms of ``model`` (``onnxruntime_session``), as ``timing`` times a
    framework; NaN where it is not installed."""
    if onnxruntime_version() is None:
        return math.nan
    session, feeds = onnxruntime_session(model, example, threads)
    return timing.framework_ms(lambda: session.run(None, feeds))
