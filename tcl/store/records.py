"""Append-only measurement records: one Parquet file per measured batch, per device and task.

Files are written to a temporary name and renamed, so a killed writer leaves either a whole
partition file or none. Record ids are content hashes of (device identity, task, trace), so
measuring the same program twice on the same device is idempotent (readers keep the first).
"""
from __future__ import annotations

import hashlib
import json
import os
import sys
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Iterable

import polars as pl
import pyarrow.parquet as pq

from ..config import Paths, TclError, atomic_write, check_name
from .schemas import file_schema_problem, foreign_file

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
    "source": pl.Utf8,  # collect | import:<file> | tune:<network>
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


def write_parquet_atomic(frame: pl.DataFrame, path: Path, what: str = "Parquet file") -> Path:
    """Write ``frame`` to ``path`` through a temporary file and a rename (fsynced,
    ``tcl.config.atomic_write``: a full disk is a TclError naming ``path``, the ``what``)."""
    with atomic_write(path, what) as tmp:
        frame.write_parquet(tmp, compression="zstd")
    return path


def read_parquet(path: Path, what: str, fix: str, columns: list[str] | None = None,
                 schema: dict[str, pl.DataType] | None = None) -> pl.DataFrame:
    """``path`` read whole (or its ``columns``); a file that is not readable Parquet, or (with
    ``schema``) not of that schema, is a TclError naming it as ``what`` (e.g. "zoo tasks file")
    and saying how to ``fix`` it."""
    foreign = foreign_file(path, schema, what) if schema is not None else None
    if foreign:
        raise TclError(f"{foreign}; {fix}")
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


def safe_component(name: str, what: str) -> str:
    """``name`` if it can be one path component under the data root, else a TclError: a device
    name or task id never walks out of the store (``..``, ``/``, empty). The rule is the one
    for every name (``tcl.config.check_name``)."""
    return check_name(name, what)


def check_record_file(path: Path) -> str | None:
    """Why the record file ``path`` cannot be used (None when it can): an unreadable footer, a
    foreign schema (columns or types other than RECORD_SCHEMA), data pages that do not decode,
    values no writer of tcl produces, or rows of another device or task than its folder's.
    Every reader of the store goes through this."""
    problem = file_schema_problem(path, RECORD_SCHEMA)
    if problem:
        return problem
    try:
        frame = pl.read_parquet(path)  # every column: corruption may sit in any page
    except Exception as e:
        return f"corrupt data ({_first_line(e)})"
    if frame["record_id"].null_count():
        return "records without record_id"
    bad = frame.filter(~pl.col("status").is_in(STATUSES))
    if len(bad):
        return f"status {bad['status'][0]!r} is not one of {STATUSES}"
    # The folder names the device and task every reader files the rows under (`tcl status`
    # counts by folder, queries by column): rows of another are some other store's file.
    for column, part in (("device", path.parent.parent.name), ("task_id", path.parent.name)):
        key, _, value = part.partition("=")
        other = frame.filter(pl.col(column).ne_missing(value))[column] \
            if key in ("device", "task") else []
        if len(other):
            return f"its rows name {column} {other[0]!r}, not its folder's {value!r}"
    return None


def _first_line(e: Exception) -> str:
    text = str(e).strip()
    return text.splitlines()[0][:200] if text else type(e).__name__


# The version of check_record_file's rules: verdicts cached under other rules are checked
# again (2: a file's rows must name its folder's device and task).
_RULES = 2

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
            written.append(write_parquet_atomic(part, self.partition(device, task_id) / name,
                                                "record file"))
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
                assert isinstance(self._checked, dict) and self._checked.get("rules") == _RULES
            except (OSError, ValueError, AssertionError):  # none yet, damaged, or older rules
                self._checked = {"rules": _RULES}
        return self._checked

    def _save_cache(self, cache: dict[str, list]) -> None:
        try:
            with atomic_write(self._cache_file, "record file check cache") as tmp:
                tmp.write_text(json.dumps(cache))
        except (OSError, TclError):  # a read-only or full disk: the cache is only a speed-up
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
