"""Import from and export to MetaSchedule JSONDatabase files.

A JSONDatabase directory holds ``database_workload.json`` (one line per workload: structural hash
and the IRModule) and ``database_tuning_record.json`` (one line per record: workload index and
[trace, run_secs, target, args_info]). Imported records become training data; exported records
load in ``ms.tune_tir`` / ``compile_tir`` like any MetaSchedule database.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from ..config import Paths, TclError
from ..device import Device
from ..features import canonical_trace_json
from ..tvm_compat import meta_schedule
from .records import RecordStore, now_utc, program_id, record_id, task_id_of, write_parquet_atomic

WORKLOAD_FILE = "database_workload.json"
RECORD_FILE = "database_tuning_record.json"
FAILED_RUN_SECS = 1e9  # MetaSchedule stores failed measurements as 1e10 seconds


@dataclass
class ImportStats:
    records: int = 0
    tasks: int = 0
    problems: list[str] = field(default_factory=list)


def imported_tasks_file(paths: Paths) -> Path:
    return paths.zoo_dir / "imported_tasks.parquet"


def _read_lines(path: Path) -> list[tuple[int, str]]:
    if not path.exists():
        raise TclError(f"{path} does not exist: a MetaSchedule JSONDatabase directory holds "
                       f"{WORKLOAD_FILE} and {RECORD_FILE}")
    return [(n, line) for n, line in enumerate(path.read_text().splitlines(), 1) if line.strip()]


def import_database(paths: Paths, work_dir: str | Path, device: Device) -> ImportStats:
    """Append the records of a JSONDatabase as measurements of ``device``.

    A malformed line is skipped and named (file and line number) in ``ImportStats.problems``;
    the other lines are imported. Re-importing the same files adds nothing (content-hash ids).
    """
    import tvm

    ms = meta_schedule()
    work_dir = Path(work_dir)
    stats = ImportStats()
    wl_path, rec_path = work_dir / WORKLOAD_FILE, work_dir / RECORD_FILE
    workloads: dict[int, tuple[str, object]] = {}  # line index (0-based) -> (task_id, Workload)
    task_rows = []
    for index, (n, line) in enumerate(_read_lines(wl_path)):
        try:
            wl = ms.database.Workload.from_json(json.loads(line))
        except Exception as e:
            stats.problems.append(f"{wl_path}:{n}: malformed workload ({_first_line(e)})")
            continue
        tid = task_id_of(wl.mod)
        workloads[index] = (tid, wl)
        task_rows.append({"task_id": tid, "task_name": f"imported_{tid[:8]}", "op_class": "other",
                          "workload_json": tvm.ir.save_json(wl.mod), "flop": 0.0})
    rows = []
    for n, line in _read_lines(rec_path):
        try:
            index, (trace_obj, run_secs, _target, _args) = json.loads(line)
            tid, wl = workloads[int(index)]
            ms.database.TuningRecord.from_json(json.loads(line)[1], wl)  # validates the trace
        except KeyError:
            stats.problems.append(f"{rec_path}:{n}: refers to workload {index}, "
                                  "which is missing or malformed")
            continue
        except Exception as e:
            stats.problems.append(f"{rec_path}:{n}: malformed tuning record ({_first_line(e)})")
            continue
        trace = canonical_trace_json(trace_obj)
        secs = [float(s) for s in (run_secs or [])]
        ok = bool(secs) and max(secs) < FAILED_RUN_SECS
        rows.append({"record_id": record_id(device.identity, tid, trace),
                     "program_id": program_id(tid, trace), "device": device.name,
                     "host_cpu": device.host_cpu, "target": json.dumps(device.target, sort_keys=True),
                     "task_id": tid, "trace_json": trace, "latencies": secs if ok else [],
                     "status": "ok" if ok else "run_error",
                     "error": None if ok else "failed in the imported database",
                     "build_secs": None, "source": f"import:{rec_path}",
                     "measured_at": now_utc(), "tvm_version": tvm.__version__})
    from ..measure.collect import measured_before
    from .locks import locked

    store = RecordStore(paths)
    for tid in sorted({r["task_id"] for r in rows}):
        # Under the task's measurement lock: a concurrent collection or import of the same
        # programs stores each record once.
        with locked(paths, "measure", device.name, tid, what=f"task {tid} on {device.name}"):
            known = store.record_ids(device.name, tid)
            new = [r for r in rows if r["task_id"] == tid and
                   not measured_before(device, tid, r["trace_json"], known)]
            store.append(new)
        stats.records += len(new)
    with locked(paths, "imported-tasks", what="the imported tasks file"):
        stats.tasks = _remember_tasks(paths, task_rows)
    return stats


def _remember_tasks(paths: Paths, rows: list[dict]) -> int:
    """Keep imported workloads that the zoo lacks, so records can be joined to their task."""
    f = imported_tasks_file(paths)
    have = pl.read_parquet(f) if f.exists() else None
    zoo = set(pl.read_parquet(paths.tasks_file, columns=["task_id"])["task_id"]) \
        if paths.tasks_file.exists() else set()
    known = zoo | (set(have["task_id"]) if have is not None else set())
    new = pl.DataFrame([r for r in rows if r["task_id"] not in known])
    new = new.unique("task_id", keep="first") if len(new) else new
    if len(new):
        write_parquet_atomic(new if have is None else pl.concat([have, new], how="diagonal"), f)
    return len(new)


@dataclass
class Exported:
    written: int = 0   # records added to the database
    present: int = 0   # records the database already held (not written again)


def _existing_records(out_dir: Path) -> set[tuple[str, str]]:
    """(task_id, canonical trace) of every record already in the JSONDatabase at ``out_dir``."""
    ms = meta_schedule()
    wl_path, rec_path = out_dir / WORKLOAD_FILE, out_dir / RECORD_FILE
    if not rec_path.exists():
        return set()
    tasks = {}
    for index, (n, line) in enumerate(_read_lines(wl_path) if wl_path.exists() else []):
        try:
            tasks[index] = task_id_of(ms.database.Workload.from_json(json.loads(line)).mod)
        except Exception as e:
            raise TclError(f"{wl_path}:{n}: malformed workload ({_first_line(e)}); refusing to "
                           "add records to a database that cannot be read back") from None
    have = set()
    for n, line in _read_lines(rec_path):
        try:
            index, (trace_obj, *_rest) = json.loads(line)
            have.add((tasks[int(index)], canonical_trace_json(trace_obj)))
        except Exception as e:
            raise TclError(f"{rec_path}:{n}: malformed tuning record ({_first_line(e)}); "
                           "refusing to add records to a database that cannot be read back") \
                from None
    return have


def export_database(paths: Paths, device: Device, out_dir: str | Path,
                    task_ids: list[str] | None = None) -> Exported:
    """Write the device's ok records as a JSONDatabase in ``out_dir``.

    A directory that already holds a database is merged into by record: a (task, trace)
    already there is not written again, so exporting twice adds nothing the second time."""
    import tvm
    from tvm import s_tir

    from .catalog import Catalog
    from .locks import locked, path_key

    ms = meta_schedule()
    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise TclError(f"export target {out_dir} is a file; give a directory (new or holding "
                       f"a JSONDatabase: {WORKLOAD_FILE}, {RECORD_FILE})")
    cat = Catalog(paths, in_memory=True)
    where = "" if task_ids is None else "AND r.task_id IN (SELECT unnest($tids))"
    frame = cat.con.sql(
        f"SELECT r.task_id, r.trace_json, r.latencies, t.workload_json FROM records r "
        f"JOIN (SELECT DISTINCT ON (task_id) * FROM tasks) t USING (task_id) "
        f"WHERE r.device = $dev AND r.status = 'ok' {where} ORDER BY r.task_id, r.record_id",
        params={"dev": device.name, **({"tids": task_ids} if task_ids else {})}).pl()
    cat.close()
    out_dir.mkdir(parents=True, exist_ok=True)
    done = Exported()
    with locked(paths, "export", path_key(out_dir), what=f"export directory {out_dir}"):
        have = _existing_records(out_dir)
        db = ms.database.JSONDatabase(path_workload=str(out_dir / WORKLOAD_FILE),
                                      path_tuning_record=str(out_dir / RECORD_FILE),
                                      allow_missing=True)
        target = device.tvm_target()
        for (tid,), group in frame.group_by(["task_id"], maintain_order=True):
            new = [(t, secs) for t, secs in zip(group["trace_json"], group["latencies"])
                   if (tid, t) not in have]
            done.present += len(group) - len(new)
            if not new:
                continue
            mod = tvm.ir.load_json(group["workload_json"][0])
            wl = db.commit_workload(mod)
            args = ms.arg_info.ArgInfo.from_prim_func(mod["main"])
            for trace_json, secs in new:
                sch = s_tir.Schedule(mod)
                s_tir.schedule.Trace.apply_json_to_schedule(json.loads(trace_json), sch)
                db.commit_tuning_record(
                    ms.database.TuningRecord(sch.trace, wl, list(secs), target, args))
                done.written += 1
    return done


def _first_line(e: Exception) -> str:
    text = str(e).strip()
    return text.splitlines()[-1] if text else type(e).__name__
