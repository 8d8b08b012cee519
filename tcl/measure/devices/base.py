"""The device interface: how one device builds, runs and times programs.

A ``DeviceKind`` wraps a ``Device`` record (``tcl.store.devices``: name, target, measurement
settings) and answers everything that differs between kinds: whether this host can use it
(``check_runnable``), the cpus its runs leave free to build on (``spare_cpus``), its builder
and runner, why it cannot measure now (``problem``), and the timer and timing protocol of a
compiled network (``timer``, ``timing``). ``create(device)`` (``tcl.measure.devices``) makes
one; callers ask it, never which kind it is.
"""
from __future__ import annotations

import os
from abc import ABC, abstractmethod
from contextlib import AbstractContextManager
from typing import Callable, ClassVar

from ...config import TclError
from ...store.devices import Device
from ...tvm_compat import meta_schedule
from .settings import SETTINGS, DeviceSettings, TimingProtocol


class DeviceKind(ABC):
    """One device of a kind (``name``: its key in ``DEVICE_KINDS``), with the shared
    ``settings``."""

    name: ClassVar[str]

    def __init__(self, device: Device, settings: DeviceSettings = SETTINGS):
        self.device, self.settings = device, settings

    # -- where it runs ------------------------------------------------------------------------
    @abstractmethod
    def check_runnable(self, host_flags: frozenset[str] | None = None,
                       host_cpus: int | None = None) -> None:
        """Refuse a device this host cannot use, before any build (``host_flags`` and
        ``host_cpus``: another host's, default this one's)."""

    @abstractmethod
    def spare_cpus(self) -> set[int]:
        """The cpus this process may use that the device's runs leave free."""

    @property
    @abstractmethod
    def where(self) -> str:
        """Where its programs run, for ``tcl device list``."""

    def can_pipeline(self) -> bool:
        """Whether the device leaves this process a cpu to build on while it runs."""
        return bool(self.spare_cpus())

    def build_cpus(self) -> set[int]:
        """Where a pipelined collection builds while the device runs (``spare_cpus``); refused
        when there is no such cpu."""
        spare = self.spare_cpus()
        if not spare:
            d = self.device
            raise TclError(f"a pipelined collection builds on cores {d.name} does not use, but "
                           f"this process may use {len(os.sched_getaffinity(0))} cpu(s) and "
                           f"{d.name} uses {d.num_cores}: measure without pipelining, "
                           "or give it more cpus")
        return spare

    # -- measuring ----------------------------------------------------------------------------
    def builder(self, pooled: bool = False, cpus: set[int] | None = None):
        """A MetaSchedule Builder for the device's programs, built on this host: LocalBuilder
        with tcl's build function, or with ``pooled`` one whose workers live as long as it
        (``cpus``: they build on these only)."""
        if pooled:
            from ..pooled_builder import pooled_builder

            return pooled_builder(timeout_sec=self.settings.build_timeout_s, cpus=cpus)
        from ..builder import local_builder

        return local_builder(timeout_sec=self.settings.build_timeout_s)

    @abstractmethod
    def runner(self, **kwargs):
        """A MetaSchedule Runner that measures on the device (``stop_runner`` stops it)."""

    def evaluator_config(self):
        ms = meta_schedule()
        m = self.device.measure
        return ms.runner.EvaluatorConfig(number=m.number, repeat=m.repeat,
                                         min_repeat_ms=m.min_repeat_ms,
                                         enable_cpu_cache_flush=m.enable_cpu_cache_flush)

    def runner_device_type(self) -> str:
        """The device type of a ``RunnerInput`` of the device's target."""
        kind = self.device.target.get("kind", "llvm")
        return "cpu" if kind in ("llvm", "c") else kind

    def problem(self, timeout: float = 5.0, need_server: bool = True) -> str | None:
        """Why the device cannot measure now (None when it can). Asked before every batch, so a
        device that is gone costs no program a stored error."""
        return None

    def wait_until_reachable(self, retries: int, delay_s: float,
                             say: Callable[[str], None] = print) -> None:
        """Wait, within ``1 + retries`` tries ``delay_s`` apart, until the device can be
        reached; a TclError if it never could. At once for a device that is always there."""

    @property
    def failing_part(self) -> str:
        """What failed when a batch's measurement failed for a reason not the program's."""
        return "runner"

    # -- timing a compiled network end to end -------------------------------------------------
    @property
    def timing(self) -> TimingProtocol:
        return TimingProtocol.for_device(self.device.measure, self.settings)

    def check_can_time(self) -> None:
        """Refuse a device whose compiled networks this host cannot time (``timer``)."""

    @abstractmethod
    def timer(self) -> AbstractContextManager[Callable]:
        """A context whose value runs ``fn(*args)`` where the device's compiled networks are
        timed (a module-level ``fn``: it may run in another process) and returns its result."""


def stop_runner(runner) -> None:
    """Stop a runner's worker now, from this thread: left to the garbage collector, its pool
    may be shut down from its own thread, which fails with a traceback."""
    pool = getattr(runner, "pool", None)
    if pool is not None:
        pool.shutdown(wait=True)
