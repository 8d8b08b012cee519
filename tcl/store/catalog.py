"""DuckDB over the store: views ``records``, ``programs``, ``tasks``, ``networks``, ``devices``.

The catalog file (``data/tcl.duckdb``) holds views only; the data stays in Parquet. Views are
rebuilt on every connect from the files that are readable: a corrupt partition is left out and
named in ``Catalog.problems`` so the rest stays queryable.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import duckdb
import polars as pl

from ..config import Paths, TclError
from ..device import DeviceRegistry
from .records import RECORD_SCHEMA, RecordStore

_DUCK_TYPES = {pl.Utf8: "VARCHAR", pl.Float64: "DOUBLE", pl.List(pl.Float64): "DOUBLE[]",
               pl.Datetime("us", "UTC"): "TIMESTAMPTZ", pl.Int32: "INTEGER"}


def _sql_list(files: list[Path]) -> str:
    return "[" + ", ".join("'" + str(f).replace("'", "''") + "'" for f in files) + "]"


def _empty_select(schema: dict[str, pl.DataType]) -> str:
    cols = ", ".join(f"NULL::{_DUCK_TYPES[t]} AS {c}" for c, t in schema.items())
    return f"SELECT {cols} WHERE false"


class Catalog:
    """A DuckDB connection with the tcl views defined."""

    def __init__(self, paths: Paths | None = None, in_memory: bool = False):
        self.paths = paths or Paths.default()
        self.problems: list[str] = []
        self.con = self._connect(in_memory)
        self._define_views()

    def _connect(self, in_memory: bool) -> duckdb.DuckDBPyConnection:
        if in_memory:
            return duckdb.connect(":memory:")
        self.paths.root.mkdir(parents=True, exist_ok=True)
        try:
            return duckdb.connect(str(self.paths.catalog_file))
        except duckdb.IOException:  # another process holds the file: the views are cheap to redo
            return duckdb.connect(":memory:")

    def _parquet_view(self, name: str, files: list[Path], select: str = "*") -> None:
        good, bad = RecordStore(self.paths).check(files)
        self.problems += [str(b) for b in bad]
        if good:
            src = f"read_parquet({_sql_list(good)}, union_by_name=true)"
            self.con.execute(f"CREATE OR REPLACE VIEW {name} AS SELECT {select} FROM {src}")
        return bool(good)

    def _define_views(self) -> None:
        p = self.paths
        # Records: first copy of each record id; latency = mean of the repeats (ok rows only).
        # `retired` holds the records taken out of use by `tcl retire`, in the same shape.
        for view, store in (("records", RecordStore(p)), ("retired", RecordStore(p, retired=True))):
            if not self._parquet_view(f"{view}_raw", store.files()):
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
        from .msjson import imported_tasks_file

        for name, files in (("tasks", [p.tasks_file, imported_tasks_file(p)]),
                            ("networks", [p.networks_file])):
            if not self._parquet_view(name, [f for f in files if f.exists()]):
                self.con.execute(f"CREATE OR REPLACE VIEW {name} AS SELECT NULL::VARCHAR AS "
                                 "task_id WHERE false")
        devices = [{"device": d.name, "target": json.dumps(d.target, sort_keys=True),
                    "remote": d.is_remote, "host_cpu": d.host_cpu, "description": d.description}
                   for d in DeviceRegistry(p).all().values()]
        frame = pl.DataFrame(devices)  # noqa: F841  (DuckDB reads the local by name)
        self.con.execute("CREATE OR REPLACE TABLE devices AS SELECT * FROM frame")

    def sql(self, query: str) -> pl.DataFrame:
        try:
            return self.con.sql(query).pl()
        except duckdb.Error as e:
            raise TclError(f"query failed: {str(e).splitlines()[0]}") from None

    def close(self) -> None:
        self.con.close()


def query(paths: Paths, sql: str, warn=lambda msg: print(msg, file=sys.stderr)) -> pl.DataFrame:
    """Run ``sql`` over the catalog; corrupt files are reported through ``warn``, not fatal."""
    cat = Catalog(paths)
    try:
        for problem in cat.problems:
            warn(f"warning: skipped {problem}")
        return cat.sql(sql)
    finally:
        cat.close()
