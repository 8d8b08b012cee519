"""The one place that works around TVM 0.27 start-up costs (see docs/architecture.md)."""
from __future__ import annotations

import inspect
import sys
from functools import lru_cache


def _shallow_stack(context: int = 1) -> list[inspect.FrameInfo]:
    """``inspect.stack()`` that reads source context for the three innermost frames only.

    TVMScript's ``prim_func`` decorator reads ``stack()[2].code_context`` and the frames' locals;
    the stock function also resolves the module of every outer frame, scanning ``sys.modules``
    for each (frozen importlib frames never match), which costs seconds per call.
    """
    frame = sys._getframe(1)
    out = []
    while frame is not None:
        if len(out) < 3:
            info = inspect.getframeinfo(frame, context)
        else:
            info = inspect.Traceback(frame.f_code.co_filename, frame.f_lineno,
                                     frame.f_code.co_name, None, None)
        out.append(inspect.FrameInfo(frame, *info))
        frame = frame.f_back
    return out


@lru_cache(maxsize=1)
def import_tensor_intrin() -> None:
    """Import ``tvm.s_tir.tensor_intrin`` (needed by TuneContext) in ~5 s instead of ~35 s."""
    if "tvm.s_tir.tensor_intrin" in sys.modules:
        return
    original = inspect.stack
    inspect.stack = _shallow_stack
    try:
        import tvm.s_tir.tensor_intrin  # noqa: F401
    finally:
        inspect.stack = original


def meta_schedule():
    """``tvm.s_tir.meta_schedule``, with the tensor intrinsics already registered cheaply."""
    import_tensor_intrin()
    from tvm.s_tir import meta_schedule as ms

    return ms
