"""Append-only measurement records: one Parquet file per measured batch, per device and task.

Files are written to a temporary name and renamed, so a killed writer leaves either a whole
partition file or none. Record ids are content hashes of (device identity, task, trace), so
measuring the same program twice on the same device is idempotent (readers keep the first).
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import sys
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Iterable

import polars as pl
import pyarrow.parquet as pq

from ..config import Paths, TclError

RECORD_SCHEMA: dict[str, pl.DataType] = {
    "record_id": pl.Utf8,
    "program_id": pl.Utf8,
    "device": pl.Utf8,
    "host_cpu": pl.Utf8,
    "target": pl.Utf8,  # JSON of the target dict
    "task_id": pl.Utf8,
    "trace_json": pl.Utf8,
    "latencies": pl.List(pl.Float64),  # seconds, one per repeat; empty on error
    "status": pl.Utf8,  # ok | build_error | run_error | timeout
    "error": pl.Utf8,
    "build_secs": pl.Float64,
    "source": pl.Utf8,  # collect | import:<file>
    "measured_at": pl.Datetime("us", "UTC"),
    "tvm_version": pl.Utf8,
}

STATUSES = ("ok", "build_error", "run_error", "timeout")


def content_hash(*parts: str) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p.encode())
        h.update(b"\0")
    return h.hexdigest()[:24]


def program_id(task_id: str, trace_json: str) -> str:
    return content_hash(task_id, trace_json)


def task_id_of(mod) -> str:
    """A task's id: 16 hex digits of the structural hash of its IRModule."""
    import tvm_ffi

    return format(tvm_ffi.structural_hash(mod) & (2**64 - 1), "016x")


def record_id(device_identity: str, task_id: str, trace_json: str) -> str:
    return content_hash(device_identity, task_id, trace_json)


def write_parquet_atomic(frame: pl.DataFrame, path: Path) -> Path:
    """Write ``frame`` to ``path`` through a temporary file and a rename (fsynced)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".tmp-{uuid.uuid4().hex}-{path.name}"
    try:
        frame.write_parquet(tmp, compression="zstd")
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
    return path


def read_parquet(path: Path, what: str, fix: str,
                 columns: list[str] | None = None) -> pl.DataFrame:
    """``path`` read whole (or its ``columns``); a file that is not readable Parquet is a
    TclError naming it as ``what`` (e.g. "zoo tasks file") and saying how to ``fix`` it."""
    try:
        return pl.read_parquet(path, columns=columns)
    except Exception as e:  # polars/pyarrow raise several types for a bad footer or page
        raise TclError(f"{what} {path} is not readable Parquet ({_first_line(e)}); {fix}") \
            from None


@dataclass
class CorruptFile:
    path: Path
    reason: str

    def __str__(self) -> str:
        return f"unusable record file {self.path}: {self.reason}"


_SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


def safe_component(name: str, what: str) -> str:
    """``name`` if it can be one path component under the data root, else a TclError: a device
    name or task id never walks out of the store (``..``, ``/``, empty)."""
    if not isinstance(name, str) or not _SAFE_NAME.fullmatch(name) or ".." in name:
        raise TclError(f"invalid {what} {name!r}: expected letters, digits, '.', '-' and '_' "
                       "(no path separators)")
    return name


def check_record_file(path: Path) -> str | None:
    """Why the record file ``path`` cannot be used (None when it can): an unreadable footer, a
    foreign schema (columns or types other than RECORD_SCHEMA), data pages that do not decode,
    or values no writer of tcl produces. Every reader of the store goes through this."""
    try:
        schema = pl.read_parquet_schema(path)
    except Exception as e:  # pyarrow/polars raise several types for a bad footer
        return f"not a readable Parquet file ({_first_line(e)})"
    missing = [c for c in RECORD_SCHEMA if c not in schema]
    extra = [c for c in schema if c not in RECORD_SCHEMA]
    wrong = [f"{c} is {schema[c]}, expected {t}" for c, t in RECORD_SCHEMA.items()
             if c in schema and schema[c] != t]
    if missing or extra or wrong:
        short = lambda cols: ", ".join(cols[:4]) + (", ..." if len(cols) > 4 else "")  # noqa: E731
        parts = ([f"missing columns {short(missing)}"] if missing else []) + \
                ([f"unknown columns {short(extra)}"] if extra else []) + wrong
        return "foreign schema: " + "; ".join(parts[:3])
    try:
        frame = pl.read_parquet(path)  # every column: corruption may sit in any page
    except Exception as e:
        return f"corrupt data ({_first_line(e)})"
    if frame["record_id"].null_count():
        return "records without record_id"
    bad = frame.filter(~pl.col("status").is_in(STATUSES))
    if len(bad):
        return f"status {bad['status'][0]!r} is not one of {STATUSES}"
    return None


def _first_line(e: Exception) -> str:
    text = str(e).strip()
    return text.splitlines()[0][:200] if text else type(e).__name__


_warned: set[str] = set()


def warn_once(message: str) -> None:
    """Print a warning to stderr once per process (a skipped file is named once per command)."""
    if message not in _warned:
        _warned.add(message)
        print(f"warning: {message}", file=sys.stderr)


class RecordStore:
    """Partitioned Parquet records under ``<root>/records/device=<d>/task=<t>/part-*.parquet``.

    ``retired=True`` opens the records taken out of use by :meth:`retire` instead.
    """

    def __init__(self, paths: Paths | None = None, retired: bool = False,
                 warn: Callable[[str], None] | None = warn_once):
        self.paths = paths or Paths.default()
        self.retired = retired
        self.warn = warn  # where skipped files are named (None: silent, the caller reports)
        self._checked: dict[str, list] | None = None

    @property
    def root(self) -> Path:
        return self.paths.retired_dir if self.retired else self.paths.records_dir

    def partition(self, device: str, task_id: str) -> Path:
        return (self.root / f"device={safe_component(device, 'device name')}"
                / f"task={safe_component(task_id, 'task id')}")

    def append(self, rows: Iterable[dict]) -> list[Path]:
        """Write ``rows`` as new partition files (one per device and task); returns the files."""
        frame = pl.DataFrame(list(rows), schema=RECORD_SCHEMA)
        if frame.is_empty():
            return []
        bad = frame.filter(~pl.col("status").is_in(STATUSES))
        if not bad.is_empty():
            raise TclError(f"record status {bad['status'][0]!r} is not one of {STATUSES}")
        written = []
        stamp = time.strftime("%Y%m%dT%H%M%S")
        for (device, task_id), part in frame.group_by(["device", "task_id"], maintain_order=True):
            name = f"part-{stamp}-{uuid.uuid4().hex[:8]}.parquet"
            written.append(write_parquet_atomic(part, self.partition(device, task_id) / name))
        return written

    def files(self, device: str | None = None) -> list[Path]:
        base = self.root / f"device={safe_component(device, 'device name')}" if device \
            else self.root
        if not base.exists():
            return []
        return sorted(p for p in base.rglob("part-*.parquet"))

    def check(self, files: list[Path]) -> tuple[list[Path], list[CorruptFile]]:
        """Split ``files`` into usable ones and unusable ones (see :func:`check_record_file`).

        Record files are written once and never changed, so a verdict is cached under
        ``<root>/.cache`` by path, size and mtime: the next command reads only new files.
        """
        cache = self._load_cache()
        good, bad, changed = [], [], False
        for f in files:
            try:
                st = f.stat()
            except FileNotFoundError:  # retired or removed since it was listed
                continue
            key, stamp = str(f.relative_to(self.paths.root)), [st.st_size, st.st_mtime_ns]
            entry = cache.get(key)
            if entry is None or entry[:2] != stamp:
                entry = stamp + [check_record_file(f)]
                cache[key], changed = entry, True
            if entry[2] is None:
                good.append(f)
            else:
                bad.append(CorruptFile(f, entry[2]))
        if changed:
            self._save_cache(cache)
        return good, bad

    def usable(self, files: list[Path]) -> list[Path]:
        """The usable ``files``; each unusable one is named through ``warn`` and skipped."""
        good, bad = self.check(files)
        for b in bad:
            if self.warn:
                self.warn(f"skipped {b}")
        return good

    @property
    def _cache_file(self) -> Path:
        return self.paths.record_files_cache

    def _load_cache(self) -> dict[str, list]:
        if self._checked is None:
            try:
                self._checked = json.loads(self._cache_file.read_text())
                assert isinstance(self._checked, dict)
            except (OSError, ValueError, AssertionError):  # none yet, or damaged: check again
                self._checked = {}
        return self._checked

    def _save_cache(self, cache: dict[str, list]) -> None:
        f = self._cache_file
        try:
            f.parent.mkdir(parents=True, exist_ok=True)
            tmp = f.with_name(f".tmp-{uuid.uuid4().hex}-{f.name}")
            tmp.write_text(json.dumps(cache))
            os.replace(tmp, f)
        except OSError:  # a read-only or full disk: the cache is only a speed-up
            pass

    def read(self, device: str | None = None, task_id: str | None = None,
             columns: list[str] | None = None) -> pl.DataFrame:
        """Records (deduplicated by record_id); unusable files are named and skipped."""
        if task_id is not None and device is not None:
            # One partition's directory, not the device's whole tree: a plan asks per task.
            part = self.partition(device, task_id)
            files = sorted(part.glob("part-*.parquet")) if part.is_dir() else []
        else:
            files = self.files(device)
            if task_id is not None:
                files = [f for f in files if f.parent.name == f"task={task_id}"]
        good = self.usable(files)
        if not good:
            return pl.DataFrame(schema={c: RECORD_SCHEMA[c] for c in (columns or RECORD_SCHEMA)})
        frame = pl.concat([pl.read_parquet(f, columns=columns) for f in good], how="vertical_relaxed")
        return frame.unique("record_id", keep="first", maintain_order=True) if (
            columns is None or "record_id" in columns) else frame

    def record_ids(self, device: str, task_id: str) -> set[str]:
        return set(self.read(device, task_id, columns=["record_id"])["record_id"].to_list())

    def retire(self, device: str, before: datetime, reason: str,
               dry_run: bool = False, after: datetime | None = None) -> "Retired":
        """Take ``device``'s files measured wholly before ``before`` (and, with ``after``, at or
        after ``after``: a window, e.g. while another job shared the cores) out of use, losing
        nothing.

        Files move (one rename each) to the same place under ``retired/`` and a line naming
        the reason is appended to ``retired/log.jsonl``. Their programs count as unmeasured
        again, so the next collection measures them anew; ``RecordStore(retired=True)`` still
        reads the old records. A file with records on both sides of ``before`` is left alone
        and reported.
        """
        if self.retired:
            raise TclError("records are retired from the live store, not from the retired one")
        for name, t in (("before", before), ("after", after)):
            if t is not None and t.tzinfo is None:
                raise TclError(f"retire: {name!r} must carry a time zone (got {t}), "
                               "e.g. 2026-11-29T21:00+00:00")
        if after is not None and after >= before:
            raise TclError(f"retire: the window is empty ({after.isoformat()} is not before "
                           f"{before.isoformat()})")
        out = Retired()
        good = self.usable(self.files(device))  # an unusable file stays where it is, named
        for f in good:
            times = pl.read_parquet(f, columns=["measured_at"])["measured_at"]
            if times.is_empty():
                continue
            inside = (times < before) & (times >= after if after is not None else True)
            if not inside.all():
                if inside.any():
                    out.straddling.append(f)
                continue
            out.files.append(f)
            out.records += len(times)
        if dry_run or not out.files:
            return out
        target = RecordStore(self.paths, retired=True)
        target.root.mkdir(parents=True, exist_ok=True)
        # The reason is logged before anything moves; an interrupted run moved whole files
        # only, and running it again moves the rest.
        with open(self.paths.retired_log, "a") as log:
            log.write(json.dumps({"device": device, "before": before.isoformat(),
                                  "after": after.isoformat() if after is not None else None,
                                  "reason": reason, "files": len(out.files),
                                  "records": out.records, "at": now_utc().isoformat()}) + "\n")
        for f in out.files:
            dest = target.root / f.relative_to(self.root)
            dest.parent.mkdir(parents=True, exist_ok=True)
            os.replace(f, dest)
        return out


@dataclass
class Retired:
    """What :meth:`RecordStore.retire` moved (or would move) and what it left alone."""

    files: list[Path] = field(default_factory=list)
    records: int = 0
    straddling: list[Path] = field(default_factory=list)


def now_utc() -> datetime:
    return datetime.now(timezone.utc)
