"""Locks between writers on one data root, under ``<root>/.locks``.

Advisory whole-file locks (flock, through the ``filelock`` package): the OS releases a lock
when its holder dies, so a kill -9 leaves nothing to clean up. What each lock guards:

- ``candidates-<task>``: the read-modify-write of a task's candidates file (no lost candidates);
- ``measure-<device>-<task>``: measuring a task's programs on a device (no program measured
  twice by two collections); a collection skips a task another one holds and comes back to it;
- ``devices``, ``imported-tasks``, ``export-<dir hash>``: the small shared files.
"""
from __future__ import annotations

import hashlib
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

from filelock import FileLock, Timeout

from ..config import Paths, TclError
from .records import safe_component


def lock_file(paths: Paths, *names: str) -> Path:
    name = "-".join(safe_component(n, "lock name") for n in names)
    d = paths.locks_dir
    d.mkdir(parents=True, exist_ok=True)
    return d / f"{name}.lock"


def make_lock(paths: Paths, *names: str) -> FileLock:
    # preserve_lock_file: deleting a lock file that another process waits on would let a third
    # one lock a new file of the same name at the same time.
    return FileLock(lock_file(paths, *names), preserve_lock_file=True, thread_local=False)


def try_lock(paths: Paths, *names: str) -> FileLock | None:
    """The lock, held, or None when another process holds it now."""
    lock = make_lock(paths, *names)
    try:
        lock.acquire(blocking=False)
    except Timeout:
        return None
    return lock


def wait_for_lock(paths: Paths, *names: str, stop: Callable[[], bool],
                  poll_s: float = 0.5) -> FileLock | None:
    """The lock, held once its holder lets go; None when ``stop()`` turns true first (polled
    every ``poll_s``, so a signal that sets a flag ends the wait)."""
    lock = make_lock(paths, *names)
    while not stop():
        try:
            lock.acquire(timeout=poll_s)
        except Timeout:
            continue
        return lock
    return None


@contextmanager
def locked(paths: Paths, *names: str, timeout: float = 600.0, what: str = "") -> Iterator[None]:
    """Hold the lock for the block, waiting up to ``timeout`` seconds for another holder."""
    lock = make_lock(paths, *names)
    try:
        lock.acquire(timeout=timeout)
    except Timeout:
        raise TclError(f"{what or 'the data root'} is busy: another tcl process has held "
                       f"{lock.lock_file} for over {timeout:.0f}s; try again later") from None
    try:
        yield
    finally:
        lock.release()


def path_key(path: Path) -> str:
    """A lock name for an arbitrary directory (an export target outside the data root)."""
    return hashlib.sha256(str(Path(path).resolve()).encode()).hexdigest()[:16]
