"""Stopping a measurement cleanly: signals, and failures that are not the program's.

Inside :class:`StopGuard`, SIGINT and SIGTERM do not raise: they record the signal and kill the
worker processes started inside the guard (MetaSchedule's builder and runner pools), again and
again until the guard exits, so a build or run in flight returns at once. The collector then
keeps the finished measurements, drops what the signal cut short (not a program error) and
raises :class:`Interrupted`. A second signal raises KeyboardInterrupt at once.

Worker processes start with SIGINT held (``held_interrupts``, or ``shielded``'s thread) and
their initializer, ``quiet_interrupts``, makes a Ctrl-C end them silently: one never ends a
worker in a traceback, while it starts or later.
"""
from __future__ import annotations

import os
import signal
import threading
from contextlib import contextmanager
from typing import Iterator

import psutil

from ..config import TclError

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupted(TclError):
    """A run stopped by a signal; the message says what was kept. ``exit_code`` = 128 + signal."""

    def __init__(self, signum: int, message: str):
        super().__init__(message)
        self.signum = signum
        self.exit_code = 128 + signum


class InfrastructureFailure(TclError):
    """The runner, the RPC session or the tracker failed: nothing about the programs is known."""


class StopGuard:
    def __init__(self) -> None:
        self.signum: int | None = None
        self._done = threading.Event()
        self._old: dict[int, object] = {}
        self._before: set[int] = set()

    @property
    def interrupted(self) -> bool:
        return self.signum is not None

    @property
    def signal_name(self) -> str:
        return signal.Signals(self.signum).name if self.signum else ""

    def __enter__(self) -> "StopGuard":
        self._before = {c.pid for c in _children()}
        if threading.current_thread() is threading.main_thread():
            self._old = {s: signal.signal(s, self._handle) for s in SIGNALS}
        return self

    def __exit__(self, *exc) -> None:
        self._done.set()
        for s, old in self._old.items():
            signal.signal(s, old)
        self.kill_workers(wait=True)

    def _handle(self, signum: int, _frame) -> None:
        if self.signum is not None:
            raise KeyboardInterrupt
        self.signum = signum
        threading.Thread(target=self._keep_killing, daemon=True).start()

    def _keep_killing(self) -> None:
        # Pools restart a dead worker for their next job: keep killing until the loop stops.
        while not self._done.wait(0.05):
            self.kill_workers()

    def kill_workers(self, wait: bool = False) -> None:
        """Kill the processes started since the guard was entered (and their children)."""
        procs = [c for c in _children() if c.pid not in self._before]
        for p in procs:
            try:
                p.kill()
            except psutil.Error:
                pass
        if wait and procs:
            psutil.wait_procs(procs, timeout=5)


def quiet_interrupts(*then) -> None:
    """A pool worker's initializer: a terminal's Ctrl-C reaches the whole process group, and
    a worker would print a KeyboardInterrupt traceback of its own; it ends at once and
    silently instead (the parent reports the interrupt). ``then``: another initializer and
    its arguments, run after. A SIGINT the parent ignores (nohup, a background job) stays
    ignored. A worker started under ``held_interrupts`` gets SIGINT released here, so one
    that came while it started ends it now, as silently."""
    if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
        signal.signal(signal.SIGINT, lambda signum, _frame: os._exit(128 + signum))
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    if then:
        then[0](*then[1:])


@contextmanager
def held_interrupts(spawn: bool = False) -> Iterator[None]:
    """SIGINT held (blocked) in this thread while worker processes, or the threads that start
    them, are started here: they inherit it held. A worker's first seconds are imports, before
    its initializer (``quiet_interrupts``) can quiet it, and a Ctrl-C then ended it in a
    traceback; held, that Ctrl-C waits for the initializer. A SIGINT that reaches this thread
    meanwhile is taken on leaving (the process's other threads take one at once). ``spawn``:
    multiprocessing starts processes here, so its resource tracker is started first: starting
    it unblocks SIGINT in the calling thread (Python 3.11's ``ensure_running`` unblocks rather
    than restores), which would end the hold before the workers start."""
    if spawn:
        from multiprocessing import resource_tracker

        resource_tracker.ensure_running()
    held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)


def _children() -> list[psutil.Process]:
    try:
        return psutil.Process().children(recursive=True)
    except psutil.Error:
        return []


def shielded(fn, *args, **kwargs):
    """``fn(*args, **kwargs)`` in a thread that blocks SIGINT and SIGTERM, waited for here.

    The worker processes that MetaSchedule's pools start from that thread inherit the blocked
    signals, so a terminal's Ctrl-C (sent to the whole process group) reaches the collector
    alone, which then stops them itself (:class:`StopGuard`); they print no traceback of
    their own. The calling thread keeps receiving signals meanwhile.
    """
    result: dict = {}

    def run() -> None:
        signal.pthread_sigmask(signal.SIG_BLOCK, SIGNALS)
        try:
            result["value"] = fn(*args, **kwargs)
        except BaseException as e:  # handed to the caller below
            result["error"] = e

    thread = threading.Thread(target=run, daemon=True, name="tcl-measure")
    thread.start()
    while thread.is_alive():
        thread.join(0.2)
    if "error" in result:
        raise result["error"]
    return result.get("value")
