"""A CPU of this host: its code must run here (ISA flags, cores), its runner is MetaSchedule's
LocalRunner pinned to the profile's first cores, and its compiled networks are timed in a fresh
process pinned the same way."""
from __future__ import annotations

import concurrent.futures as cf
import functools
import gc
import multiprocessing
import os
import traceback
from contextlib import contextmanager
from typing import Iterator

from ...config import TclError
from ...store import devices as store
from ...tvm_compat import meta_schedule
from ..interrupt import held_interrupts, quiet_interrupts
from .base import DeviceKind


def pin_worker(num_threads: int) -> None:
    """Runs in a worker process (runner, timer): use exactly the profile's cores."""
    os.environ["TVM_NUM_THREADS"] = str(num_threads)
    cpus = sorted(os.sched_getaffinity(0))
    os.sched_setaffinity(0, set(cpus[:num_threads]))


class LocalCPU(DeviceKind):
    name = "local"

    def check_runnable(self, host_flags: frozenset[str] | None = None,
                       host_cpus: int | None = None) -> None:
        """Refuse a profile whose code this host cannot execute: a CPU feature it names
        (``requires_flags``) or its target implies (``isa_flags``) that the host lacks, or more
        cores than this process may use (``check_cores``)."""
        device = self.device
        device.tvm_target()
        flags = store.host_cpu_flags() if host_flags is None else host_flags
        needed = dict.fromkeys([*device.requires_flags, *sorted(store.isa_flags(device.target))])
        missing = [f for f in needed if f not in flags]
        if missing:
            raise TclError(f"device {device.name!r} needs CPU features {', '.join(missing)} "
                           f"that this host ({store.host_cpu_model()}) lacks; pick another "
                           "profile (`tcl device list`)")
        store.check_cores(device.num_cores, f"device {device.name!r} num-cores", host_cpus)

    def spare_cpus(self) -> set[int]:
        # the runner and the timer take the first num_cores (pin_worker)
        return set(sorted(os.sched_getaffinity(0))[self.device.num_cores:])

    @property
    def where(self) -> str:
        return "runs here"

    def runner(self, **local_kwargs):
        """LocalRunner on the profile's cores; ``local_kwargs`` go to it (tests use hooks). Its
        workers end silently on a Ctrl-C, while they start too (``quiet_interrupts``)."""
        ms = meta_schedule()
        config = self.evaluator_config()
        try:
            # LocalRunner's constructor starts its pool's one thread and, from it, a worker (a
            # first job checks them): with SIGINT held here, both start with it held, and the
            # worker (and every worker the thread restarts) holds it until its initializer
            # quiets it
            with held_interrupts():
                # evaluator_config by keyword: LocalRunner's first positional is timeout_sec
                return ms.runner.LocalRunner(timeout_sec=self.device.measure.timeout_sec,
                                             evaluator_config=config,
                                             initializer=functools.partial(
                                                 quiet_interrupts, pin_worker,
                                                 self.device.num_cores),
                                             **local_kwargs)
        except BaseException as e:
            # Interrupted while it started: the half-made runner's pool is reachable only
            # through this error's frames. Freed here, it is shut down in this thread; left to
            # the garbage collector, it may be shut down from its own thread, which fails with a
            # traceback.
            while e is not None:
                traceback.clear_frames(e.__traceback__)
                e = e.__context__
            gc.collect()
            raise

    @contextmanager
    def timer(self) -> Iterator:
        """A fresh process pinned to the profile's cores, started with SIGINT held."""
        with cf.ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"),
                                    initializer=functools.partial(
                                        quiet_interrupts, pin_worker,
                                        self.device.num_cores)) as pool:
            def run(fn, *args):
                with held_interrupts(spawn=True):   # the process starts here: SIGINT held
                    future = pool.submit(fn, *args)
                return future.result()

            yield run
