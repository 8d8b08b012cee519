"""A MetaSchedule Builder whose worker processes live as long as the builder.

MetaSchedule's LocalBuilder starts a fresh process pool for every batch, and each worker imports
TVM again (seconds on a small host). A tuning run sends one small batch per search round, so that
restart can cost more than the builds themselves. ``pooled_builder`` builds with the same
function (``tcl.measure.builder.build_to_bytes``: tcl's build and MetaSchedule's export) in a
pool started once. Each build has its own timeout, as in LocalBuilder: no more builds run at once
than there are workers, so a build's clock starts when it is handed out; one that runs past it
fails as timed out, and the pool is replaced (its stuck worker with it) while the builds beside it
are handed out again. A batch of n builds on one worker thus waits at most a timeout per stuck
build, and a stuck build costs only itself.
"""
from __future__ import annotations

import concurrent.futures as cf
import functools
import multiprocessing
import os
import time

from ..tvm_compat import meta_schedule
from .builder import build_to_bytes, builder_result
from .devices.settings import SETTINGS
from .interrupt import held_interrupts, quiet_interrupts


def pooled_builder(max_workers: int | None = None,
                   timeout_sec: float = SETTINGS.build_timeout_s,
                   cpus: set[int] | None = None, build=build_to_bytes):
    """A MetaSchedule ``Builder`` building in a long-lived pool of ``max_workers`` processes
    (default: one per CPU this process may use); ``cpus``: the workers build on these only,
    one each by default (a pipelined collection keeps them off the device's cores). ``build``:
    what a worker runs per program, (module JSON, target JSON) -> (library bytes, error), a
    module-level function (the workers are spawned)."""
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
            results: list = [None] * len(jobs)
            queue = list(range(len(jobs)))
            running: dict = {}   # future -> (job, its deadline)
            while queue or running:
                while queue and len(running) < workers:
                    i = queue.pop(0)
                    running[self._submit(jobs[i])] = (i, time.monotonic() + timeout_sec)
                first = min(deadline for _, deadline in running.values())
                done, _ = cf.wait(running, timeout=max(0.0, first - time.monotonic()),
                                  return_when=cf.FIRST_COMPLETED)
                broken = False
                for f in done:
                    i, _ = running.pop(f)
                    try:
                        results[i] = builder_result(*f.result())
                    except Exception as e:  # noqa: BLE001 - a worker that died: this build failed
                        results[i] = ms.builder.BuilderResult(
                            None, f"build worker failed: {type(e).__name__}: {e}")
                        broken = True
                late = [f for f, (_, deadline) in running.items() if deadline <= time.monotonic()]
                for f in late:
                    results[running.pop(f)[0]] = ms.builder.BuilderResult(
                        None, f"build timed out after {timeout_sec:.0f} s")
                if late or broken:   # the builds beside it die with the pool: hand them out again
                    queue[:0] = sorted(i for i, _ in running.values())
                    running.clear()
                    self._replace_pool()
            return results

        def _submit(self, job):
            with held_interrupts(spawn=True):   # submit starts the workers: SIGINT held
                if self.pool is None:
                    self.pool = cf.ProcessPoolExecutor(
                        workers, mp_context=multiprocessing.get_context("spawn"),
                        initializer=initializer)
                return self.pool.submit(build, *job)

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
