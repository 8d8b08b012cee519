"""Builders: MetaSchedule's LocalBuilder with a build function that skips the 30 s import.

The stock ``default_build`` imports ``tvm.s_tir.tensor_intrin`` in every worker, and LocalBuilder
restarts its worker pool for every batch, so each batch paid that import again. fp32 CPU
schedules sampled by tcl use no tensor intrinsics, so the build needs only what follows.
"""
from __future__ import annotations


def fast_build(mod, target, _params):
    """What MetaSchedule's default_build does, minus the tensor-intrinsic import."""
    from tvm.driver import build as tvm_build
    from tvm.s_tir.transform import RemoveWeightLayoutRewriteBlock

    mod = RemoveWeightLayoutRewriteBlock(skip_tensor_rewrite=True)(mod)
    return tvm_build(mod, target=target)


def local_builder(max_workers: int | None = None, timeout_sec: float = 60.0):
    """MetaSchedule's LocalBuilder using :func:`fast_build`."""
    from ..tvm_compat import meta_schedule

    ms = meta_schedule()
    return ms.builder.LocalBuilder(max_workers=max_workers, timeout_sec=timeout_sec,
                                   f_build=fast_build)
