"""DuckDB over the store: views ``records``, ``programs``, ``tasks``, ``networks``, ``devices``,
``selections`` (which sampler and round chose a program: join records on device, program_id).

The data stays in Parquet; views are defined on every connect from the files that are usable
(an unusable record file is named and left out, so the rest stays queryable).

``tcl query`` runs on an in-memory connection locked down with DuckDB's own settings: file
access only inside the data root (to read it), no extension loading, the configuration locked,
and only SELECT statements (DuckDB's parser decides the statement type). ``COPY ... TO`` into
an allowed directory would still write, which is why the statement type is checked as well.
The catalog file ``data/tcl.duckdb`` (views only, for other DuckDB clients) is rebuilt when it
is damaged; queries never run on it.
"""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Callable

import duckdb
import polars as pl
import pyarrow.parquet as pq

from ..config import Paths, TclError
from ..device import DeviceRegistry
from .records import RECORD_SCHEMA, RecordStore, warn_once

_DUCK_TYPES = {pl.Utf8: "VARCHAR", pl.Float64: "DOUBLE", pl.List(pl.Float64): "DOUBLE[]",
               pl.Datetime("us", "UTC"): "TIMESTAMPTZ", pl.Int32: "INTEGER", pl.Int64: "BIGINT",
               pl.Boolean: "BOOLEAN"}
READ_ONLY = ("queries are read-only: give one SELECT statement (SELECT, WITH, PIVOT, "
             "DESCRIBE, SHOW, SUMMARIZE); {what} is refused")


def _sql_list(files: list[Path]) -> str:
    return "[" + ", ".join("'" + str(f).replace("'", "''") + "'" for f in files) + "]"


def _empty_select(schema: dict[str, pl.DataType]) -> str:
    cols = ", ".join(f"NULL::{_DUCK_TYPES[t]} AS {c}" for c, t in schema.items())
    return f"SELECT {cols} WHERE false"


def _footer_ok(files: list[Path]) -> tuple[list[Path], list[str]]:
    good, bad = [], []
    for f in files:
        try:
            pq.read_metadata(f)
            good.append(f)
        except Exception as e:  # pyarrow raises ArrowInvalid/OSError for bad footers
            bad.append(f"unreadable Parquet file {f}: {str(e).splitlines()[0]}")
    return good, bad


class Catalog:
    """A DuckDB connection with the tcl views defined.

    ``in_memory=False`` writes the views to the catalog file (rebuilt from scratch when it is
    damaged or held by another process's writer, in which case an in-memory one is used).
    Skipped files are named through ``warn`` (default: once per process on stderr).
    """

    def __init__(self, paths: Paths | None = None, in_memory: bool = False,
                 warn: Callable[[str], None] | None = warn_once):
        self.paths = paths or Paths.default()
        self.problems: list[str] = []
        self.warn = warn
        self.con = self._connect(in_memory)
        try:
            self._define_views()
        except duckdb.Error:
            if in_memory:
                raise
            # A damaged catalog (e.g. a table where a view belongs): rebuild it from scratch.
            self.con.close()
            self._remove_catalog_file()
            self.con = self._connect(False)
            self.problems.clear()
            self._define_views()

    def _remove_catalog_file(self) -> None:
        for f in (self.paths.catalog_file, Path(str(self.paths.catalog_file) + ".wal")):
            f.unlink(missing_ok=True)

    def _connect(self, in_memory: bool) -> duckdb.DuckDBPyConnection:
        if in_memory:
            return duckdb.connect(":memory:")
        self.paths.root.mkdir(parents=True, exist_ok=True)
        try:
            return duckdb.connect(str(self.paths.catalog_file))
        except duckdb.IOException as e:
            if "lock" in str(e).lower():  # another process writes it: views are cheap to redo
                return duckdb.connect(":memory:")
            self._remove_catalog_file()  # not a DuckDB file (or a damaged one): rebuild it
            return duckdb.connect(str(self.paths.catalog_file))
        except duckdb.Error:
            self._remove_catalog_file()
            return duckdb.connect(str(self.paths.catalog_file))

    def _report(self, problems: list[str]) -> None:
        self.problems += problems
        for p in problems:
            if self.warn:
                self.warn(f"skipped {p}")

    def _parquet_view(self, name: str, files: list[Path]) -> bool:
        good, bad = _footer_ok(files)
        self._report(bad)
        return self._view_over(name, good)

    def _view_over(self, name: str, good: list[Path]) -> bool:
        if good:
            src = f"read_parquet({_sql_list(good)}, union_by_name=true)"
            self.con.execute(f"CREATE OR REPLACE VIEW {name} AS SELECT * FROM {src}")
        return bool(good)

    def _define_views(self) -> None:
        p = self.paths
        # Records: first copy of each record id; latency = mean of the repeats (ok rows only).
        # `retired` holds the records taken out of use by `tcl retire`, in the same shape.
        for view, retired in (("records", False), ("retired", True)):
            store = RecordStore(p, retired=retired, warn=None)
            good, bad = store.check(store.files())
            self._report([str(b) for b in bad])
            if not self._view_over(f"{view}_raw", good):
                self.con.execute(
                    f"CREATE OR REPLACE VIEW {view}_raw AS {_empty_select(RECORD_SCHEMA)}")
            self.con.execute(f"""
                CREATE OR REPLACE VIEW {view} AS
                SELECT * EXCLUDE (rn) FROM (
                  SELECT *, CASE WHEN status = 'ok' THEN list_avg(latencies) END AS latency,
                         row_number() OVER (PARTITION BY record_id ORDER BY measured_at) AS rn
                  FROM {view}_raw) WHERE rn = 1""")
        from ..sampling import CANDIDATE_SCHEMA

        cands = sorted(p.candidates_dir.glob("task=*.parquet")) if p.candidates_dir.exists() else []
        if not self._parquet_view("programs", cands):
            self.con.execute(f"CREATE OR REPLACE VIEW programs AS {_empty_select(CANDIDATE_SCHEMA)}")
        from .selections import SELECTION_SCHEMA, SelectionStore

        if not self._parquet_view("selections", SelectionStore(p).files()):
            self.con.execute(
                f"CREATE OR REPLACE VIEW selections AS {_empty_select(SELECTION_SCHEMA)}")
        from .msjson import imported_tasks_file

        from ..zoo.extract import NETWORK_SCHEMA, TASK_SCHEMA

        # Without a zoo (a data root of imported logs only) the views are empty, not missing
        # columns, so queries that join on network_key still bind.
        for name, files, schema in (("tasks", [p.tasks_file, imported_tasks_file(p)], TASK_SCHEMA),
                                    ("networks", [p.networks_file], NETWORK_SCHEMA)):
            if not self._parquet_view(name, [f for f in files if f.exists()]):
                self.con.execute(f"CREATE OR REPLACE VIEW {name} AS {_empty_select(schema)}")
        devices = [{"device": d.name, "target": json.dumps(d.target, sort_keys=True),
                    "remote": d.is_remote, "host_cpu": d.host_cpu, "description": d.description}
                   for d in DeviceRegistry(p).all().values()]
        frame = pl.DataFrame(devices)  # noqa: F841  (DuckDB reads the local by name)
        self.con.execute("CREATE OR REPLACE TABLE devices AS SELECT * FROM frame")

    def lock_down(self) -> "Catalog":
        """Make this connection read-only for user queries (see the module docstring)."""
        root = str(self.paths.root).replace("'", "''")
        for setting in (f"SET allowed_directories=['{root}/']",
                        "SET enable_external_access=false",
                        "SET autoinstall_known_extensions=false",
                        "SET autoload_known_extensions=false",
                        "SET lock_configuration=true"):
            self.con.execute(setting)
        return self

    def sql(self, query: str) -> pl.DataFrame:
        try:
            return self.con.sql(query).pl()
        except duckdb.Error as e:
            raise TclError(f"query failed: {str(e).splitlines()[0]}") from None

    def close(self) -> None:
        self.con.close()


def check_read_only(sql: str) -> str:
    """``sql`` if it is exactly one SELECT statement (by DuckDB's parser), else a TclError."""
    if not isinstance(sql, str) or not sql.strip().strip(";").strip():
        raise TclError("empty query: give one SELECT statement, e.g. "
                       "\"select device, count(*) from records group by 1\"")
    try:
        statements = duckdb.extract_statements(sql)
    except duckdb.Error as e:
        raise TclError(f"query failed: {str(e).splitlines()[0]}") from None
    if len(statements) != 1:
        raise TclError(f"give one statement at a time (got {len(statements)})")
    (st,) = statements
    kind = st.type.name
    # PIVOT without an IN list parses as MULTI (DuckDB first finds the pivot values).
    if kind == "SELECT" or (kind == "MULTI" and re.search(r"\bpivot\b", st.query, re.I)):
        return sql
    raise TclError(READ_ONLY.format(what=f"a {kind} statement"))


def query(paths: Paths, sql: str, warn=lambda msg: print(f"warning: {msg}", file=sys.stderr)
          ) -> pl.DataFrame:
    """Run one read-only ``sql`` over the views; skipped files are reported through ``warn``."""
    check_read_only(sql)
    if paths.root.exists() and not paths.root.is_dir():
        raise TclError(f"data root {paths.root} is a file, not a directory")
    try:  # the catalog file for other DuckDB clients; rebuilt here when damaged
        Catalog(paths, warn=None).close()
    except (duckdb.Error, OSError):
        pass
    cat = Catalog(paths, in_memory=True, warn=warn).lock_down()
    try:
        return cat.sql(sql)
    finally:
        cat.close()
