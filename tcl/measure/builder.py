"""Builders: MetaSchedule's LocalBuilder with a build function that skips the 30 s import.

The stock ``default_build`` imports ``tvm.s_tir.tensor_intrin`` in every worker, and LocalBuilder
restarts its worker pool for every batch, so each batch paid that import again. fp32 CPU
schedules sampled by tcl use no tensor intrinsics, so the build needs only what follows.
"""
from __future__ import annotations

from ..tvm_compat import meta_schedule
from .interrupt import held_interrupts, quiet_interrupts
from .devices.settings import SETTINGS


def fast_build(mod, target, _params):
    """What MetaSchedule's default_build does, minus the tensor-intrinsic import."""
    from tvm.driver import build as tvm_build
    from tvm.s_tir.transform import RemoveWeightLayoutRewriteBlock

    mod = RemoveWeightLayoutRewriteBlock(skip_tensor_rewrite=True)(mod)
    return tvm_build(mod, target=target)


def local_builder(max_workers: int | None = None,
                  timeout_sec: float = SETTINGS.build_timeout_s):
    """MetaSchedule's LocalBuilder using :func:`fast_build` (a pipelined collection builds in
    ``tcl.measure.pooled_builder``'s pool instead, pinned off the device's cores). Its workers
    end silently on a Ctrl-C (``quiet_interrupts``), as a runner's do."""
    ms = meta_schedule()
    # the constructor's sanity check starts a worker from this thread: with SIGINT held, it
    # starts with it held until its initializer quiets it (a Ctrl-C during its imports printed
    # a traceback: issue 54 item 17)
    with held_interrupts():
        return ms.builder.LocalBuilder(max_workers=max_workers, timeout_sec=timeout_sec,
                                       f_build=fast_build, initializer=quiet_interrupts)


def build_to_bytes(mod_json: str, target_json: str) -> tuple[bytes | None, str | None]:
    """Build one program and export it as MetaSchedule's LocalBuilder does: the library's
    bytes, or the build error. What a Dask worker runs (``tcl.measure.dask_builder``); the
    program and the target come as TVM JSON (``tvm.ir.save_json``)."""
    import shutil
    from pathlib import Path

    import tvm
    from tvm.s_tir.meta_schedule.builder.local_builder import default_export

    out = None
    try:
        mod = tvm.ir.load_json(mod_json)
        target = tvm.ir.load_json(target_json)
        out = Path(default_export(fast_build(mod, target, None)))
        return out.read_bytes(), None
    except Exception as e:  # noqa: BLE001 - a failing build is a result (build_error), not a crash
        return None, f"{type(e).__name__}: {e}"
    finally:
        if out is not None:
            shutil.rmtree(out.parent, ignore_errors=True)


def builder_result(data: bytes | None, error: str | None):
    """A MetaSchedule BuilderResult from ``build_to_bytes``'s answer: the library written to a
    fresh local temp directory (where the runner reads it), or the build error."""
    import os
    import tempfile
    from pathlib import Path

    ms = meta_schedule()
    if data is None:
        return ms.builder.BuilderResult(None, error)
    local = Path(tempfile.mkdtemp(prefix="tcl-build-")) / "tvm_tmp_mod.tar"
    local.write_bytes(data)
    return ms.builder.BuilderResult(os.fspath(local), None)

