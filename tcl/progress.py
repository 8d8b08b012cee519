"""Progress lines for long work: done of total, rate and ETA, at least every ``EVERY_S`` seconds.

A stage that prints nothing for minutes looks hung in a CI log, a nohup file or a Prefect run
(no terminal: no progress bar). ``Progress`` says where it is from a background thread, so a
unit of work that takes longer than the interval (one model fit, one compile) still leaves a
line every interval. The clock is a parameter so tests step it by hand (``tick``)."""
from __future__ import annotations

import contextvars
import sys
import threading
import time
from collections.abc import Callable

EVERY_S = 30.0   # the longest a long-running stage or command stays silent

# The Progress this context's work counts towards: a training loop deep inside a model calls
# ``step()`` per epoch without knowing who (if anyone) reports its progress.
_CURRENT: contextvars.ContextVar["Progress | None"] = contextvars.ContextVar("tcl_progress",
                                                                             default=None)


def step(n: int = 1) -> None:
    """Count ``n`` units of work towards the innermost open ``Progress`` of this context."""
    current = _CURRENT.get()
    if current is not None:
        current.advance(n)


def stderr_line(line: str) -> None:
    """Where a line goes when no one else takes it: stderr, at once."""
    print(line, file=sys.stderr, flush=True)


def _duration(secs: float) -> str:
    secs = max(secs, 0.0)
    if secs < 90:
        return f"{secs:.0f} s"
    if secs < 5400:
        return f"{secs / 60:.1f} min"
    return f"{secs / 3600:.1f} h"


class Progress:
    """``what``: done of ``total`` ``unit``, rate and ETA, reported (``report``, default
    stderr) every ``every_s`` seconds while the block runs, and once at its end when it ran
    that long. ``advance(n)`` counts finished work; ``tick()`` reports when the interval has
    passed (the background thread calls it; tests call it with a fake ``clock``).
    ``counts_steps``: work deep inside the block counts through ``step()`` (a training loop's
    epochs), without a reference to this object."""

    def __init__(self, what: str, total: int, unit: str = "programs",
                 report: Callable[[str], None] | None = None, every_s: float | None = None,
                 clock: Callable[[], float] = time.monotonic, background: bool = True,
                 counts_steps: bool = False):
        self.what, self.total, self.unit = what, int(total), unit
        self.report = report or stderr_line
        self.every_s = EVERY_S if every_s is None else every_s
        self.clock = clock
        self.done = 0
        self.start = self.last = clock()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = None
        self._counts_steps, self._token = counts_steps, None
        if background:
            # the caller's context: a Prefect task's logger still knows its run in the thread
            self._thread = threading.Thread(target=contextvars.copy_context().run,
                                            args=(self._beat,), daemon=True,
                                            name="tcl-progress")

    def advance(self, n: int = 1) -> None:
        with self._lock:
            self.done += n

    def each(self, items):
        """``items`` one by one, each counted once the caller is done with it; the block is
        this loop (lines while it runs)."""
        with self:
            for item in items:
                yield item
                self.advance()

    def line(self) -> str:
        secs = self.clock() - self.start
        done = min(self.done, self.total) if self.total else self.done
        rate = done / secs if secs > 0 else 0.0
        if rate > 0:
            eta = f"ETA {_duration((self.total - done) / rate)}"
        else:
            eta = "ETA after the first is done"
        share = f" ({100 * done / self.total:.0f}%)" if self.total else ""
        return (f"{self.what}: {done} of {self.total} {self.unit} done{share}, "
                f"{rate:.3g} {self.unit}/s, {eta}, {_duration(secs)} so far")

    def tick(self) -> str | None:
        """Report a line if ``every_s`` has passed since the last one; returns it."""
        now = self.clock()
        if now - self.last < self.every_s:
            return None
        self.last = now
        text = self.line()
        self.report(text)
        return text

    def _beat(self) -> None:
        while not self._stop.wait(max(self.every_s - (self.clock() - self.last), 0.05)):
            self.tick()

    def __enter__(self) -> "Progress":
        if self._counts_steps:
            self._token = _CURRENT.set(self)
        if self._thread is not None:
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        if self._token is not None:
            _CURRENT.reset(self._token)
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if exc[0] is None and self.clock() - self.start >= self.every_s:
            self.report(self.line().replace(" so far", " in all"))


REPLAN_TOLERANCE = 0.25   # an estimate off by more than this is said to be, with a new one


def replan(what: str, unit: str, planned_rate: float, observed_rate: float,
           left: int) -> str | None:
    """After the first batch: a line with a new estimate from the observed rate when it differs
    from the plan's by more than ``REPLAN_TOLERANCE`` (a host under load, a slower chip than the
    plan went by); None when the plan holds."""
    if planned_rate <= 0 or observed_rate <= 0:
        return None
    ratio = observed_rate / planned_rate
    if abs(ratio - 1) <= REPLAN_TOLERANCE:
        return None
    how = f"{1 / ratio:.1f}x slower" if ratio < 1 else f"{ratio:.1f}x faster"
    return (f"{what}: the first batch ran at {observed_rate:.3g} {unit}/s, {how} than the plan's "
            f"{planned_rate:.3g}; re-estimated: the {left} {unit} left take about "
            f"{_duration(left / observed_rate)}")
