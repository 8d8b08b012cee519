"""The `tcl` command as a user runs it: collection plan, queries, and the errors it names."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tcl.cli import main


def run(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_unknown_device_and_network_are_named(paths, capsys):
    code, _, err = run(capsys, "--data", str(paths.root), "collect", "--device", "tpu-v9")
    assert code == 2 and "unknown device 'tpu-v9'" in err
    code, _, err = run(capsys, "--data", str(paths.root), "collect", "--device", "cpu-avx2",
                       "--networks", "resnet19")
    assert code == 2 and "resnet19" in err and "resnet18" in err


def test_device_add_then_list(paths, capsys):
    target = json.dumps({"kind": "llvm", "mcpu": "znver3", "num-cores": 2})
    code, out, _ = run(capsys, "--data", str(paths.root), "device", "add", "zen3", "--target", target,
                       "--no-run")
    assert code == 0 and "zen3" in out
    code, out, _ = run(capsys, "--data", str(paths.root), "device", "list")
    assert "zen3" in out and "cpu-sse42" in out
    code, _, err = run(capsys, "--data", str(paths.root), "device", "add", "bad", "--target", "{}")
    assert code == 2 and "invalid target" in err


@pytest.mark.slow
def test_dry_run_prints_tasks_programs_and_estimate_then_query(paths, capsys):
    # A dry run extracts nothing: it names the networks the run would extract.
    code, out, err = run(capsys, "--data", str(paths.root), "collect", "--device", "cpu-avx2",
                         "--networks", "bert_tiny", "--small", "--dry-run")
    assert code == 2 and "not extracted yet" in out and "extract the zoo first" in err
    assert not paths.zoo_dir.exists()
    assert run(capsys, "--data", str(paths.root), "zoo", "--networks", "bert_tiny",
               "--small")[0] == 0
    code, out, _ = run(capsys, "--data", str(paths.root), "collect", "--device", "cpu-avx2",
                       "--networks", "bert_tiny", "--small", "--max-tasks", "3",
                       "--programs-per-task", "8", "--dry-run")
    assert code == 0
    # --max-tasks caps each split: 3 held-out and 3 training tasks
    assert "6 tasks x up to 8 programs: 48 to measure" in out and "min at" in out
    assert not paths.records_dir.exists()  # a dry run measures nothing
    # --new-tasks: a task that another host measured on this device is not measured again
    from test_store import rows

    from tcl.store.catalog import query
    from tcl.store.records import RecordStore

    planned = [line.split()[0] for line in out.splitlines() if "to measure" in line][1:]
    RecordStore(paths).append(rows(task=planned[0], n=1))   # host "cpu": not this host
    code, out, _ = run(capsys, "--data", str(paths.root), "collect", "--device", "cpu-avx2",
                       "--networks", "bert_tiny", "--small", "--max-tasks", "3",
                       "--programs-per-task", "8", "--dry-run")
    assert "6 tasks x up to 8 programs: 48 to measure" in out   # another host's record
    code, out, _ = run(capsys, "--data", str(paths.root), "collect", "--device", "cpu-avx2",
                       "--networks", "bert_tiny", "--small", "--max-tasks", "3",
                       "--programs-per-task", "8", "--dry-run", "--new-tasks")
    assert code == 0 and "5 tasks x up to 8 programs: 40 to measure" in out
    assert planned[0] not in out
    assert query(paths, "select count(*) n from records")["n"][0] == 1
    code, out, _ = run(capsys, "--data", str(paths.root), "query",
                       "select count(*) as n_tasks from tasks")
    assert code == 0 and "n_tasks" in out


def test_retire_names_bad_times_and_reports_what_moved(paths, capsys):
    code, _, err = run(capsys, "--data", str(paths.root), "retire", "--device", "cpu-avx2",
                       "--before", "yesterday", "--reason", "x")
    assert code == 2 and "'yesterday' is not an ISO time" in err
    code, _, err = run(capsys, "--data", str(paths.root), "retire", "--device", "cpu-avx2",
                       "--before", "2026-11-29T21:00", "--reason", "x")
    assert code == 2 and "time zone" in err
    code, out, _ = run(capsys, "--data", str(paths.root), "retire", "--device", "cpu-avx2",
                       "--before", "2026-11-29T21:00Z", "--reason", "x", "--dry-run")
    assert code == 0 and out.startswith("would retire 0 records in 0 files of cpu-avx2")


def test_query_formats_for_scripts(paths, capsys):
    from test_store import rows

    from tcl.store.records import RecordStore

    RecordStore(paths).append(rows(n=3))
    code, out, _ = run(capsys, "--data", str(paths.root), "query", "--format", "csv",
                       "select program_id, latency from records order by 1")
    assert code == 0 and out.splitlines()[0] == "program_id,latency" and len(out.splitlines()) == 4
    code, out, _ = run(capsys, "--data", str(paths.root), "query", "--format", "json",
                       "select program_id from records order by 1")
    assert [json.loads(line)["program_id"] for line in out.splitlines()] == ["p0", "p1", "p2"]


def test_query_csv_writes_list_and_struct_columns_as_json(paths, capsys):
    """CSV holds no nested values: `--format csv` on a list column was an internal error."""
    import csv
    import io

    from test_store import rows

    from tcl.store.records import RecordStore

    RecordStore(paths).append(rows(n=2))
    code, out, err = run(capsys, "--data", str(paths.root), "query", "--format", "csv",
                         "select program_id, latencies, {'n': 1, 'at': measured_at} s, "
                         "[]::double[] none, null::int[] missing from records order by 1")
    assert code == 0, err
    got = list(csv.DictReader(io.StringIO(out)))
    assert [json.loads(r["latencies"]) for r in got] == [[1e-3] * 3, [2e-3] * 3]
    assert json.loads(got[0]["s"])["n"] == 1 and json.loads(got[0]["none"]) == []
    assert got[0]["missing"] == ""   # null, as CSV writes any other null


HANG = """import pathlib
import time


def build():
    pathlib.Path(__file__).with_name("started").touch()
    time.sleep(10 ** 6)
"""


@pytest.mark.parametrize("command", ["tune", "zoo add"])
def test_ctrl_c_exits_130_with_one_line(tmp_path, command):
    """A terminal's Ctrl-C (SIGINT to the whole process group) while the command waits: here a
    user network's factory that never returns, reached early by both commands."""
    net = tmp_path / "hang_net.py"
    net.write_text(HANG)
    data = tmp_path / "data"
    data.mkdir()
    (data / "user_networks.json").write_text(json.dumps(
        {"hang": {"model": f"{net}:build", "inputs": ["1x3x8x8"]}}))
    argv = ["tune", "--network", "hang", "--device", "cpu-avx2", "--model", "random",
            "--trials", "8", "--out", str(tmp_path / "run")] if command == "tune" else \
        ["zoo", "add", "other", "--model", f"{net}:build", "--input", "1x3x8x8"]
    tcl = Path(sys.executable).parent / "tcl"
    # a terminal's foreground job: SIGINT at its default even where this runner inherited it
    # ignored (a background job, nohup), which tcl rightly keeps ignoring
    proc = subprocess.Popen([tcl, "--data", str(data), *argv], cwd=tmp_path,
                            start_new_session=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.time() + 300
    while time.time() < deadline and proc.poll() is None and \
            not (tmp_path / "started").exists():
        time.sleep(0.2)
    assert proc.poll() is None, proc.communicate()
    os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "Traceback" not in out + err
    lines = [line for line in err.splitlines() if line.strip()]
    assert lines == ["tcl: interrupted; finished work is stored, run the command again to "
                     "resume"], err


# one DuckDB step that runs for minutes: a lambda over lists, 4e8 md5 sums in one row
LONG_QUERY = ("select list_sum(list_transform(range(20000), lambda x: list_sum(list_transform("
              "range(20000), lambda y: length(md5((x * y)::varchar)))))) s")
# one step over one list of 1e8 values: DuckDB does not look at an interrupt until it ends
ONE_STEP_QUERY = "select sum(len(list_transform(range(100000000), lambda x: x + 1)))"


@pytest.mark.parametrize("sql", [LONG_QUERY, ONE_STEP_QUERY], ids=["nested", "one step"])
def test_ctrl_c_stops_a_long_query_at_once(tmp_path, sql):
    """Issue 38: after Ctrl-C a long `tcl query` ran on for 82 s (DuckDB looks at Python's
    signals only between its steps); now the query is interrupted in DuckDB itself. Issue 54:
    one step over one huge list ignores DuckDB's interrupt too, and `tcl query` then ended only
    after 31 s, saying "finished work is stored, run the command again to resume": a query
    stores nothing. It ends within seconds, saying so."""
    data = tmp_path / "data"
    data.mkdir()
    tcl = Path(sys.executable).parent / "tcl"
    proc = subprocess.Popen([tcl, "--data", str(data), "query", sql], cwd=tmp_path,
                            start_new_session=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        note = data / ".cache" / "catalog.json"   # written just before the query runs
        deadline = time.time() + 300
        while time.time() < deadline and proc.poll() is None and not note.exists():
            time.sleep(0.2)
        time.sleep(1)
        assert proc.poll() is None, proc.communicate()
        os.killpg(proc.pid, signal.SIGINT)
        start = time.monotonic()
        out, err = proc.communicate(timeout=20)
        took = time.monotonic() - start
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 130, err
    assert [line for line in err.splitlines() if line.strip()] == [
        "tcl: interrupted: the query stopped before its answer; a query writes nothing, so "
        "nothing is lost (run it again for its answer)"], err
    assert out == "" and took < 10, took


def test_ctrl_c_inside_a_tvm_callback_exits_130(monkeypatch, capsys):
    """TVM hands a KeyboardInterrupt raised in a Python callback back as a bare RuntimeError
    (what `tcl tune` met: the search calls tcl's cost model and callbacks); the CLI still
    reports the interrupt, not an internal error."""
    import tvm_ffi

    import tcl.cli

    def interrupted_in_callback(args) -> int:
        tvm_ffi.convert(lambda: signal.raise_signal(signal.SIGINT))()
        return 0

    monkeypatch.setattr(tcl.cli.status, "cmd_status", interrupted_in_callback)
    old = signal.signal(signal.SIGINT, signal.default_int_handler)   # as in a terminal
    try:
        code = main(["status"])
    finally:
        signal.signal(signal.SIGINT, old)
    err = capsys.readouterr().err
    assert code == 130 and err.startswith("tcl: interrupted;"), err
    assert "internal error" not in err


def test_models_list_honours_data(tmp_path, capsys):
    """--data names the data root; no params file is needed then."""
    (tmp_path / "data").mkdir()
    code, out, err = run(capsys, "--data", str(tmp_path / "data"), "models", "list",
                         "--params", str(tmp_path / "no-such.yaml"))
    assert code == 0 and out.startswith("no registered model"), err


def test_the_library_never_imports_flows(tmp_path):
    """tcl is a library with faces (its CLI, flows/): `tcl --help` leaves `flows` unimported,
    and no module of tcl, the CLI included, imports it (flows/ imports the library; the CLI's
    commands that run or serve a flow find it by its name, pyproject.toml's entry points)."""
    import ast

    code = ("import sys, contextlib, io; import tcl.cli\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            "    try:\n        tcl.cli.main(['--help'])\n    except SystemExit:\n        pass\n"
            "import os, tcl.pipeline.deployments, tcl.pipeline.prefect_setup\n"
            "print(os.environ['PREFECT_HOME'])\n"
            "print(sorted(m for m in sys.modules if m == 'flows' or m.startswith('flows.')))")
    root = Path(__file__).resolve().parent.parent
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_HOME"}
    env.update(PYTHONPATH=str(root), TCL_DATA=str(tmp_path / "data"))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, cwd=tmp_path, timeout=300)
    assert out.returncode == 0, out.stderr
    home, modules = out.stdout.strip().splitlines()[-2:]
    assert modules == "[]"
    # Prefect's home: under the data root, not beside the code (site-packages when installed)
    assert home == str(tmp_path / "data" / ".prefect") and Path(home).is_dir()
    for f in (root / "tcl").rglob("*.py"):
        for node in ast.walk(ast.parse(f.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
            assert not any(n == "flows" or n.startswith("flows.") for n in names), \
                f"{f.relative_to(root)} imports {names}"
