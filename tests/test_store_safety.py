"""The store cannot be damaged by accident: read-only queries, one device per name, and record
files that are unusable (foreign schema, wrong types, corrupt pages) named and skipped by every
reader. Fast: no builds, no measurements (those are in test_reliability.py)."""
import hashlib
import json
import subprocess
import sys
from pathlib import Path

import duckdb
import polars as pl
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from tcl.config import TclError
from tcl.store.devices import DeviceRegistry, MeasureSettings
from tcl.store.catalog import Catalog, SealedCatalog, check_read_only, query
from tcl.store.records import RECORD_SCHEMA, RecordStore, check_record_file
from test_store import rows


@pytest.fixture
def stored(paths):
    store = RecordStore(paths)
    store.append(rows(task="t1", n=3) + rows(task="t2", n=2))
    return paths, store


def count(paths) -> int:
    return query(paths, "select count(*) as n from records")["n"][0]


# ---- queries cannot write -------------------------------------------------------------------

@pytest.mark.parametrize("sql, kind", [
    ("COPY (SELECT * FROM records) TO '{root}/records/device=cpu-avx2/task=t1/x.parquet'", "COPY"),
    ("COPY (SELECT 1) TO '/tmp/tcl-should-not-exist.csv'", "COPY"),
    ("DROP VIEW records", "DROP"),
    ("CREATE TABLE records_raw AS SELECT 1 AS a", "CREATE"),
    ("ATTACH '{root}/other.duckdb' AS other", "ATTACH"),
    ("INSTALL httpfs", "LOAD"),
    ("LOAD json", "LOAD"),
    ("SET enable_external_access = true", "SET"),
    ("INSERT INTO devices VALUES ('x', '{{}}', false, 'cpu', '')", "INSERT"),
    ("EXPORT DATABASE '{root}/dump'", "EXPORT"),
    ("CALL pragma_version()", "CALL"),
    ("PRAGMA version", "PRAGMA"),
])
def test_writing_statements_are_refused_with_one_line(stored, sql, kind):
    paths, store = stored
    before = sorted(p.name for p in paths.root.rglob("*") if ".cache" not in p.parts)
    with pytest.raises(TclError, match="queries are read-only") as e:
        query(paths, sql.format(root=paths.root))
    assert "\n" not in str(e.value) and kind in str(e.value)
    after = sorted(p.name for p in paths.root.rglob("*") if ".cache" not in p.parts)
    assert after == before and count(paths) == 5


def test_reads_outside_the_data_root_and_hidden_writes_are_refused(stored, tmp_path):
    paths, _ = stored
    with pytest.raises(TclError, match="disabled by configuration"):
        query(paths, "select * from read_csv('/etc/passwd')")
    with pytest.raises(TclError, match="single SELECT"):
        query(paths, f"select * from query('copy (select 1) to ''{paths.root}/x.csv''')")
    with pytest.raises(TclError, match="one statement at a time"):
        query(paths, "select 1; drop view records")
    with pytest.raises(TclError, match="empty query"):
        query(paths, "  ;  ")
    assert not (paths.root / "x.csv").exists() and count(paths) == 5


def test_select_pivot_describe_and_show_still_work(stored):
    paths, _ = stored
    assert len(query(paths, "pivot records on status using count(*) group by device")) == 1
    assert "column_name" in query(paths, "describe records").columns
    assert "records" in query(paths, "show tables")["name"].to_list()
    assert check_read_only("with a as (select 1) select * from a")


def test_a_damaged_catalog_file_rebuilds_itself(stored):
    paths, _ = stored
    count(paths)  # the catalog file exists now
    con = duckdb.connect(str(paths.catalog_file))  # someone breaks it with another client
    con.execute("DROP VIEW records")
    con.execute("DROP VIEW records_raw")
    con.execute("CREATE TABLE records_raw AS SELECT 1 AS a")
    con.close()
    assert count(paths) == 5
    cat = Catalog(paths)  # the file itself serves other clients again
    assert cat.sql("select count(*) n from records")["n"][0] == 5
    cat.close()
    paths.catalog_file.write_bytes(b"this is not a duckdb file at all" * 100)
    assert count(paths) == 5


# ---- queries cannot write, by construction -------------------------------------------------

@pytest.fixture
def shared(stored, tmp_path):
    """A store with a model file, and a directory outside it holding a user network module and
    a CSV: what a statement might aim at. One query has run, so tcl's own files are in place."""
    paths, store = stored
    model = paths.models_dir / "cpu-avx2" / "tenset-mlp.pt"
    model.parent.mkdir(parents=True)
    model.write_bytes(b"model weights" * 100)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "mynet.py").write_text("def build():\n    return None\n")
    (outside / "secret.csv").write_text("a,b\n1,2\n")
    count(paths)
    return paths, store.files()[0], model, outside


def snapshot(*dirs) -> dict[str, str]:
    """Every file (and directory) under ``dirs`` with a hash of its bytes."""
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
            for d in dirs for p in sorted(d.rglob("*"))}


def test_the_pivot_route_of_issue_22_cannot_write(shared):
    paths, record_file, model, outside = shared
    before = snapshot(paths.root, outside)
    pivot = "PIVOT records ON status USING count(*) GROUP BY device"
    assert check_read_only(f"COPY ({pivot}) TO 'x.parquet'")  # MULTI: the connection decides
    for target in (record_file, model, outside / "mynet.py", paths.root / "new.parquet"):
        with pytest.raises(TclError, match="disabled by configuration") as e:
            query(paths, f"COPY ({pivot}) TO '{target}' (FORMAT parquet)")
        assert "\n" not in str(e.value)
    query(paths, f"CREATE TABLE t AS {pivot}")  # also MULTI: a table in memory, gone after
    assert "t" not in query(paths, "show tables")["name"].to_list()
    assert snapshot(paths.root, outside) == before and count(paths) == 5


def test_the_sealed_connection_opens_no_file_and_keeps_its_settings(shared):
    paths, record_file, _, _ = shared
    cat = SealedCatalog(paths)
    try:
        assert cat.sql("select count(*) n from records")["n"][0] == 5  # the views still read
        for sql in (f"select * from read_parquet('{record_file}')",  # not even the store's own
                    f"copy records to '{paths.root}/x.csv'", "install httpfs",
                    f"attach '{paths.root}/x.duckdb' as x"):
            with pytest.raises(TclError, match="disabled by configuration"):
                cat.sql(sql)
        for sql in ("set enable_external_access = true", "reset lock_configuration",
                    f"set allowed_directories = ['{paths.root}/']", "pragma threads = 1"):
            with pytest.raises(TclError, match="configuration has been locked"):
                cat.sql(sql)
        with pytest.raises(TclError, match="does not exist"):  # no Python object by name
            cat.sql("select * from cat")
    finally:
        cat.close()


# Statement pieces: every form the parser takes a query in, around every way DuckDB has to
# write a file, read one outside the store, or change its own settings.
FORMS = ["{s}", "{s};", "WITH r AS (SELECT * FROM records) {s}", "FROM ({s})",
         "SELECT * FROM ({s}) AS sub", "SELECT * FROM records WHERE EXISTS ({s})",
         "SELECT * FROM query('{e}')", "SELECT * FROM query_table('{e}')",
         "PIVOT ({s}) ON device USING count(*)", "UNPIVOT ({s}) ON COLUMNS(*) INTO NAME k VALUE v",
         "COPY ({s}) TO '{t}'", "CREATE TABLE t AS {s}", "SELECT 1; {s}"]
READS = ["SELECT * FROM records", "FROM records SELECT device, status",
         "PIVOT records ON status USING count(*) GROUP BY device",
         "PIVOT records ON status IN ('ok') USING count(*)",
         "UNPIVOT (SELECT device, build_secs FROM records) ON build_secs INTO NAME k VALUE v",
         "SELECT * FROM read_csv('{o}/secret.csv')", "SELECT * FROM read_text('{t}')",
         "SELECT * FROM read_parquet('{d}/**/*.parquet')", "SELECT * FROM glob('{d}/*')"]
ACTIONS = ["COPY ({q}) TO '{t}'", "COPY ({q}) TO '{t}' (FORMAT parquet)",
           "COPY ({q}) TO '{d}' (FORMAT parquet, PARTITION_BY (device), OVERWRITE_OR_IGNORE)",
           "COPY records FROM '{t}'", "EXPORT DATABASE '{d}'", "ATTACH '{t}' AS x",
           "INSTALL httpfs", "LOAD httpfs", "LOAD '{t}'", "SET enable_external_access = true",
           "SET allowed_directories = ['{d}']", "RESET lock_configuration",
           "PRAGMA enable_profiling", "SET profiling_output = '{t}'", "CALL pragma_version()"]


@st.composite
def statements(draw, targets: list[str], dirs: list[str], outside: str) -> str:
    s = draw(st.sampled_from(READS + ACTIONS))
    for _ in range(draw(st.integers(0, 2))):
        form = draw(st.sampled_from(FORMS))
        s = form.replace("{e}", s.replace("'", "''")).replace("{s}", s)
    q = draw(st.sampled_from(READS[:5]))
    return (s.replace("{q}", q).replace("{t}", draw(st.sampled_from(targets)))
            .replace("{d}", draw(st.sampled_from(dirs))).replace("{o}", outside))


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_no_statement_changes_a_byte_in_or_outside_the_data_root(shared, data):
    paths, record_file, model, outside = shared
    targets = [str(record_file), str(model), str(outside / "mynet.py"),
               str(outside / "new.csv"), str(paths.root / "new.parquet"), str(paths.catalog_file)]
    dirs = [str(paths.root), str(paths.records_dir), str(outside), str(outside / "new")]
    sql = data.draw(statements(targets, dirs, str(outside)))
    before = snapshot(paths.root, outside)
    try:
        query(paths, sql)
        event("query: ran")
    except TclError as e:  # refused, with one line
        assert "\n" not in str(e)
        event(f"query: {str(e)[:40]}")
    assert snapshot(paths.root, outside) == before, sql
    # The same statement straight on the sealed connection, without the statement-type check:
    # the connection alone is the guarantee.
    cat = SealedCatalog(paths, warn=None)
    try:
        for one in duckdb.extract_statements(sql):
            cat.sql(one.query)
        event("sealed: ran")
    except (TclError, duckdb.Error) as e:
        event(f"sealed: {str(e)[:40]}")
    finally:
        cat.close()
    assert snapshot(paths.root, outside) == before, sql


# ---- one device per name --------------------------------------------------------------------

ZEN3 = {"kind": "llvm", "mcpu": "znver3", "num-cores": 2}


def test_the_same_definition_again_is_a_no_op(paths):
    reg = DeviceRegistry(paths)
    reg.add("zen3", ZEN3)
    text = paths.devices_file.read_text()
    assert reg.is_registered("zen3", json.dumps(ZEN3))
    reg.add("zen3", json.dumps(ZEN3))
    assert paths.devices_file.read_text() == text


@pytest.mark.parametrize("change", [
    {"target": {**ZEN3, "mcpu": "haswell"}},
    {"measure": MeasureSettings(repeat=5)},
    {"rpc_key": "board", "tracker": "127.0.0.1:9190"},
])
def test_another_definition_under_a_name_is_refused_naming_both(paths, change):
    reg = DeviceRegistry(paths)
    reg.add("zen3", ZEN3)
    kwargs = {"target": ZEN3, **change}
    with pytest.raises(TclError, match="already registered as") as e:
        reg.add("zen3", **kwargs)
    assert "znver3" in str(e.value) and "refusing to redefine" in str(e.value)
    assert reg.get("zen3").target == ZEN3


def test_replacement_is_explicit_and_refused_once_there_are_records(paths):
    reg = DeviceRegistry(paths)
    reg.add("zen3", ZEN3)
    new = {**ZEN3, "mcpu": "znver2"}
    assert reg.add("zen3", new, replace=True).target == new
    RecordStore(paths).append(rows(device="zen3", n=1))
    with pytest.raises(TclError, match="has records"):
        reg.add("zen3", ZEN3, replace=True)
    assert reg.get("zen3").target == new


@pytest.mark.parametrize("settings", [{"repeat": 0}, {"number": -1}, {"timeout_sec": 0},
                                      {"min_repeat_ms": 10**9}])
def test_measurement_settings_have_ranges(settings):
    with pytest.raises(TclError, match="measurement setting"):
        MeasureSettings(**settings)


# ---- every record file read the same way ----------------------------------------------------

def foreign_schema(path):
    pl.DataFrame({"a": [1, 2], "b": ["x", "y"]}).write_parquet(path)


def wrong_types(path):
    frame = pl.DataFrame(rows(task="t3", n=2), schema=RECORD_SCHEMA)
    frame.with_columns(pl.col("build_secs").cast(pl.Utf8)).write_parquet(path)


def corrupt_inside(path):
    """Valid footer, damaged data pages: only decoding the pages finds it."""
    frame = pl.DataFrame(rows(task="t3", n=200), schema=RECORD_SCHEMA)
    frame.write_parquet(path, compression="zstd", statistics=False)
    data = bytearray(path.read_bytes())
    for i in range(200, len(data) // 2, 7):  # well inside the first column chunks
        data[i] ^= 0xFF
    path.write_bytes(bytes(data))


def truncated(path):
    pl.DataFrame(rows(task="t3", n=2), schema=RECORD_SCHEMA).write_parquet(path)
    path.write_bytes(path.read_bytes()[:-30])


def bad_status(path):
    frame = pl.DataFrame(rows(task="t3", n=2), schema=RECORD_SCHEMA)
    frame.with_columns(pl.lit("fine").alias("status")).write_parquet(path)


def another_device(path):
    """Issue 38: rows of another device filed under this one's folder (`tcl status` counted
    them by folder, `tcl query` by their column)."""
    pl.DataFrame(rows(device="cpu-sse42", task="t3", n=2), schema=RECORD_SCHEMA) \
        .write_parquet(path)


DAMAGE = [foreign_schema, wrong_types, corrupt_inside, truncated, bad_status, another_device]


@pytest.mark.parametrize("damage", DAMAGE, ids=lambda f: f.__name__)
def test_an_unusable_record_file_is_named_and_skipped_by_every_reader(stored, damage, tmp_path):
    from tcl.dataset import measured
    from tcl.measure.collect import measured_throughput

    paths, _ = stored
    bad = paths.records_dir / "device=cpu-avx2" / "task=t3" / "part-bad.parquet"
    bad.parent.mkdir(parents=True)
    damage(bad)
    assert check_record_file(bad) is not None
    named = []
    assert len(RecordStore(paths, warn=named.append).read()) == 5             # collect, plan
    assert len(query(paths, "select * from records", warn=named.append)) == 5  # query
    assert len(measured(paths, "cpu-avx2")) == 5                              # train, featurize
    measured_throughput(RecordStore(paths, warn=named.append), "cpu-avx2")
    from datetime import datetime, timezone

    done = RecordStore(paths, warn=named.append).retire(                     # retire
        "cpu-avx2", datetime(2000, 1, 1, tzinfo=timezone.utc), "test", dry_run=True)
    assert done.records == 0
    assert named and all(str(bad) in n for n in named)
    assert bad.exists()  # left where it is, for a person to look at


def test_every_verdict_is_cached_and_a_changed_file_is_checked_again(stored):
    paths, store = stored
    f = store.files()[0]
    assert store.check([f])[1] == []
    cache = json.loads((paths.root / ".cache" / "record-files.json").read_text())
    assert any(k.endswith(f.name) for k in cache)
    f.write_bytes(b"garbage")
    assert len(RecordStore(paths, warn=None).check([f])[1]) == 1


@pytest.mark.parametrize("name", ["../escape", "a/b", "", "..", "x" * 200])
def test_names_never_walk_out_of_the_store(paths, name):
    with pytest.raises(TclError, match="invalid"):
        RecordStore(paths).partition(name, "t1")
    with pytest.raises(TclError):
        DeviceRegistry(paths).add(name, ZEN3)


# ---- huge requests are bounded ----------------------------------------------------------------

def test_a_request_far_above_a_tiny_design_space_ends_with_what_exists():
    """An elementwise task has a handful of distinct programs: asking for 4096 ends at once
    (draws stop when they add nothing new) instead of drawing 4096 x 4 times."""
    import time

    import tvm
    from tvm import te

    from tcl.sampling import MAX_PROGRAMS_PER_TASK, sample_programs

    a = te.placeholder((8,), name="A")
    b = te.compute((8,), lambda i: a[i] + 1.0, name="B")
    mod = tvm.IRModule({"main": te.create_prim_func([a, b])})
    start = time.perf_counter()
    got = sample_programs(mod, MAX_PROGRAMS_PER_TASK)
    assert 1 <= len(got) < 200 and time.perf_counter() - start < 120
    with pytest.raises(TclError, match="programs per task must lie in"):
        sample_programs(mod, MAX_PROGRAMS_PER_TASK + 1)


# ---- issue 38: a full disk leaves whole files or none, and says so in one line ----------------

def limited(kib: int, *argv: str, code: str | None = None) -> subprocess.CompletedProcess:
    """`tcl ARGV` (or ``python -c CODE``) under a file-size limit of ``kib`` KiB (`ulimit -f`):
    a write past it fails as one on a full disk would, and nothing real fills up."""
    cmd = [sys.executable, "-c", code] if code else [str(Path(sys.executable).parent / "tcl"),
                                                      *argv]
    return subprocess.run(["bash", "-c", f'ulimit -f {kib}; exec "$0" "$@"', *cmd],
                          capture_output=True, text=True, timeout=600, cwd=Path(__file__).parent)


def no_temporary_file(*dirs: Path) -> bool:
    return not [p for d in dirs for p in d.rglob("*") if ".tmp" in p.name]


@pytest.fixture
def matmul_root(paths):
    """A data root with one real task and one measured program of it (the unscheduled one)."""
    from conftest import matmul_task, write_tasks

    write_tasks(paths, [matmul_task(64)])
    add_program(paths, json.dumps([[], []]))
    return paths


def add_program(paths, trace: str) -> None:
    """A measured record of the root's task with ``trace``."""
    from test_store import rows

    from tcl.store.records import program_id, record_id

    tid = pl.read_parquet(paths.tasks_file)["task_id"][0]
    RecordStore(paths).append([{**rows(task=tid, n=1)[0], "trace_json": trace,
                                "program_id": program_id(tid, trace),
                                "record_id": record_id("cpu-avx2", tid, trace)}])


def test_an_export_past_the_file_size_limit_leaves_the_database_as_it_was(matmul_root, tmp_path):
    """Issue 38: `tcl export` said "exported 8 new records" and left truncated JSON (MetaSchedule
    checks none of its writes); now each file is written whole or not at all."""
    paths, out = matmul_root, tmp_path / "db"
    got = limited(8, "--data", str(paths.root), "export", str(out), "--device", "cpu-avx2")
    assert got.returncode == 2 and got.stdout == "", got
    (line,) = got.stderr.splitlines()
    assert line.startswith("tcl: error: cannot write database file") and \
        str(out / "database_workload.json") in line and "file too large" in line, line
    assert list(out.iterdir()) == []                              # no part, no temporary file
    got = limited(1 << 20, "--data", str(paths.root), "export", str(out), "--device", "cpu-avx2")
    assert got.returncode == 0 and "exported 1 new records" in got.stdout, got
    before = snapshot(out)
    add_program(paths, split_trace(paths))
    got = limited(8, "--data", str(paths.root), "export", str(out), "--device", "cpu-avx2")
    assert got.returncode == 2 and len(got.stderr.splitlines()) == 1, got
    assert snapshot(out) == before                                # the old database, unchanged


def _user_folder(paths, tmp_path) -> Path:
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("mine")
    return tmp_path / "mine"


def _database_without_manifest(paths, tmp_path) -> Path:
    """A MetaSchedule database (tune's output, another tool's) that no tcl export made."""
    db = tmp_path / "ms"
    db.mkdir()
    for name in ("database_workload.json", "database_tuning_record.json"):
        (db / name).write_text("")
    return db


def _another_devices_export(paths, tmp_path) -> Path:
    db = _database_without_manifest(paths, tmp_path)
    (db / "manifest.json").write_text(json.dumps({"device": "cpu-sse42"}))
    return db


def _garbled_manifest(paths, tmp_path) -> Path:
    db = _database_without_manifest(paths, tmp_path)
    (db / "manifest.json").write_text("{not json")
    return db


@pytest.mark.parametrize("target, why", [
    (lambda paths, tmp_path: paths.root, "holds records"),
    (lambda paths, tmp_path: paths.records_dir, "holds device=cpu-avx2"),
    (_user_folder, "holds notes.txt"),
    (_database_without_manifest, "has no manifest.json"),
    (_another_devices_export, "holds device 'cpu-sse42'"),
    (_garbled_manifest, "manifest.json is not"),
], ids=["data-root", "records", "user-folder", "no-manifest", "other-device", "bad-manifest"])
def test_export_refuses_a_directory_that_is_no_earlier_export_of_the_device(
        matmul_root, tmp_path, capsys, target, why):
    """Issue 54: `tcl export` wrote into any existing directory (the data root, records/, a
    user's folder), and into another device's MetaSchedule database without a manifest it said
    "0 new records" and wrote a manifest that lied. A directory that holds anything but an
    earlier export of the same device is refused, naming it, and nothing is written."""
    from tcl.cli import main

    paths = matmul_root
    out = target(paths, tmp_path)
    before = snapshot(paths.root, tmp_path)
    code = main(["--data", str(paths.root), "export", str(out), "--device", "cpu-avx2"])
    err = capsys.readouterr().err
    assert code == 2 and len(err.splitlines()) == 1, err
    assert str(out) in err and why in err, err
    assert snapshot(paths.root, tmp_path) == before


def split_trace(paths) -> str:
    """Another program of the task: its first loop split."""
    import tvm
    from tvm import s_tir

    from tcl.store.traces import trace_to_json

    sch = s_tir.Schedule(tvm.ir.load_json(pl.read_parquet(paths.tasks_file)["workload_json"][0]))
    sch.split(sch.get_loops(sch.get_sblock("C"))[0], [None, 4])
    return trace_to_json(sch.trace)


WRITES = {
    "record file": "from test_store import rows; from tcl.store.records import RecordStore; "
                   "RecordStore(P).append([dict(r, error=os.urandom(20000).hex()) "
                   "for r in rows(n=1)])",
    "model file": "from tcl.models import make_model; "
                  "make_model('tenset-mlp', device='cpu').save(P.models_dir / 'm.model')",
    "device registry": "from tcl.store.jsonfile import JsonRegistry; JsonRegistry("
                       "P.devices_file, 'device registry').write({'mine': 'x' * 20000})",
}


@pytest.mark.parametrize("what", WRITES)
def test_a_store_write_past_the_limit_is_one_error_naming_the_file_and_leaves_nothing(
        paths, what):
    """Issue 38: a full disk said "ComputeError" (polars) or "enforce fail" (torch) and left
    `.tmp` files; every writer goes through `tcl.config.atomic_write`."""
    paths.root.mkdir(parents=True)
    code = (f"import os, sys; from pathlib import Path; sys.path.insert(0, "
            f"{str(Path(__file__).parent)!r}); from tcl.config import Paths, TclError; "
            f"P = Paths(Path({str(paths.root)!r}))\n"
            f"try:\n    {WRITES[what]}\nexcept TclError as e:\n    print(e)")
    got = limited(8, code=code)
    assert got.returncode == 0 and got.stdout.startswith(f"cannot write {what} "), got
    assert "file too large" in got.stdout and len(got.stdout.splitlines()) == 1
    assert no_temporary_file(paths.root)


REGISTER = ("import sys; from pathlib import Path; sys.path.insert(0, {tests!r}); "
            "from tcl.config import Paths, TclError; "
            "from test_model_safety import register, tiny_continual\n"
            "try:\n    register(Paths(Path({root!r})), tiny_continual(['cpu-avx2'], seed={seed}))\n"
            "except TclError as e:\n    print(e)")


def test_a_model_registry_write_past_the_limit_is_one_line_and_leaves_it_as_it_was(paths):
    """Issue 38: DuckDB wrote the registry in place: past the end of the disk its INSERT failed
    with a DuckDB error, or the row stayed in a write-ahead log beside a file that could not
    take it. Now a copy is written and renamed over it (`tcl.config.atomic_write`): the limit
    (100 KiB: the model file fits, the registry's does not) is one line, nothing changed."""
    from test_model_safety import register, tiny_continual

    from tcl.registry import ModelRegistry

    def past_the_limit(seed: int) -> None:
        code = REGISTER.format(tests=str(Path(__file__).parent), root=str(paths.root),
                               seed=seed)
        got = limited(100, code=code)
        assert got.returncode == 0 and len(got.stdout.splitlines()) == 1, got
        assert got.stdout.startswith(f"cannot write model registry {paths.registry_file}: "
                                     "file too large"), got.stdout

    past_the_limit(1)                              # the first entry of a new registry
    assert sorted(p.name for p in paths.models_dir.rglob("*")) == ["registry"]
    first = register(paths, tiny_continual(["cpu-avx2"]))
    before = snapshot(paths.models_dir)
    past_the_limit(2)                              # one more entry
    assert snapshot(paths.models_dir) == before    # no model file, no log, no temporary file
    assert [e.id for e in ModelRegistry(paths).entries()] == [first.id]


def test_featurize_past_the_limit_is_one_line_and_leaves_no_temporary_file(matmul_root):
    got = limited(2, "--data", str(matmul_root.root), "featurize")
    assert got.returncode == 2, got
    (line,) = got.stderr.splitlines()
    assert "cannot write features file" in line and "features/task=" in line, line
    assert no_temporary_file(matmul_root.root)
    assert not list(matmul_root.features_dir.glob("*.parquet"))


# ---- issue 38: foreign files are named, never read as if they were tcl's -----------------------

def test_status_and_query_agree_on_a_file_filed_under_another_device(stored, capsys):
    from tcl.cli import main

    paths, _ = stored
    f = paths.records_dir / "device=cpu-avx2" / "task=t3" / "part-x.parquet"
    f.parent.mkdir(parents=True)
    another_device(f)
    assert check_record_file(f).startswith("its rows name device 'cpu-sse42', not its folder's")
    assert main(["--data", str(paths.root), "status", "--format", "json"]) == 0
    status = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert main(["--data", str(paths.root), "query", "--format", "csv",
                 "select device, count(*) n from records group by 1 order by 1"]) == 0
    out = capsys.readouterr()
    assert out.out.splitlines() == ["device,n", "cpu-avx2,5"] and "part-x.parquet" in out.err
    assert [(s["device"], s["ok_records"]) for s in status] == [("cpu-avx2", 5)], status


def foreign_candidates(paths):
    paths.candidates_dir.mkdir(parents=True)
    pl.DataFrame({"program_id": ["p"], "trace": ["[]"]}).write_parquet(paths.candidates_file("t1"))


def foreign_tasks(paths):
    paths.zoo_dir.mkdir(parents=True)
    pl.DataFrame({"task": ["t1"], "flop": [1.0]}).write_parquet(paths.tasks_file)


def foreign_networks(paths):
    paths.zoo_dir.mkdir(parents=True)
    pl.DataFrame({"network": ["n"], "holdout": ["no"]}).write_parquet(paths.networks_file)


def foreign_registry(paths):
    paths.models_dir.mkdir(parents=True)
    con = duckdb.connect(str(paths.registry_file))
    con.execute("CREATE TABLE runs (id INTEGER)")
    con.close()


def another_models_table(paths):
    paths.models_dir.mkdir(parents=True)
    con = duckdb.connect(str(paths.registry_file))
    con.execute("CREATE TABLE models (id VARCHAR, device VARCHAR)")
    con.close()


@pytest.mark.parametrize("setup, argv, expected, code", [
    (foreign_candidates, ["featurize"], "skipped candidates file {root}/candidates/task=t1."
     "parquet is not one tcl wrote: foreign schema: missing columns task_id", 0),
    (foreign_candidates, ["query", "select count(*) from programs"], "skipped candidates file", 0),
    (foreign_tasks, ["featurize"], "zoo tasks file {root}/zoo/tasks.parquet is not one tcl "
     "wrote: foreign schema: missing columns task_id", 2),
    (foreign_tasks, ["query", "select 1"], "zoo tasks file", 2),
    (foreign_networks, ["zoo", "list"], "zoo networks file {root}/zoo/networks.parquet is not "
     "one tcl wrote: foreign schema: missing columns batch", 2),
    (foreign_networks, ["status"], "holdout is String, expected Boolean", 2),
    (foreign_registry, ["models", "list"], "model registry {root}/models/registry.duckdb is "
     "not one tcl wrote: it has no table models (tables: runs)", 2),
    (another_models_table, ["status"], "its table models has the columns id, device; "
     "expected a table models with the columns id, device, devices", 2),
], ids=lambda x: getattr(x, "__name__", None) or (" ".join(x) if isinstance(x, list) else ""))
def test_a_foreign_table_is_one_line_naming_the_file_and_what_was_expected(
        stored, capsys, setup, argv, expected, code):
    """Issue 38: a candidates file of another schema made `tcl featurize` say "0 new"; a foreign
    zoo table or model registry gave DuckDB's Binder and Catalog errors."""
    from tcl.cli import main

    paths, _ = stored
    setup(paths)
    assert main(["--data", str(paths.root), *argv]) == code
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(err) == 1 and expected.format(root=paths.root) in err[0], err
    assert "internal error" not in err[0]


def test_an_import_beside_a_foreign_imported_tasks_file_is_one_line_and_stores_nothing(
        paths, tmp_path, capsys):
    """Issue 38: `tcl import` read zoo/imported_tasks.parquet without its schema and failed in
    polars (ColumnNotFoundError) after storing the records; it is checked like the zoo's tables,
    before anything is stored."""
    from conftest import metaschedule_database

    from tcl.cli import main

    db = tmp_path / "db"
    db.mkdir()
    metaschedule_database(db)
    paths.zoo_dir.mkdir(parents=True)
    pl.DataFrame({"task": ["t1"], "flop": [1.0]}).write_parquet(paths.imported_tasks_file)
    before = snapshot(paths.root)
    assert main(["--data", str(paths.root), "import", str(db), "--device", "cpu-avx2"]) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(err) == 1 and err[0].startswith(
        f"tcl: error: imported tasks file {paths.imported_tasks_file} is not one tcl wrote: "
        "foreign schema: missing columns task_id"), err
    assert "move it away and import the databases again" in err[0]
    assert snapshot(paths.root) == before          # no record stored, the file as it was
