"""A MetaSchedule Builder whose worker processes live as long as the builder.

MetaSchedule's LocalBuilder starts a fresh process pool for every batch, and each worker imports
TVM again (seconds on a small host). A tuning run sends one small batch per search round, so that
restart can cost more than the builds themselves. ``pooled_builder`` builds with the same
function (``tcl.measure.builder.build_to_bytes``: tcl's build and MetaSchedule's export) in a
pool started once; a batch that runs past its timeout fails as timed-out builds, and the pool is
replaced so a stuck build cannot hold the next batch.
"""
from __future__ import annotations

import concurrent.futures as cf
import functools
import multiprocessing
import os

from ..tvm_compat import meta_schedule
from .builder import build_to_bytes, builder_result
from .interrupt import held_interrupts, quiet_interrupts


def pooled_builder(max_workers: int | None = None, timeout_sec: float = 60.0,
                   cpus: set[int] | None = None):
    """A MetaSchedule ``Builder`` building in a long-lived pool of ``max_workers`` processes
    (default: one per CPU this process may use); ``cpus``: the workers build on these only,
    one each by default (a pipelined collection keeps them off the device's cores)."""
    from tvm.ir.utils import derived_object

    ms = meta_schedule()
    workers = max_workers or len(cpus or os.sched_getaffinity(0))
    initializer = functools.partial(quiet_interrupts, os.sched_setaffinity, 0, set(cpus)) \
        if cpus else quiet_interrupts

    @derived_object
    class PooledBuilder(ms.builder.PyBuilder):
        def __init__(self):
            super().__init__()
            self.pool = None

        def build(self, build_inputs):
            import tvm

            jobs = [(tvm.ir.save_json(b.mod), tvm.ir.save_json(b.target)) for b in build_inputs]
            with held_interrupts(spawn=True):   # submit starts the workers: SIGINT held
                if self.pool is None:
                    self.pool = cf.ProcessPoolExecutor(
                        workers, mp_context=multiprocessing.get_context("spawn"),
                        initializer=initializer)
                futures = [self.pool.submit(build_to_bytes, *job) for job in jobs]
            cf.wait(futures, timeout=timeout_sec * max(1, -(-len(futures) // workers)))
            results = []
            for f in futures:
                if not f.done():
                    results.append(ms.builder.BuilderResult(
                        None, f"build timed out after {timeout_sec:.0f} s"))
                    continue
                try:
                    results.append(builder_result(*f.result()))
                except Exception as e:  # noqa: BLE001 - a worker that died: this build failed
                    results.append(ms.builder.BuilderResult(
                        None, f"build worker failed: {type(e).__name__}: {e}"))
            if not all(f.done() for f in futures) or any(
                    f.exception() is not None for f in futures if f.done()):
                self._replace_pool()
            return results

        def _replace_pool(self):
            for process in list(getattr(self.pool, "_processes", {}).values()):
                process.kill()
            self.pool.shutdown(wait=False, cancel_futures=True)
            self.pool = None

        def close(self) -> None:
            """Stop the workers now (a run that ends, or stops, needs them no more)."""
            if self.pool is not None:
                self._replace_pool()

    return PooledBuilder()
