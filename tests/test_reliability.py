"""Faults with real processes: signals to a running `tcl collect`, an RPC tracker and server
that go away, and concurrent collections on one data root. Nothing is lost, nothing measured
twice, and nothing that a fault cut short is stored as a program error."""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import polars as pl
import psutil
import pytest

from conftest import matmul_task, write_tasks
from tcl.config import Paths
from tcl.store.catalog import query
from tcl.store.records import RecordStore

pytestmark = pytest.mark.slow
TCL = [sys.executable, "-m", "tcl.cli"]
ZOO = ["--networks", "bert_tiny", "--small", "--max-tasks", "1"]   # 2 small layer-norm tasks


def session_procs(sid: int) -> list[psutil.Process]:
    out = []
    for p in psutil.process_iter():
        try:
            if os.getsid(p.pid) == sid:
                out.append(p)
        except (ProcessLookupError, PermissionError, psutil.Error):
            pass
    return out


def wait_for(cond, timeout: float, what: str) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if cond():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def raw_records(paths: Paths) -> pl.DataFrame:
    files = RecordStore(paths).files()
    return pl.concat([pl.read_parquet(f) for f in files]) if files else pl.DataFrame()


@pytest.fixture(scope="module")
def zoo_template(tmp_path_factory):
    root = tmp_path_factory.mktemp("zoo") / "data"
    subprocess.run(TCL + ["--data", str(root), "zoo"] + ZOO[:3], check=True, timeout=600,
                   capture_output=True)
    return root


@pytest.fixture
def zoo_root(zoo_template, tmp_path):
    root = tmp_path / "data"
    shutil.copytree(zoo_template, root)
    return root


# ---- signals --------------------------------------------------------------------------------

@pytest.mark.parametrize("how", ["ctrl-c", "sigterm"])
def test_a_signal_stops_collection_in_seconds_keeping_what_finished(zoo_root, how):
    cmd = TCL + ["--data", str(zoo_root), "collect", "--device", "cpu-avx2", *ZOO,
                 "--programs-per-task", "6", "--batch-size", "2"]
    proc = subprocess.Popen(cmd, start_new_session=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    paths = Paths(zoo_root)
    wait_for(lambda: RecordStore(paths, warn=None).files(), 300, "the first batch")
    time.sleep(1.0)  # the next batch is building or running now
    sent = time.time()
    if how == "ctrl-c":   # what a terminal does: SIGINT to the whole foreground group
        os.killpg(proc.pid, signal.SIGINT)
    else:                 # `kill PID`: the collector alone
        os.kill(proc.pid, signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    took = time.time() - sent
    assert proc.returncode == (130 if how == "ctrl-c" else 143), err
    assert "Traceback" not in err + out
    last = [line for line in err.splitlines() if line.strip()][-1]
    name = "SIGINT" if how == "ctrl-c" else "SIGTERM"
    assert last.startswith(f"tcl: interrupted by {name}: kept "), last
    assert took < 30, f"stopped {took:.0f}s after the signal"
    wait_for(lambda: not session_procs(proc.pid), 10, "no worker left behind")
    first = raw_records(paths)
    assert 1 <= len(first) < 12
    assert set(first["status"]) == {"ok"}, "a cut-short program was stored as an error"
    subprocess.run(cmd, check=True, timeout=900, capture_output=True)   # resume
    final = raw_records(paths)
    assert len(final) == 12 and final["record_id"].n_unique() == 12
    assert set(first["record_id"]) <= set(final["record_id"])


# ---- an RPC tracker and server that go away -------------------------------------------------

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_module(*args) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", *args], start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def stop(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # the tracker/server and the workers they start
    except ProcessLookupError:
        pass
    proc.wait()


class Loopback:
    """A real TVM RPC tracker and one RPC server on 127.0.0.1."""

    def __init__(self, key: str = "loop"):
        self.key, self.port = key, free_port()
        self.tracker = start_module("tvm.exec.rpc_tracker", "--host", "127.0.0.1",
                                    "--port", str(self.port), "--port-end", str(self.port + 1))
        self.server = None

    def start_server(self) -> None:
        sp = free_port()
        self.server = start_module("tvm.exec.rpc_server", "--host", "127.0.0.1", "--port",
                                   str(sp), "--port-end", str(sp + 1), "--tracker",
                                   f"127.0.0.1:{self.port}", "--key", self.key)

    def close(self) -> None:
        for p in (self.server, self.tracker):
            if p is not None:
                stop(p)


@pytest.fixture
def loopback():
    lb = Loopback()
    yield lb
    lb.close()


def test_measure_through_a_real_tracker_then_it_goes_away(zoo_root, loopback):
    from tcl.store.devices import DeviceRegistry
    from tcl.measure.devices import create

    paths = Paths(zoo_root)
    target = json.dumps({"kind": "llvm", "mcpu": "haswell", "num-cores": 1})
    add = TCL + ["--data", str(zoo_root), "device", "add", "board", "--target", target,
                 "--rpc-key", loopback.key, "--tracker", f"127.0.0.1:{loopback.port}",
                 "--timeout", "2", "--no-run"]
    subprocess.run(add, check=True, timeout=120, capture_output=True)
    device = DeviceRegistry(paths).get("board")
    wait_for(lambda: "cannot reach" not in (create(device).problem() or ""), 60, "the tracker")
    assert "no RPC server is registered under key 'loop'" in create(device).problem()
    collect = TCL + ["--data", str(zoo_root), "collect", "--device", "board", *ZOO]

    # No server yet: a clear error, nothing stored.
    done = subprocess.run(collect + ["--programs-per-task", "2"], timeout=300,
                          capture_output=True, text=True)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "no RPC server is registered under key 'loop'" in done.stderr.splitlines()[-1]
    assert not RecordStore(paths, warn=None).files()

    # With a server: programs measured through the tracker.
    loopback.start_server()
    wait_for(lambda: create(device).problem() is None, 60, "the server to register")
    done = subprocess.run(collect + ["--programs-per-task", "2"], timeout=600,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    measured = raw_records(paths)
    assert len(measured) == 4 and set(measured["status"]) == {"ok"}
    assert set(measured["host_cpu"]) == {f"rpc:loop@127.0.0.1:{loopback.port}"}

    # The server dies mid-run (the tracker still lists it): no answer, not a program error.
    proc = subprocess.Popen(collect + ["--programs-per-task", "8", "--batch-size", "2"],
                            start_new_session=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    wait_for(lambda: len(RecordStore(paths, warn=None).files()) > 2, 600, "a remote batch")
    stop(loopback.server)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 2 and "Traceback" not in err + out, err
    assert "stopped: the tracker" in err.splitlines()[-1]
    wait_for(lambda: not session_procs(proc.pid), 10, "no worker left behind")
    assert set(raw_records(paths)["status"]) == {"ok"}

    # The tracker is gone: refused before any build, nothing stored, nothing left running.
    stop(loopback.tracker)
    before = len(raw_records(paths))
    proc = subprocess.Popen(collect + ["--programs-per-task", "8"], start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 2 and "cannot reach the tracker" in err.splitlines()[-1], err
    wait_for(lambda: not session_procs(proc.pid), 10, "no worker left behind")
    assert len(raw_records(paths)) == before


# ---- concurrent writers ---------------------------------------------------------------------

COLLECT_SCRIPT = textwrap.dedent("""
    import sys, polars as pl
    from pathlib import Path
    from tcl.config import Paths
    from tcl.store.devices import BUILTIN_DEVICES
    from tcl.measure.collect import collect
    paths = Paths(Path(sys.argv[1]))
    tasks = pl.read_parquet(paths.tasks_file)
    collect(paths, BUILTIN_DEVICES[sys.argv[2]], tasks, int(sys.argv[3]), batch_size=2,
            progress=False, pipelined=sys.argv[4] == "pipelined")
""")


def test_concurrent_collections_lose_nothing_and_measure_nothing_twice(paths, tmp_path):
    """Overlapping collections whose batches end mid-task (3 and 5 programs a task, batches of
    2): each one reaches the other's task while its own batch still holds a task lock, the
    shape that deadlocked (issue 38). The one-core device's two are pipelined: a batch built
    ahead holds locks too. All finish; nothing is measured twice or lost."""
    write_tasks(paths, [matmul_task(32), matmul_task(40)])
    script = tmp_path / "collect.py"
    script.write_text(COLLECT_SCRIPT)
    runs = [("cpu-avx2", 3, "plain"), ("cpu-avx2", 5, "plain"),     # started together
            ("cpu-avx2-1c", 4, "pipelined"), ("cpu-avx2-1c", 3, "pipelined")]
    procs = [subprocess.Popen([sys.executable, str(script), str(paths.root), dev, str(n), how],
                              stderr=subprocess.PIPE, text=True) for dev, n, how in runs]
    for p in procs:
        _, err = p.communicate(timeout=900)
        assert p.returncode == 0, err
    raw = raw_records(paths)
    per_device = dict(raw.group_by("device").len().iter_rows())
    assert per_device == {"cpu-avx2": 10, "cpu-avx2-1c": 8}, "a program was measured twice"
    assert raw["record_id"].n_unique() == len(raw)
    programs = set(query(paths, "select program_id from programs")["program_id"])
    assert set(raw["program_id"]) <= programs, "a measured program's candidate was lost"
    assert len(programs) == 10   # 5 candidates per task: the larger ask extended the file


def test_a_collection_never_waits_for_a_task_while_holding_another(paths):
    """The deadlock of issue 38, step by step: A measures task 1 and finds task 2 taken by B
    with A's batch not yet full. A must hand its batch over (stored: task 1 released) before it
    waits for task 2; B, doing the same, can then take task 1. A stopped wait returns."""
    import threading

    from tcl.measure.collect import CollectStats, _batches, _jobs, _TaskLocks, plan
    from tcl.store.devices import BUILTIN_DEVICES

    tasks = write_tasks(paths, [matmul_task(32), matmul_task(40)])
    first, second = tasks["task_id"].to_list()
    device = BUILTIN_DEVICES["cpu-avx2"]
    b = _TaskLocks(paths, device.name)
    assert b.try_take(second)                                   # B measures task 2
    a = _TaskLocks(paths, device.name)
    batches = _batches(_jobs(paths, device, plan(paths, device, tasks, 3), 0, CollectStats(),
                             a, lambda msg: None), 4)
    got: list = []
    worker = threading.Thread(target=lambda: got.append(next(batches)), daemon=True)
    worker.start()
    worker.join(120)
    if worker.is_alive():                                       # A waits holding task 1
        b.release(second)
        worker.join(120)
        pytest.fail("a collection waited for task 2 while holding task 1 (deadlock)")
    jobs, flushed = got[0]
    assert [job.task_id for job in jobs] == [first] * 3 and flushed   # flushed short of 4
    assert set(a.held) == {first}                               # released once stored
    a.release(first)
    with pytest.raises(RuntimeError, match="flush the batch first"):
        b.take(first)                                           # the rule, enforced
    # A's wait for task 2 (B still holds it) ends when A is asked to stop
    stopped = _TaskLocks(paths, device.name, stop=lambda: True)
    assert stopped.take(second) is False and not stopped.held
    b.release(second)
    jobs, _ = next(batches)
    assert [job.task_id for job in jobs] == [second] * 3        # then A measures it


def test_an_interrupted_active_collection_resumes_its_selection(zoo_root):
    """SIGINT mid-measurement, then the same command: the stored selection is measured, no
    program is selected or measured twice."""
    cmd = TCL + ["--data", str(zoo_root), "collect", "--device", "cpu-avx2", *ZOO,
                 "--programs-per-task", "10", "--select", "kcenter", "--budget", "0.6",
                 "--batch-size", "2"]
    paths = Paths(zoo_root)
    proc = subprocess.Popen(cmd, start_new_session=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    wait_for(lambda: RecordStore(paths, warn=None).files(), 300, "the first batch")
    os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "Traceback" not in out + err, err
    chosen = query(paths, "select program_id from selections")["program_id"].to_list()
    assert len(chosen) == 12   # 60% of 2 tasks x 10 candidates, stored before measuring
    first = raw_records(paths)
    assert 1 <= len(first) < 12
    done = subprocess.run(cmd, timeout=900, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert query(paths, "select count(*) n from selections")["n"][0] == 12
    final = raw_records(paths)
    assert sorted(final["program_id"]) == sorted(chosen)   # the picks, each once
    assert set(first["record_id"]) <= set(final["record_id"])
