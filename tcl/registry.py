"""The model registry: one DuckDB row per model version, model files stored by content.

``models/registry.duckdb`` (table ``models``) holds, per version: the device it was made for,
the devices it serves, its parent (the teacher's id), the method, the backbone, the data
snapshot (records used and the newest ``measured_at`` among them, plus a key over everything
that went in), parameter counts, the content hash and metrics. The file itself is
``models/registry/<id>.model``. ``latest(device)`` is what tuning and the next distillation
use; ``find(snapshot)`` is how a rerun on unchanged data finds that nothing is new.

Which model a step uses, registered or not, is ``tcl.resolve.resolve_model``'s to say.

The registry is history, so a damaged file is reported, never silently rebuilt.
"""
from __future__ import annotations

import json
import random
import shutil
import time
from dataclasses import dataclass, fields
from datetime import datetime
from pathlib import Path
from typing import Any

import polars as pl

from . import continual  # noqa: F401  (adds the "continual" model kind; no torch until used)
from .config import Paths, TclError, atomic_write, disk_problem
from .store.locks import locked

LOCK_WAIT_S = 120.0   # the longest another process's hold on the registry file is waited out

SCHEMA = """
CREATE TABLE IF NOT EXISTS models (
    id VARCHAR PRIMARY KEY,           -- the content hash's first 16 hex digits
    device VARCHAR NOT NULL,          -- the device this version was made for
    devices VARCHAR[] NOT NULL,       -- every device it serves (one head each)
    parent VARCHAR,                   -- the teacher's id (NULL for a first model)
    method VARCHAR NOT NULL,
    backbone VARCHAR NOT NULL,
    snapshot VARCHAR NOT NULL,        -- key over the inputs: data, parent, method, settings
    n_records INTEGER NOT NULL,       -- measured records the model was trained on
    newest_measured_at TIMESTAMPTZ,   -- the newest of them
    params_shared BIGINT NOT NULL,
    params_per_device BIGINT NOT NULL,
    params_total BIGINT NOT NULL,
    content_hash VARCHAR NOT NULL,
    train_secs DOUBLE,
    metrics JSON,
    path VARCHAR NOT NULL,            -- relative to the data root
    created_at TIMESTAMPTZ NOT NULL
)
"""


@dataclass(frozen=True)
class Entry:
    id: str
    device: str
    devices: list[str]
    parent: str | None
    method: str
    backbone: str
    snapshot: str
    n_records: int
    newest_measured_at: datetime | None
    params_shared: int
    params_per_device: int
    params_total: int
    content_hash: str
    train_secs: float | None
    metrics: dict[str, Any]
    path: str
    created_at: datetime


class ModelRegistry:
    def __init__(self, paths: Paths) -> None:
        self.paths = paths

    @property
    def file(self) -> Path:
        return self.paths.registry_file

    @property
    def store(self) -> Path:
        return self.paths.registry_dir

    def _connect(self, write: bool):
        import duckdb

        if not write and not self.file.exists():
            return None
        self.file.parent.mkdir(parents=True, exist_ok=True)
        # DuckDB locks the file per process: a writer excludes readers and a reader excludes
        # writers, for the few milliseconds each holds it. Another tcl process's hold is waited
        # out (bounded), never reported as a damaged registry.
        deadline = time.monotonic() + LOCK_WAIT_S
        while True:
            try:
                con = duckdb.connect(str(self.file), read_only=not write)
                try:
                    self._check(con)
                    if write:
                        con.execute(SCHEMA)
                except BaseException:
                    con.close()
                    raise
                return con
            except duckdb.Error as e:
                if _held_elsewhere(e) and time.monotonic() < deadline:
                    time.sleep(0.05 + random.random() * 0.1)
                    continue
                if _held_elsewhere(e):
                    raise TclError(f"model registry {self.file} is busy: another process has "
                                   f"held it for over {LOCK_WAIT_S:.0f}s "
                                   f"({str(e).splitlines()[0]}); try again later") from None
                raise TclError(f"model registry {self.file} cannot be opened "
                               f"({str(e).splitlines()[0]}); it is the models' history, so it is "
                               "not rebuilt: restore it from a backup or move it away") from None

    def _check(self, con) -> None:
        """A file that holds tables but not tcl's ``models`` table (another DuckDB database, or
        an older layout) is refused, naming what it lacks: never written to, never rebuilt."""
        tables = {t for (t,) in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
        have = [c for (c,) in con.execute(
            "SELECT column_name FROM duckdb_columns() WHERE table_name = 'models' "
            "ORDER BY column_index").fetchall()]
        want = [f.name for f in fields(Entry)]
        if not tables or have == want:
            return
        why = f"it has no table models (tables: {', '.join(sorted(tables))})" if not have else \
            f"its table models has the columns {', '.join(have)}"
        raise TclError(f"model registry {self.file} is not one tcl wrote: {why}; expected a "
                       f"table models with the columns {', '.join(want)}. It is the models' "
                       "history, so it is not rebuilt: restore it from a backup or move it away")

    def _lock(self):
        return locked(self.paths, "registry", what="the model registry")

    # -- reading -------------------------------------------------------------------------------
    def frame(self, device: str | None = None) -> pl.DataFrame:
        """Every version (of ``device``), oldest first."""
        con = self._connect(write=False)
        if con is None:
            return pl.DataFrame()
        try:
            where = "" if device is None else "WHERE device = $device"
            return con.sql(f"SELECT * FROM models {where} ORDER BY created_at, id",
                           params=None if device is None else {"device": device}).pl()
        finally:
            con.close()

    def entries(self, device: str | None = None) -> list[Entry]:
        frame = self.frame(device)
        return [] if frame.is_empty() else [_entry(r) for r in frame.iter_rows(named=True)]

    def latest(self, device: str, backbone: str | None = None) -> Entry | None:
        """The newest version made for ``device`` (of ``backbone``), or None."""
        found = [e for e in self.entries(device) if backbone is None or e.backbone == backbone]
        return found[-1] if found else None

    def latest_elsewhere(self, device: str, backbone: str | None = None) -> Entry | None:
        """The newest version made for any device but ``device`` (of ``backbone``), or None: a
        new device's teacher."""
        found = [e for e in self.entries() if e.device != device
                 and (backbone is None or e.backbone == backbone)]
        return found[-1] if found else None

    def find(self, snapshot: str) -> Entry | None:
        """The model made from ``snapshot``'s inputs (the "nothing new" test); one whose file
        is gone is stale and passed over, so the next distillation makes it again."""
        found = [e for e in self.entries() if e.snapshot == snapshot and not self.stale(e.path)]
        return found[-1] if found else None

    def stale(self, path: str) -> bool:
        """Whether a registered model's file (its ``path``, relative to the data root) is
        missing: no step can load it, whatever the table says (the staleness rule of ``find``
        and `tcl status`)."""
        return not (self.paths.root / path).is_file()

    def get(self, model_id: str) -> Entry:
        found = [e for e in self.entries() if e.id == model_id or e.id.startswith(model_id)]
        if len(found) != 1:
            raise TclError(f"no single registered model matches {model_id!r} "
                           f"({len(found)} do); see `tcl models list`")
        return found[0]

    def load(self, entry: Entry):
        """The registered model, once its file's contents match the recorded content hash (a
        file changed or replaced since registration is refused, naming both hashes)."""
        # lazy: the continual model (torch) costs ~4 s at import; listing needs none of it
        from .continual.model import MultiDeviceModel

        path = self.paths.root / entry.path
        if not path.exists():
            raise TclError(f"registered model {entry.id} ({entry.device}, {entry.method}) has "
                           f"no file at {path}; the registry and models/registry disagree")
        try:
            return MultiDeviceModel.load(path, content_hash=entry.content_hash)
        except TclError as e:
            raise TclError(f"registered model {entry.id} ({entry.device}, {entry.method}): "
                           f"{e}") from None

    # -- writing -------------------------------------------------------------------------------
    def register(self, model, *, device: str, parent: str | None, method: str, snapshot: str,
                 n_records: int, newest_measured_at: datetime | None,
                 train_secs: float | None = None, metrics: dict | None = None) -> Entry:
        """Save ``model`` (a MultiDeviceModel) by content and add its row; a model already
        registered under the same snapshot is returned as it is (nothing new)."""
        with self._lock():
            same = self.find(snapshot)
            if same is not None:
                return same
            content = model.content_hash()
            model_id = content[:16]
            self.store.mkdir(parents=True, exist_ok=True)
            final = self.store / f"{model_id}.model"
            had_file = final.exists()
            model.save(final)    # atomic (write_checkpoint): a reader sees the whole file or none
            n = model.n_parameters()
            try:
                self._write(
                    "INSERT OR IGNORE INTO models VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, "
                    "?, ?, ?, now())",
                    [model_id, device, model.devices, parent, method, model.backbone, snapshot,
                     int(n_records), newest_measured_at, n["shared"], n["per_device"],
                     n["total"], content, train_secs, json.dumps(metrics or {}),
                     str(final.relative_to(self.paths.root))])
            except BaseException:
                if not had_file:   # no row names it: the registry is left as it was
                    final.unlink(missing_ok=True)
                raise
            return self.get(model_id)

    def set_metrics(self, model_id: str, metrics: dict) -> None:
        with self._lock():
            self._write("UPDATE models SET metrics = ? WHERE id = ?",
                        [json.dumps(metrics), model_id])

    def _write(self, statement: str, values: list) -> None:
        """``statement`` run on a copy of the registry file, which replaces it only once DuckDB
        has checkpointed it (``atomic_write``; the caller holds the registry's lock). DuckDB
        writes in place otherwise: a full disk failed its INSERT with a DuckDB error, or left
        the row only in a write-ahead log. Now it is one line, and the registry is as it was."""
        import duckdb

        try:
            self._merge_log()
            with atomic_write(self.file, "model registry") as tmp:
                try:
                    if self.file.exists():
                        shutil.copyfile(self.file, tmp)
                    con = duckdb.connect(str(tmp))
                    try:
                        self._check(con)
                        con.execute(SCHEMA)
                        con.execute(statement, values)
                        con.execute("CHECKPOINT")   # all of it in the file, no log beside it
                    finally:
                        con.close()
                finally:
                    Path(f"{tmp}.wal").unlink(missing_ok=True)
        except duckdb.Error as e:   # atomic_write names the disk's errors itself
            why = disk_problem(e, self.file) or str(e).splitlines()[0]
            raise TclError(f"cannot write model registry {self.file}: {why}; it is left as it "
                           "was") from None

    def _merge_log(self) -> None:
        """A killed writer's write-ahead log (``registry.duckdb.wal``) merged into the file by
        DuckDB, before the file is copied: a copy without it would lose its rows. The explicit
        CHECKPOINT fails loudly where the one at close would leave the log in silence."""
        if not Path(f"{self.file}.wal").exists():
            return
        con = self._connect(write=True)
        try:
            con.execute("CHECKPOINT")
        finally:
            con.close()


def registry_entry(path: Path) -> Entry | None:
    """The registry's row of the model file ``path`` when it is a registry file (it lies in
    ``<root>/models/registry/``, whatever root), else None. A file there that no row names
    (``<root>/models/registry.duckdb`` missing, or its table without the file) is a TclError:
    only the row's content hash vouches for a registry file, so nothing is done with it."""
    path = path.resolve()
    if len(path.parents) < 3:
        return None
    paths = Paths(path.parents[2])
    if path.parent != paths.registry_dir:
        return None
    if not paths.registry_file.is_file():
        raise TclError(f"model file {path} lies in the model registry's folder, but the "
                       f"registry {paths.registry_file} does not exist, so no recorded hash "
                       "vouches for the file: restore the registry from a backup")
    found = [e for e in ModelRegistry(paths).entries() if (paths.root / e.path).resolve() == path]
    if not found:
        raise TclError(f"model file {path} lies in the model registry's folder, but the "
                       f"registry {paths.registry_file} has no row for it, so no recorded hash "
                       "vouches for the file (`tcl models list`)")
    return found[0]


def _held_elsewhere(error: Exception) -> bool:
    """Whether DuckDB refused the file because another process holds its lock."""
    text = str(error).lower()
    return "lock" in text and ("conflicting" in text or "could not set lock" in text)


def _entry(row: dict) -> Entry:
    metrics = row.get("metrics")
    return Entry(**{**row, "devices": list(row["devices"]),
                    "metrics": json.loads(metrics) if isinstance(metrics, str) else (metrics or {})})
