"""What every device kind builds and times with: ``DeviceSettings`` (one object: the build
timeout, the end-to-end timing's repeat floor and warm-up) and ``TimingProtocol`` (the one rule
for timing a compiled network and the frameworks a user would run instead).

A leaf module: the builder factories (``tcl.measure.builder``, ``pooled_builder``,
``dask_builder``) take their default timeout from here, below the kinds that make them.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

from ...config import TclError


@dataclass(frozen=True)
class DeviceSettings:
    """Settings shared by the device kinds (``tcl.measure.devices.create`` hands them over)."""

    # seconds one program may take to build, in every builder (LocalBuilder, the pooled one,
    # Dask's); the stock LocalBuilder's 30 s failed builds on a loaded small host
    build_timeout_s: float = 60.0
    # a compiled network is timed end to end with at least this many repeats, whatever the
    # device's measure.repeat (3 by default: too few for a whole network's spread)
    min_network_repeat: int = 5
    # calls of a framework's forward before its timed ones (first-call allocation, JIT caches)
    framework_warmup: int = 3

    def __post_init__(self) -> None:
        if not self.build_timeout_s > 0:
            raise TclError(f"device setting build_timeout_s must be > 0, got "
                           f"{self.build_timeout_s!r}")
        for key, low in (("min_network_repeat", 1), ("framework_warmup", 0)):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise TclError(f"device setting {key} must be a whole number >= {low}, got "
                               f"{value!r}")


SETTINGS = DeviceSettings()


@dataclass(frozen=True)
class TimingProtocol:
    """How a compiled network and the frameworks beside it are timed end to end: the network
    by TVM's time evaluator (``number`` calls a repeat, ``repeat`` repeats of at least
    ``min_repeat_ms``) as the mean and standard deviation of the repeats; a framework (PyTorch,
    onnxruntime), which times itself, as the median of ``repeat`` calls after ``warmup``.
    Picklable: it travels to the pinned timing process."""

    number: int = 1
    repeat: int = SETTINGS.min_network_repeat
    min_repeat_ms: int = 0
    warmup: int = SETTINGS.framework_warmup

    @classmethod
    def for_device(cls, measure, settings: DeviceSettings = SETTINGS) -> "TimingProtocol":
        """The protocol of a device of ``measure`` settings (``MeasureSettings``): its evaluator
        settings, at least ``settings.min_network_repeat`` repeats."""
        return cls(measure.number, max(measure.repeat, settings.min_network_repeat),
                   measure.min_repeat_ms, settings.framework_warmup)

    def network_ms(self, vm, dev, args) -> tuple[float, float]:
        """(mean, standard deviation) in ms of a Relax VM's ``main`` on ``args``."""
        import numpy as np

        timer = vm.time_evaluator("main", dev, number=self.number, repeat=self.repeat,
                                  min_repeat_ms=self.min_repeat_ms)
        res = np.asarray(timer(*args).results) * 1e3
        return float(res.mean()), float(res.std())

    def framework_ms(self, fn) -> float:
        """Median wall time of ``fn()`` in ms over ``repeat`` calls, after ``warmup`` calls."""
        import numpy as np

        for _ in range(self.warmup):
            fn()
        times = []
        for _ in range(self.repeat):
            start = time.perf_counter()
            fn()
            times.append((time.perf_counter() - start) * 1e3)
        return float(np.median(times))
