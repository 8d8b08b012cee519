"""Shared fixtures: tiny real workloads (TE matmuls), a data root per test."""
from __future__ import annotations

import contextlib
import importlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
# Prefect's state (the ephemeral API's SQLite database) per test process, not the checkout's
# .prefect: parallel workers would otherwise share one database file.
if "PREFECT_HOME" not in os.environ:
    import tempfile

    os.environ["PREFECT_HOME"] = tempfile.mkdtemp(prefix="tcl-tests-prefect-")


@contextlib.contextmanager
def benchmark_module(name: str):
    """A script of benchmarks/ imported as a module, benchmarks/ on sys.path meanwhile (its
    sibling ``_common`` is imported from there)."""
    where = str(Path(__file__).resolve().parents[1] / "benchmarks")
    sys.path.insert(0, where)
    try:
        yield importlib.import_module(name)
    finally:
        sys.path.remove(where)


def stop_group(proc: subprocess.Popen, timeout: float = 60) -> None:
    """End a process started with ``start_new_session`` and what it started: SIGTERM to its
    group while it runs (so it can clean up, e.g. unregister a served deployment), SIGKILL
    when it has not ended within ``timeout`` seconds."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


@pytest.fixture
def paths(tmp_path: Path):
    from tcl.config import Paths

    return Paths(tmp_path / "data")


def te_task(name: str, mod) -> dict:
    import tvm

    from tcl.store.records import task_id_of

    return {"task_id": task_id_of(mod), "task_name": name, "op_class": "dense",
            "workload_json": tvm.ir.save_json(mod), "flop": 0.0}


def matmul_task(n: int = 64) -> dict:
    import tvm
    from tvm import te
    from tvm.s_tir.meta_schedule.testing import te_workload

    return te_task(f"matmul{n}", tvm.IRModule({"main": te.create_prim_func(te_workload.matmul(n, n, n))}))


def build_or_hang(mod_json: str, _target_json: str) -> tuple[bytes | None, str | None]:
    """A pooled builder's build function for tests (module level: its workers are spawned):
    a module whose function is named "hang" never finishes, any other builds at once."""
    if '"hang"' in mod_json:
        time.sleep(3600)
    return b"a library", None


def write_tasks(paths, rows: list[dict]):
    """Register tasks in the zoo's tasks file, as `tcl zoo` would."""
    import polars as pl

    from tcl.store.records import write_parquet_atomic

    frame = pl.DataFrame(rows)
    write_parquet_atomic(frame, paths.tasks_file)
    return frame


def metaschedule_database(out: Path) -> Path:
    """A JSONDatabase in ``out`` made by MetaSchedule itself: one workload (a 16x16 matmul)
    and three of its programs, run in 1, 2 and 3 ms."""
    import json

    import tvm
    from tvm import s_tir

    from tcl.measure.msjson import RECORD_FILE, WORKLOAD_FILE
    from tcl.sampling import sample_programs
    from tcl.store.devices import BUILTIN_DEVICES
    from tcl.tvm_compat import meta_schedule

    ms = meta_schedule()
    mod = tvm.ir.load_json(matmul_task(16)["workload_json"])
    db = ms.database.JSONDatabase(path_workload=str(out / WORKLOAD_FILE),
                                  path_tuning_record=str(out / RECORD_FILE), allow_missing=True)
    wl = db.commit_workload(mod)
    target = BUILTIN_DEVICES["cpu-avx2"].tvm_target()
    args = ms.arg_info.ArgInfo.from_prim_func(mod["main"])
    for i, (trace_json, _) in enumerate(sample_programs(mod, 3, seed=1)):
        sch = s_tir.Schedule(mod)
        s_tir.schedule.Trace.apply_json_to_schedule(json.loads(trace_json), sch)
        db.commit_tuning_record(ms.database.TuningRecord(sch.trace, wl, [1e-3 * (i + 1)],
                                                         target, args))
    return out


@pytest.fixture(autouse=True)
def _log_consoles_on_open_streams():
    """Every console log handler writes to an open stream in each test. Prefect binds its
    console handlers to the ``sys.stderr`` of the moment it sets logging up; inside a test that
    is pytest's capture of that test, closed when it ends. A later test's flow run then logged
    into a closed file, and with ``log_prints`` the handler's error report (a print) was logged
    again, without end: a RecursionError that failed whichever flow test ran next in that
    worker. A command line's stderr outlives its flows, so only tests need this."""
    _reopen_log_consoles()
    yield
    _reopen_log_consoles()


def _reopen_log_consoles() -> None:
    import logging

    loggers = [logging.getLogger()] + [logging.getLogger(name)
                                       for name in list(logging.root.manager.loggerDict)]
    for handler in {id(h): h for lg in loggers for h in lg.handlers}.values():
        console = getattr(handler, "console", None)   # Prefect's rich console handlers
        if console is not None and getattr(console.file, "closed", False):
            console.file = sys.stderr
        elif type(handler) is logging.StreamHandler and getattr(handler.stream, "closed", False):
            handler.stream = sys.stderr   # not setStream: it flushes the closed one first
