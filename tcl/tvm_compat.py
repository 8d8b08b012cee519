"""The one place that works around TVM 0.27 start-up costs (see docs/architecture.md) and its
logging's traps, and the MetaSchedule conventions tcl reads."""
from __future__ import annotations

import inspect
import sys
from functools import lru_cache

from .config import TclError

# MetaSchedule stores a failed measurement as 1e10 seconds: a run this long or longer failed.
FAILED_RUN_SECS = 1e9


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


def meta_schedule(tensor_intrin: bool = True):
    """``tvm.s_tir.meta_schedule``, with the tensor intrinsics already registered cheaply;
    ``tensor_intrin=False`` for what needs none (databases, workloads, argument info: an
    export), which saves their import (5-30 s)."""
    if tensor_intrin:
        import_tensor_intrin()
    from tvm.s_tir import meta_schedule as ms

    return ms


# The attributes that compile_relax's pipeline leaves on fused PrimFuncs but extract_tasks does
# not (TVM 0.27: AnnotateTIROpPattern runs before FuseOps/FuseTIR in compile_relax; the functions
# FuseTIR makes keep "op_pattern", while the tasks extracted for them lack it; unfused functions
# carry it in both). The database keys workloads by structural hash, attributes included, so every
# fused task's tuning record was "not found" at compile time and fell back to an unscheduled loop
# nest (measured: bert_tiny-b1-128 on one core ran in 88 ms instead of 8).
_COMPILE_ONLY_ATTRS = ("op_pattern",)


def without_compile_attrs(mod):
    """``mod`` with the compile-only attributes dropped from its functions."""
    import tvm

    funcs = {}
    for gv, func in mod.functions.items():
        for key in _COMPILE_ONLY_ATTRS:
            if func.attrs is not None and key in func.attrs:
                func = func.without_attr(key)
        funcs[gv] = func
    return tvm.IRModule(funcs)


def compile_database(database):
    """A read view of ``database`` for ``relax_integration.compile_relax``: a workload is looked
    up as it is and, when that finds nothing, without the compile-only attributes, so that tuned
    fused functions are found (see _COMPILE_ONLY_ATTRS)."""
    from tvm.ir.utils import derived_object

    ms = meta_schedule()

    def lookup(query, mod, *args):
        found = query(mod, *args)
        return found if found is not None else query(without_compile_attrs(mod), *args)

    @derived_object
    class CompileDatabase(ms.database.PyDatabase):
        def has_workload(self, mod):
            return database.has_workload(mod) or \
                database.has_workload(without_compile_attrs(mod))

        def commit_workload(self, mod):
            raise TclError("compile_database is a read view: it commits nothing")

        def commit_tuning_record(self, record):
            raise TclError("compile_database is a read view: it commits nothing")

        def get_top_k(self, workload, top_k):
            return database.get_top_k(workload, top_k)

        def get_all_tuning_records(self):
            return database.get_all_tuning_records()

        def query_tuning_record(self, mod, target, workload_name=None):
            return lookup(database.query_tuning_record, mod, target, workload_name)

        def query_schedule(self, mod, target, workload_name=None):
            return lookup(database.query_schedule, mod, target, workload_name)

        def query_ir_module(self, mod, target, workload_name=None):
            return lookup(database.query_ir_module, mod, target, workload_name)

        def __len__(self):
            return len(database)

    return CompileDatabase()


META_SCHEDULE_LOGGER = "tvm.s_tir.meta_schedule"


def reset_meta_schedule_logging() -> None:
    """Before each MetaSchedule tuning run in a process: drop every handler on its logger and keep
    its console output to warnings (the full log goes to the run's ``logs``). Its logging config
    lists that logger's handlers by name, so one it did not make fails the run ('NoneType' object
    has no attribute 'format'): pytest (9.2) attaches its unnamed capture handler to every
    non-propagating logger, which MetaSchedule's logger is after a first run. Its own handlers
    from the last run log into that run's directory: they are closed; others are only removed."""
    import logging

    logger = logging.getLogger(META_SCHEDULE_LOGGER)
    for handler in list(logger.handlers):
        logger.removeHandler(handler)
        if (handler.get_name() or "").startswith(META_SCHEDULE_LOGGER):
            handler.close()
    logger.setLevel(logging.WARNING)
