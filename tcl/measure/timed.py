"""A builder and a runner that count their own seconds, so that tuning can say how much of its
wall time went to neither building nor running kernels (scoring, search, feature extraction).

MetaSchedule's gradient task scheduler joins every running task before it picks the next one,
so the time in ``build`` and in the runner's futures does not overlap the search: the rest of
the tuning wall time is the search's own overhead.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from ..tvm_compat import meta_schedule


@dataclass
class Stopwatch:
    build_s: float = 0.0       # in the builder's build()
    run_s: float = 0.0         # in the runner's run() and waiting on its futures
    # told the number of candidates each build() returns: under MetaSchedule's gradient
    # scheduler no result comes back before every task's first round, but builds do
    on_built: Callable[[int], None] | None = None


def timed(builder, runner, watch: Stopwatch):
    """(builder, runner) that delegate to the given ones and add their seconds to ``watch``."""
    from tvm.ir.utils import derived_object

    ms = meta_schedule()

    @derived_object
    class TimedBuilder(ms.builder.PyBuilder):
        def build(self, build_inputs):
            start = time.perf_counter()
            try:
                results = builder.build(build_inputs)
            finally:
                watch.build_s += time.perf_counter() - start
            if watch.on_built is not None:
                watch.on_built(len(build_inputs))
            return results

    @derived_object
    class TimedFuture(ms.runner.PyRunnerFuture):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def done(self) -> bool:
            return self.inner.done()

        def result(self):
            start = time.perf_counter()
            try:
                return self.inner.result()
            finally:
                watch.run_s += time.perf_counter() - start

    @derived_object
    class TimedRunner(ms.runner.PyRunner):
        def run(self, runner_inputs):
            start = time.perf_counter()
            try:
                return [TimedFuture(f) for f in runner.run(runner_inputs)]
            finally:
                watch.run_s += time.perf_counter() - start

    return TimedBuilder(), TimedRunner()
