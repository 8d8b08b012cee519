"""DuckDB over the store: views ``records``, ``programs``, ``tasks``, ``networks``, ``devices``,
``selections`` (which sampler and round chose a program: join records on device, program_id).

The data stays in Parquet; views are defined on every connect from the files that are usable
(an unusable record file is named and left out, so the rest stays queryable).

Two ways in, one definition of the views (``Catalog._define_views``):

- ``Catalog``: tcl's own code (trusted SQL); the views read the files with ``read_parquet``.
  One device's records are read through ``Catalog.records`` (or ``records``), with the device,
  tasks and status bound as parameters: no internal read builds SQL from a name.
- ``SealedCatalog``, for ``tcl query`` (SQL from a user): Python opens the usable files as
  read-only Arrow datasets and registers them on an in-memory connection, then DuckDB's own file
  access is switched off for good (see ``SealedCatalog._seal``). DuckDB then cannot open any
  file, so no statement form can write one (or read one, even in the store); the statement-type
  check in ``check_read_only`` only gives the usual one-line answer for the common cases.

The catalog file ``data/tcl.duckdb`` (views only, for other DuckDB clients) is rewritten only
when the store's files or devices changed, and rebuilt when it is damaged; queries never run
on it.
"""
from __future__ import annotations

import hashlib
import json
import sys
import threading
from pathlib import Path
from typing import Callable, Iterable, Sequence, TypeVar

import duckdb
import polars as pl
import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.parquet as pq
from polars.exceptions import PanicException

from ..config import Paths, TclError
from .devices import DeviceRegistry
from .records import RECORD_SCHEMA, STATUSES, RecordStore, read_parquet, warn_once
from .schemas import (CANDIDATE_SCHEMA, IMPORTED_TASKS_FIX, NETWORK_SCHEMA, TASK_SCHEMA,
                      ZOO_FIX, foreign_file)
from .selections import SELECTION_SCHEMA, SelectionStore

T = TypeVar("T")

_DUCK_TYPES = {pl.Utf8: "VARCHAR", pl.Float64: "DOUBLE", pl.List(pl.Float64): "DOUBLE[]",
               pl.Datetime("us", "UTC"): "TIMESTAMPTZ", pl.Int32: "INTEGER", pl.Int64: "BIGINT",
               pl.Boolean: "BOOLEAN"}
_RECORD_ARROW = pl.DataFrame(schema=RECORD_SCHEMA).to_arrow().schema
# The columns of the `records` view: the stored ones plus the mean latency (null on error rows).
RECORD_COLUMNS = (*RECORD_SCHEMA, "latency")
READ_ONLY = ("queries are read-only: give one SELECT statement (SELECT, WITH, PIVOT, "
             "DESCRIBE, SHOW, SUMMARIZE); {what} is refused")


def _sql_list(files: list[Path]) -> str:
    return "[" + ", ".join("'" + str(f).replace("'", "''") + "'" for f in files) + "]"


def _empty_select(schema: dict[str, pl.DataType]) -> str:
    cols = ", ".join(f"NULL::{_DUCK_TYPES[t]} AS {c}" for c, t in schema.items())
    return f"SELECT {cols} WHERE false"


def _footer_ok(files: list[Path]) -> tuple[list[Path], list[str], pa.Schema | None]:
    """The files with a readable footer, the others named, and the union of their schemas
    (columns by name, types widened where files differ: what ``union_by_name`` reads)."""
    good, bad, schemas = [], [], []
    for f in files:
        try:
            schemas.append(pq.read_metadata(f).schema.to_arrow_schema())
            good.append(f)
        except Exception as e:  # pyarrow raises ArrowInvalid/OSError for bad footers
            bad.append(f"unreadable Parquet file {f}: {str(e).splitlines()[0]}")
    try:
        schema = pa.unify_schemas(schemas, promote_options="permissive") if schemas else None
    except (pa.ArrowInvalid, pa.ArrowTypeError):  # DuckDB's binder names the clash instead
        schema = None
    return good, bad, schema


_WHOLE: set[tuple] = set()   # (file, size, mtime) of zoo tables read whole in this process


def _check_whole(f: Path, what: str, fix: str, schema: dict) -> None:
    """A zoo table (a ``what``: "zoo tasks file") that every reader needs whole, read whole
    once per version of the file: a foreign schema or a damaged data page is a TclError
    naming the file, where a query later named only the view ("reading the stream registered
    as 'tasks' failed")."""
    stamp = tuple(_stamp(f))
    if stamp not in _WHOLE:
        read_parquet(f, what, fix, schema=schema)
        _WHOLE.add(stamp)


def _stamp(f: Path) -> list:
    try:
        st = f.stat()
        return [str(f), st.st_size, st.st_mtime_ns]
    except OSError:
        return [str(f), None, None]


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
        # What the views were defined from (statements, files with size and mtime, devices):
        # equal inputs give an equal catalog file, so it is rewritten only when they change.
        self.inputs: list = []
        self.on_file = not in_memory  # False also when the file is held by another writer
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
            self.inputs.clear()
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
                self.on_file = False
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

    def _execute(self, sql: str) -> None:
        self.inputs.append(sql)
        self.con.execute(sql)

    def _parquet_view(self, name: str, files: list[Path], schema: dict, what: str) -> bool:
        """View ``name`` over ``files`` (each a ``what``, e.g. "candidates file"): one that does
        not read, or of another schema than ``schema``, is named and skipped."""
        foreign = {f: why for f in files if (why := foreign_file(f, schema, what))}
        good, bad, unified = _footer_ok([f for f in files if f not in foreign])
        self._report(list(foreign.values()) + bad)
        return self._view_over(name, good, unified)

    def _view_over(self, name: str, good: list[Path], schema: pa.Schema | None) -> bool:
        """View ``name`` over the usable Parquet files ``good`` (False when there are none)."""
        if good:
            self.inputs.append([name, [_stamp(f) for f in good]])
            self._bind_files(name, good, schema)
        return bool(good)

    def _bind_files(self, name: str, good: list[Path], schema: pa.Schema | None) -> None:
        src = f"read_parquet({_sql_list(good)}, union_by_name=true)"
        self.con.execute(f"CREATE OR REPLACE VIEW {name} AS SELECT * FROM {src}")

    def _define_views(self) -> None:
        p = self.paths
        # Records: first copy of each record id; latency = mean of the repeats (ok rows only).
        # `retired` holds the records taken out of use by `tcl retire`, in the same shape.
        for view, retired in (("records", False), ("retired", True)):
            store = RecordStore(p, retired=retired, warn=None)
            good, bad = store.check(store.files())
            self._report([str(b) for b in bad])
            # Every usable record file has exactly RECORD_SCHEMA (check_record_file).
            if not self._view_over(f"{view}_raw", good, _RECORD_ARROW):
                self._execute(
                    f"CREATE OR REPLACE VIEW {view}_raw AS {_empty_select(RECORD_SCHEMA)}")
            self._execute(f"""
                CREATE OR REPLACE VIEW {view} AS
                SELECT * EXCLUDE (rn) FROM (
                  SELECT *, CASE WHEN status = 'ok' THEN list_avg(latencies) END AS latency,
                         row_number() OVER (PARTITION BY record_id ORDER BY measured_at) AS rn
                  FROM {view}_raw) WHERE rn = 1""")
        cands = sorted(p.candidates_dir.glob("task=*.parquet")) if p.candidates_dir.exists() else []
        if not self._parquet_view("programs", cands, CANDIDATE_SCHEMA, "candidates file"):
            self._execute(f"CREATE OR REPLACE VIEW programs AS {_empty_select(CANDIDATE_SCHEMA)}")
        if not self._parquet_view("selections", SelectionStore(p).files(), SELECTION_SCHEMA,
                                  "selection file"):
            self._execute(
                f"CREATE OR REPLACE VIEW selections AS {_empty_select(SELECTION_SCHEMA)}")
        # Without a zoo (a data root of imported logs only) the views are empty, not missing
        # columns, so queries that join on network_key still bind.
        for name, files, schema in (
                ("tasks", [(p.tasks_file, "zoo tasks file", ZOO_FIX),
                           (p.imported_tasks_file, "imported tasks file", IMPORTED_TASKS_FIX)],
                 TASK_SCHEMA),
                ("networks", [(p.networks_file, "zoo networks file", ZOO_FIX)], NETWORK_SCHEMA)):
            for f, what, fix in files:   # tables every reader needs whole: an error
                if f.exists():
                    _check_whole(f, what, fix, schema)
            if not self._parquet_view(name, [f for f, _, _ in files if f.exists()], schema,
                                      files[0][1]):
                self._execute(f"CREATE OR REPLACE VIEW {name} AS {_empty_select(schema)}")
        devices = [{"device": d.name, "target": json.dumps(d.target, sort_keys=True),
                    "remote": d.is_remote, "host_cpu": d.host_cpu, "description": d.description}
                   for d in DeviceRegistry(p).all().values()]
        self.inputs.append(devices)
        frame = pl.DataFrame(devices)  # noqa: F841  (DuckDB reads the local by name)
        self.con.execute("CREATE OR REPLACE TABLE devices AS SELECT * FROM frame")

    @property
    def fingerprint(self) -> str:
        return hashlib.sha256(json.dumps(self.inputs, default=str).encode()).hexdigest()

    def sql(self, query: str) -> pl.DataFrame:
        try:
            return interruptible(self.con, lambda: self._frame(self.con.sql(query)))
        except duckdb.Error as e:
            raise TclError(f"query failed: {str(e).splitlines()[0]}") from None
        except (pl.exceptions.PolarsError, pa.ArrowException, PanicException) as e:
            raise TclError(f"query failed: its answer cannot be read into a table "
                           f"({str(e).splitlines()[0]})") from None

    def _frame(self, relation: duckdb.DuckDBPyRelation | None) -> pl.DataFrame:
        """A statement's answer (None: a statement without one) as a frame."""
        return pl.DataFrame() if relation is None else relation.pl()

    def records(self, device: str, columns: Sequence[str], task_ids: Iterable[str] | None = None,
                status: str | None = None) -> pl.DataFrame:
        """``columns`` (of ``RECORD_COLUMNS``) of ``device``'s records, optionally only those of
        ``task_ids`` and of ``status`` (one of ``STATUSES``), ordered by task and program. The
        values are bound parameters; a device without records gives an empty frame."""
        unknown = [c for c in columns if c not in RECORD_COLUMNS]
        if unknown or not columns:
            raise TclError(f"records: unknown column(s) {', '.join(map(repr, unknown)) or 'none'}"
                           f" (expected some of {', '.join(RECORD_COLUMNS)})")
        if status is not None and status not in STATUSES:
            raise TclError(f"records: unknown status {status!r} (expected one of "
                           f"{', '.join(STATUSES)})")
        where, bound = ["device = $device"], {"device": device}
        if task_ids is not None:
            where.append("task_id IN (SELECT unnest($task_ids::VARCHAR[]))")
            bound["task_ids"] = [str(t) for t in task_ids]
        if status is not None:
            where.append("status = $status")
            bound["status"] = status
        select = ", ".join(f'"{c}"' for c in columns)
        try:
            return self.con.sql(f"SELECT {select} FROM records WHERE {' AND '.join(where)} "
                                "ORDER BY task_id, program_id, record_id", params=bound).pl()
        except duckdb.Error as e:
            raise TclError(f"reading {device!r}'s records failed: {str(e).splitlines()[0]}") \
                from None

    def close(self) -> None:
        try:
            self.con.close()
        except duckdb.ResourceInUseException:
            # busy with a statement that a Ctrl-C left running (``interruptible``): closing it
            # raised over the interrupt; the connection ends with the process instead
            pass


INTERRUPT_GRACE_S = 1.0   # how long a Ctrl-C waits for DuckDB to stop a statement


def interruptible(con: duckdb.DuckDBPyConnection, run: Callable[[], T]) -> T:
    """``run()`` (a statement on ``con``) on a thread of its own, so that a Ctrl-C reaches this
    one at once and stops DuckDB itself (``con.interrupt()``) before it is raised here. DuckDB
    looks at Python's signals only between its steps, and one step (a lambda over a long list,
    a large aggregate) held a Ctrl-C of `tcl query` for over a minute. It looks at its own
    interrupt only between vectors, and one vector (a lambda over one list of 3e8 values) held
    it for minutes too: after ``INTERRUPT_GRACE_S`` the Ctrl-C is raised without it, the thread
    (a daemon, running a read) left to end with the process."""
    done: dict[str, object] = {}
    finished = threading.Event()

    def work() -> None:
        try:
            done["value"] = run()
        except BaseException as e:   # handed to the caller, as if it had run here
            done["error"] = e
        finally:
            finished.set()

    # An Event, not Thread.join: a join that a signal interrupts marks the thread as stopped
    # while it still runs, and a process that exits then aborts inside DuckDB.
    threading.Thread(target=work, name="duckdb-statement", daemon=True).start()
    try:
        finished.wait()
    except KeyboardInterrupt:
        con.interrupt()
        finished.wait(timeout=INTERRUPT_GRACE_S)   # mostly at once: within its current vector
        raise
    if "error" in done:
        raise done["error"]
    return done["value"]


def records(paths: Paths, device: str, columns: Sequence[str],
            task_ids: Iterable[str] | None = None, status: str | None = None) -> pl.DataFrame:
    """``Catalog.records`` on a catalog of its own (in memory, closed after)."""
    cat = Catalog(paths, in_memory=True)
    try:
        return cat.records(device, columns, task_ids, status)
    finally:
        cat.close()


def candidates_measured(paths: Paths, device: str, tasks: pl.DataFrame, n: int) -> pl.DataFrame:
    """Per task of ``tasks`` (task_id, task_name), by one query over the candidate files and the
    records: ``candidates`` (of its first ``n`` stored candidates), ``measured`` (of those, by
    program id in ``device``'s records) and ``todo`` (what measuring ``n`` per task still needs;
    a task whose candidates are not sampled yet counts ``n``)."""
    files = [f for f in (paths.candidates_file(t) for t in tasks["task_id"]) if f.exists()]
    cands = (f"SELECT task_id, program_id, requested, file_row_number AS pos "
             f"FROM read_parquet({_sql_list(files)}, file_row_number = true)") if files else \
        ("SELECT NULL::VARCHAR AS task_id, NULL::VARCHAR AS program_id, NULL::INTEGER AS "
         "requested, NULL::BIGINT AS pos WHERE false")
    cat = Catalog(paths, in_memory=True)
    try:
        cat.con.register("selected", tasks.select("task_id", "task_name"))
        return cat.con.sql(f"""
            WITH cand AS ({cands}),
            req AS (SELECT task_id, max(requested) AS requested FROM cand GROUP BY task_id),
            head AS (SELECT task_id, program_id FROM cand WHERE pos < {int(n)}),
            done AS (SELECT DISTINCT program_id FROM records WHERE device = $device),
            per_task AS (
              SELECT s.task_id, s.task_name, count(h.program_id) AS candidates,
                     count(d.program_id) AS measured, coalesce(any_value(q.requested), 0) AS asked
              FROM selected s LEFT JOIN head h USING (task_id)
                   LEFT JOIN done d USING (program_id) LEFT JOIN req q USING (task_id)
              GROUP BY s.task_id, s.task_name)
            SELECT task_id, task_name, candidates, measured,
                   (CASE WHEN candidates < {int(n)} AND asked < {int(n)} THEN {int(n)}
                    ELSE candidates END) - measured AS todo
            FROM per_task ORDER BY task_id""", params={"device": device}).pl()
    finally:
        cat.close()


class SealedCatalog(Catalog):
    """The views for SQL from a user, on a connection that cannot open a file.

    Python (trusted) opens each view's usable files as a read-only Arrow dataset and registers
    it on an in-memory connection; DuckDB scans it lazily (only the columns and rows a query
    needs), so nothing is copied up front. Then ``_seal`` switches DuckDB's file access off.
    """

    def __init__(self, paths: Paths | None = None,
                 warn: Callable[[str], None] | None = warn_once):
        super().__init__(paths, in_memory=True, warn=warn)
        self._seal()

    def _frame(self, relation: duckdb.DuckDBPyRelation | None) -> pl.DataFrame:
        """A user's answer, every value whole in a table, CSV and JSON (``_as_text``,
        ``check_showable``)."""
        frame = super()._frame(None if relation is None else _as_text(relation))
        check_showable(frame)
        return frame

    def _bind_files(self, name: str, good: list[Path], schema: pa.Schema | None) -> None:
        # A registered object is a view named `name`: the views defined over it are unchanged.
        self.con.register(name, pads.dataset([str(f) for f in good], format="parquet",
                                             schema=schema))

    def _seal(self) -> None:
        """DuckDB's own settings, set after the data is bound:

        - ``temp_directory = ''``: a query that outgrows memory fails rather than spilling
          (set first: DuckDB refuses to change it once external access is off).
        - ``enable_external_access = false`` with no ``allowed_directories``: DuckDB opens no
          file at all, so ``COPY ... TO``, ``EXPORT``, ``ATTACH`` of a file, ``INSTALL`` and
          ``read_*``/``glob`` fail with a Permission Error in whatever statement they sit
          (https://duckdb.org/docs/2.0/operations_manual/securing_duckdb/overview.html; the
          CLI's safe mode is this setting: https://duckdb.org/docs/2.0/clients/cli/safe_mode.html).
          An allowed directory is not enough: ``COPY ... TO`` writes inside one.
        - no extension auto-install or auto-load; ``python_enable_replacements = false``, so a
          name in the SQL cannot reach a Python object of the calling code.
        - ``lock_configuration = true`` last: ``SET``/``RESET``/``PRAGMA`` cannot undo any of it.
        """
        for setting in ("SET temp_directory = ''",
                        "SET enable_external_access = false",
                        "SET autoinstall_known_extensions = false",
                        "SET autoload_known_extensions = false",
                        "SET python_enable_replacements = false",
                        "SET lock_configuration = true"):
            self.con.execute(setting)


# DuckDB types that polars holds not at all (INTERVAL, UNION, BIGNUM), not whole (a TIMETZ
# loses its offset), or cannot write as CSV or JSON (BLOB, BIT): a column of one, or of a
# nested type holding one, is answered as DuckDB's own text of its values.
AS_TEXT = ("interval", "union", "bignum", "time with time zone", "blob", "bit")


def _holds_text_type(t) -> bool:
    """Whether the DuckDB type ``t`` is one of ``AS_TEXT``, or nests one."""
    if t.id in AS_TEXT:
        return True
    nested = t.children if t.id in ("list", "array", "struct", "map") else []
    return any(_holds_text_type(c) for _, c in nested if hasattr(c, "id"))   # not an ARRAY size


def _as_text(relation: duckdb.DuckDBPyRelation) -> duckdb.DuckDBPyRelation:
    """``relation`` with its columns of an ``AS_TEXT`` type cast to VARCHAR; by position, since
    an answer may name two columns alike."""
    types = relation.types
    if not any(_holds_text_type(t) for t in types):
        return relation
    return relation.project(", ".join(
        f'#{i}::VARCHAR AS "{name.replace(chr(34), chr(34) * 2)}"'
        if _holds_text_type(t) else f"#{i}"
        for i, (name, t) in enumerate(zip(relation.columns, types), start=1)))


# The days from 1970-01-01 that polars can show as a date (chrono's range, about 262,000 years
# either way); beyond them (DuckDB's 'infinity', a far year) formatting a value panics.
SHOWN_DAYS = (-96_465_292, 95_026_236)
_PER_DAY = {"ms": 86_400_000, "us": 86_400_000_000, "ns": 86_400_000_000_000}


def check_showable(frame: pl.DataFrame) -> None:
    """A TclError naming the first column with a date or time (anywhere in its values) that
    no format can show."""
    for column in frame.columns:
        for leaf in _temporal_leaves(frame[column]):
            days = leaf.to_physical().drop_nulls()
            if isinstance(leaf.dtype, pl.Datetime):
                days = days // _PER_DAY[leaf.dtype.time_unit]
            if len(days) and not (SHOWN_DAYS[0] <= days.min() and days.max() <= SHOWN_DAYS[1]):
                raise TclError(f"query failed: column {column!r} holds a date or time that "
                               "cannot be shown (an infinite one, or one over 262,000 years "
                               f"away): select it as text, e.g. {column}::VARCHAR")


def _temporal_leaves(series: pl.Series):
    """The date and datetime values of ``series``, through lists, arrays and structs."""
    dtype = series.dtype
    if isinstance(dtype, pl.List):
        yield from _temporal_leaves(series.explode())
    elif isinstance(dtype, pl.Array):
        yield from _temporal_leaves(series.arr.explode())
    elif isinstance(dtype, pl.Struct):
        for field in series.struct.unnest().iter_columns():
            yield from _temporal_leaves(field)
    elif dtype == pl.Date or isinstance(dtype, pl.Datetime):
        yield series


def check_read_only(sql: str) -> str:
    """``sql`` if DuckDB's parser reads it as one statement that may be a query, else a TclError.

    Not the safety (``SealedCatalog`` is): the one-line answer for statements that are plainly
    not queries. SELECT covers WITH, FROM-first, DESCRIBE, SHOW, SUMMARIZE, UNPIVOT and PIVOT
    with an IN list; MULTI is what DuckDB makes of a PIVOT that must first find its values, so
    it may wrap anything and is left to the sealed connection.
    """
    if not isinstance(sql, str) or not sql.strip().strip(";").strip():
        raise TclError("empty query: give one SELECT statement, e.g. "
                       "\"select device, count(*) from records group by 1\"")
    try:
        statements = duckdb.extract_statements(sql)
    except duckdb.Error as e:
        raise TclError(f"query failed: {str(e).splitlines()[0]}") from None
    if len(statements) != 1:
        raise TclError(f"give one statement at a time (got {len(statements)})")
    kind = statements[0].type.name
    if kind in ("SELECT", "MULTI"):
        return sql
    raise TclError(READ_ONLY.format(what=f"a {kind} statement"))


def _refresh_catalog_file(paths: Paths, fingerprint: str) -> None:
    """Rewrite the catalog file for other DuckDB clients when the views' inputs changed, or the
    file was changed by something else (its size or mtime differ from what was written)."""
    seen = paths.catalog_note
    stamp = _stamp(paths.catalog_file)[1:]
    try:
        if json.loads(seen.read_text()) == {"fingerprint": fingerprint, "stamp": stamp} \
                and not Path(str(paths.catalog_file) + ".wal").exists():
            return
    except (OSError, ValueError):
        pass
    try:
        cat = Catalog(paths, warn=None)  # rebuilt from scratch here when damaged
        cat.close()
        if not cat.on_file:  # held by another process's writer: the next query tries again
            return
        seen.parent.mkdir(parents=True, exist_ok=True)
        # Not atomic on purpose: a torn note fails to parse and only costs a rebuild.
        seen.write_text(json.dumps({"fingerprint": fingerprint,
                                    "stamp": _stamp(paths.catalog_file)[1:]}))
    except (duckdb.Error, OSError):  # not writable now: the next query tries again
        pass


def query(paths: Paths, sql: str, warn=lambda msg: print(f"warning: {msg}", file=sys.stderr)
          ) -> pl.DataFrame:
    """Run one user ``sql`` over the views on a ``SealedCatalog``; skipped files are reported
    through ``warn``. For ``tcl query`` only: internal code reads a device's records with
    ``records`` and anything else on a ``Catalog`` (this rebuilds the views on each call)."""
    check_read_only(sql)
    if paths.root.exists() and not paths.root.is_dir():
        raise TclError(f"data root {paths.root} is a file, not a directory")
    cat = SealedCatalog(paths, warn=warn)
    try:
        _refresh_catalog_file(paths, cat.fingerprint)
        return cat.sql(sql)
    finally:
        cat.close()
