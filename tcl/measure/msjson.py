"""Import from and export to MetaSchedule JSONDatabase files.

A JSONDatabase directory holds ``database_workload.json`` (one line per workload: structural hash
and the IRModule) and ``database_tuning_record.json`` (one line per record: workload index and
[trace, run_secs, target, args_info]). Imported records become training data; exported records
load in ``ms.tune_tir`` / ``compile_tir`` like any MetaSchedule database.
"""
from __future__ import annotations

import errno
import json
import math
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from ..config import Paths, TclError, atomic_write, read_text, write_json
from ..progress import Progress
from ..store.catalog import Catalog
from ..store.devices import Device
from ..store.locks import locked, path_key
from ..store.records import (RecordStore, now_utc, program_id, record_id, task_id_of,
                             write_parquet_atomic)
from ..store.schemas import TASK_SCHEMA
from ..store.traces import canonical_trace_json
from ..tvm_compat import FAILED_RUN_SECS, meta_schedule
from ..zoo.extract import load_imported_tasks, load_tasks, task_row
from .collect import measured_before

WORKLOAD_FILE = "database_workload.json"
RECORD_FILE = "database_tuning_record.json"
MANIFEST_FILE = "manifest.json"   # tcl export: what the database holds (``_manifest``)
EXPORT_FILES = (WORKLOAD_FILE, RECORD_FILE, MANIFEST_FILE)   # all that an export writes
# The shortest run time a record may hold: 1 ns, a few clock cycles, below what a timed kernel
# launch takes. A shorter one is no measurement (1e-300 s ranked fastest of all).
MIN_RUN_SECS = 1e-9
# what a killed export leaves beside them (atomic_write's temporary names)
_EXPORT_LEFTOVER = re.compile(r"\.tmp-[0-9a-f]{32}-(%s)" % "|".join(map(re.escape, EXPORT_FILES)))


@dataclass
class ImportStats:
    lines: int = 0              # tuning-record lines read
    programs: int = 0           # distinct programs (task, trace) among them
    records: int = 0            # new records stored (programs not in the store yet)
    tasks: int = 0              # workloads the zoo lacked, remembered as imported tasks
    target_mismatches: int = 0  # lines measured for another target than the device's
    problems: list[str] = field(default_factory=list)   # malformed lines, skipped
    bad_run_secs: list[str] = field(default_factory=list)   # "FILE:LINE (run_secs)", skipped

    def skipped(self) -> list[str]:
        """One line per malformed line, and one for all lines whose run_secs are no run times
        (counted and named: a log can hold many)."""
        bad = self.bad_run_secs
        if not bad:
            return list(self.problems)
        names = ", ".join(bad[:5]) + (f" and {len(bad) - 5} more" if len(bad) > 5 else "")
        return self.problems + [
            f"{len(bad)} line{'s' * (len(bad) != 1)} whose run_secs are not run times (each "
            f"must be a finite number of seconds >= {MIN_RUN_SECS:g}; MetaSchedule writes 1e10 "
            f"for a failed run): {names}"]


def run_times(run_secs) -> list[float] | None:
    """A tuning record's ``run_secs`` as seconds ([] for null: not measured), or None where
    they are no run times: a null, bool, NaN or infinite value, one below ``MIN_RUN_SECS``
    (zero, negative), or not a list. Checked before TVM sees the line (a null value crashes
    it, rc 139)."""
    if run_secs is None:
        return []
    if not isinstance(run_secs, list) or not all(
            isinstance(s, (int, float)) and not isinstance(s, bool)
            and MIN_RUN_SECS <= s < math.inf for s in run_secs):
        return None
    return [float(s) for s in run_secs]


def _same_target(line_target, device_target: dict) -> bool:
    """Whether a record's target (``Target.export()`` as JSON) is the device's: every key the
    device's target sets has the same value (the export adds keys and tags of its own)."""
    if not isinstance(line_target, dict):
        return False
    return all(str(line_target.get(k)) == str(v) for k, v in device_target.items())


def _read_lines(path: Path) -> list[tuple[int, str]]:
    if not path.exists():
        raise TclError(f"{path} does not exist: a MetaSchedule JSONDatabase directory holds "
                       f"{WORKLOAD_FILE} and {RECORD_FILE}")
    text = read_text(path, "MetaSchedule database file")
    return [(n, line) for n, line in enumerate(text.splitlines(), 1) if line.strip()]


def _tuning_lines(rec_path: Path, workloads: dict, stats: ImportStats):
    """(line number, task id, trace, run seconds, target) of each valid tuning-record line; a
    malformed one is named in ``stats.problems``, one whose run_secs are no run times in
    ``stats.bad_run_secs``, and skipped."""
    ms = meta_schedule()
    lines = _read_lines(rec_path)
    with Progress(f"read {rec_path}", len(lines), unit="lines") as seen:
        yield from _valid_lines(ms, rec_path, lines, workloads, stats, seen)


def _valid_lines(ms, rec_path: Path, lines: list[tuple[int, str]], workloads: dict,
                 stats: ImportStats, seen: Progress):
    for n, line in lines:
        stats.lines += 1
        seen.advance()
        try:
            index, (trace_obj, run_secs, target, _args) = json.loads(line)
            secs = run_times(run_secs)
            if secs is None:
                stats.bad_run_secs.append(f"{rec_path}:{n} ({json.dumps(run_secs)[:40]})")
                continue
            tid, wl = workloads[int(index)]
            ms.database.TuningRecord.from_json(json.loads(line)[1], wl)  # validates the trace
        except KeyError:
            stats.problems.append(f"{rec_path}:{n}: refers to workload {index}, "
                                  "which is missing or malformed")
            continue
        except Exception as e:
            stats.problems.append(f"{rec_path}:{n}: malformed tuning record ({_first_line(e)})")
            continue
        yield n, tid, trace_obj, secs, target


def _workloads(wl_path: Path, stats: ImportStats) -> tuple[dict[int, tuple[str, object]], list]:
    """Line index (0-based) -> (task id, Workload), and each workload's task row."""

    ms = meta_schedule()
    workloads, task_rows = {}, []
    for index, (n, line) in enumerate(_read_lines(wl_path)):
        try:
            wl = ms.database.Workload.from_json(json.loads(line))
        except Exception as e:
            stats.problems.append(f"{wl_path}:{n}: malformed workload ({_first_line(e)})")
            continue
        row = task_row(wl.mod)
        workloads[index] = (row["task_id"], wl)
        task_rows.append(row)
    return workloads, task_rows


def read_programs(work_dir: str | Path) -> tuple[pl.DataFrame, ImportStats]:
    """The distinct programs of a JSONDatabase: task_id, task_name, workload_json, program_id,
    trace_json (for ``tcl predict``), and what was read and skipped."""
    work_dir = Path(work_dir)
    stats = ImportStats()
    workloads, task_rows = _workloads(work_dir / WORKLOAD_FILE, stats)
    tasks = {r["task_id"]: r for r in task_rows}
    rows, seen = [], set()
    for _, tid, trace_obj, _, _ in _tuning_lines(work_dir / RECORD_FILE, workloads, stats):
        trace = canonical_trace_json(trace_obj)
        pid = program_id(tid, trace)
        if pid not in seen:
            seen.add(pid)
            rows.append({"task_id": tid, "task_name": tasks[tid]["task_name"],
                         "workload_json": tasks[tid]["workload_json"], "program_id": pid,
                         "trace_json": trace})
    stats.programs = len(rows)
    schema = {k: pl.Utf8 for k in ("task_id", "task_name", "workload_json", "program_id",
                                   "trace_json")}
    return pl.DataFrame(rows, schema=schema), stats


def import_database(paths: Paths, work_dir: str | Path, device: Device,
                    strict: bool = False, source: str | None = None) -> ImportStats:
    """Append the records of a JSONDatabase as measurements of ``device``.

    Every line counts: the lines of one program (task and trace) become one record whose
    latencies are all of theirs (a failed line adds none; a program with no successful line is
    a ``run_error``). Each record keeps the target its lines were measured for; lines whose
    target is not the device's are counted (``target_mismatches``), or refused with ``strict``
    before anything is stored. A malformed line is skipped and named (file and line number) in
    ``ImportStats.problems``, a line whose run_secs are no run times (``run_times``) in
    ``ImportStats.bad_run_secs``: nothing of it is stored. Re-importing the same files adds
    nothing (content-hash ids).
    ``source`` labels the records (default ``import:<file>``; tuning runs use ``tune``).
    """
    work_dir = Path(work_dir)
    load_tasks(paths), load_imported_tasks(paths)   # foreign ones: refused before any record
    stats = ImportStats()
    wl_path, rec_path = work_dir / WORKLOAD_FILE, work_dir / RECORD_FILE
    workloads, task_rows = _workloads(wl_path, stats)
    programs: dict[tuple[str, str], dict] = {}   # (task, trace) -> its lines, merged
    mismatched: list[str] = []
    for n, tid, trace_obj, secs, target in _tuning_lines(rec_path, workloads, stats):
        if not _same_target(target, device.target):
            mismatched.append(f"{rec_path}:{n}: {json.dumps(target, sort_keys=True)}")
        trace = canonical_trace_json(trace_obj)
        p = programs.setdefault((tid, trace), {"secs": [], "target": target})
        if secs and max(secs) < FAILED_RUN_SECS:
            p["secs"] += secs
    if stats.lines == 0:
        raise TclError(f"{rec_path} is empty: the database holds no tuning record to import")
    if not programs:
        raise TclError(f"none of the {stats.lines} lines of {rec_path} could be read (first: "
                       f"{(stats.skipped() or ['?'])[0]}); nothing imported")
    stats.programs = len(programs)
    stats.target_mismatches = len(mismatched)
    if mismatched and strict:
        raise TclError(f"{len(mismatched)} of {stats.lines} lines were measured for another "
                       f"target than device {device.name}'s {json.dumps(device.target)} "
                       f"(first: {mismatched[0]}); nothing imported (drop --strict to import "
                       "them with their own target recorded)")
    import tvm

    rows = []
    for (tid, trace), p in programs.items():
        ok = bool(p["secs"])
        rows.append({"record_id": record_id(device.identity, tid, trace),
                     "program_id": program_id(tid, trace), "device": device.name,
                     "host_cpu": device.host_cpu,
                     "target": json.dumps(p["target"] if isinstance(p["target"], dict)
                                          else device.target, sort_keys=True),
                     "task_id": tid, "trace_json": trace, "latencies": p["secs"],
                     "status": "ok" if ok else "run_error",
                     "error": None if ok else "failed in the imported database",
                     "build_secs": None, "source": source or f"import:{rec_path}",
                     "measured_at": now_utc(), "tvm_version": tvm.__version__})

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
    have = load_imported_tasks(paths)
    known = set(load_tasks(paths)["task_id"]) | set(have["task_id"])
    new = pl.DataFrame([r for r in rows if r["task_id"] not in known], schema=TASK_SCHEMA)
    new = new.unique("task_id", keep="first", maintain_order=True)
    if len(new):
        write_parquet_atomic(pl.concat([have, new], how="diagonal"), paths.imported_tasks_file,
                             "imported tasks file")
    return len(new)


@dataclass
class Exported:
    written: int = 0   # records added to the database
    present: int = 0   # records the database already held (not written again)


def _existing_records(out_dir: Path) -> set[tuple[str, str]]:
    """(task_id, canonical trace) of every record already in the JSONDatabase at ``out_dir``."""
    wl_path, rec_path = out_dir / WORKLOAD_FILE, out_dir / RECORD_FILE
    if not rec_path.exists():
        return set()
    ms = meta_schedule(tensor_intrin=False)
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


def check_export_dir(out_dir: Path, device: Device) -> None:
    """Refuse ``out_dir`` unless it is new, empty, or an earlier export of ``device``: the
    database files and a manifest naming ``device``, nothing else (a killed export's
    temporary files aside). Export merges into what it finds, so it would write into the data
    root, records/ or a user's folder, and the manifest it writes would lie about a database
    that no export of this device made."""
    if out_dir.exists() and not out_dir.is_dir():
        raise TclError(f"export target {out_dir} is a file; give a directory (new, empty, or "
                       f"an earlier export of {device.name!r})")
    found = sorted(out_dir.iterdir()) if out_dir.is_dir() else []
    if not found:
        return
    other = [p.name for p in found
             if not (p.name in EXPORT_FILES and p.is_file() and not p.is_symlink())
             and not _EXPORT_LEFTOVER.fullmatch(p.name)]
    if other:
        shown = ", ".join(other[:3]) + (f" and {len(other) - 3} more" if len(other) > 3 else "")
        raise TclError(f"export target {out_dir} holds {shown}, which no export writes; give a "
                       f"new or empty directory, or an earlier export of {device.name!r}")
    manifest = out_dir / MANIFEST_FILE
    if not manifest.is_file():
        raise TclError(f"export target {out_dir} has no {MANIFEST_FILE}, so no export of tcl "
                       f"made its database and nothing says whose records it holds; export "
                       f"{device.name!r} into a new or empty directory")
    try:
        made_for = json.loads(read_text(manifest, "export manifest")).get("device")
    except (ValueError, AttributeError):
        raise TclError(f"export manifest {manifest} is not the JSON object an export writes; "
                       f"export {device.name!r} into a new or empty directory") from None
    if made_for != device.name:
        raise TclError(f"export target {out_dir} holds device {made_for!r}'s records "
                       f"({MANIFEST_FILE}); export {device.name!r} into a directory of its own "
                       "(a JSONDatabase is one target's)")


def export_database(paths: Paths, device: Device, out_dir: str | Path,
                    task_ids: list[str] | None = None) -> Exported:
    """Write the device's ok records as a JSONDatabase in ``out_dir``: a new or empty
    directory, or an earlier export of the device (``check_export_dir``).

    An earlier export is merged into by record: a (task, trace) already there is not written
    again, so exporting twice adds nothing the second time."""
    out_dir = Path(out_dir)
    check_export_dir(out_dir, device)   # before TVM's import: a refusal costs nothing
    cat = Catalog(paths, in_memory=True)
    where = "" if task_ids is None else "AND r.task_id IN (SELECT unnest($tids))"
    frame = cat.con.sql(
        f"SELECT r.task_id, r.trace_json, r.latencies, r.host_cpu FROM records r "
        f"WHERE r.device = $dev AND r.status = 'ok' {where} "
        f"AND r.task_id IN (SELECT task_id FROM tasks) ORDER BY r.task_id, r.record_id",
        params={"dev": device.name, **({"tids": task_ids} if task_ids else {})}).pl()
    # each task's workload once, not once per record (a workload is kilobytes of JSON)
    workloads = cat.con.sql(
        "SELECT DISTINCT ON (task_id) task_id, workload_json, task_name, op_class FROM tasks "
        "WHERE task_id IN (SELECT unnest($tids))",
        params={"tids": frame["task_id"].unique().to_list()}).pl()
    cat.close()
    workload_of = dict(zip(workloads["task_id"], workloads["workload_json"]))
    out_dir.mkdir(parents=True, exist_ok=True)
    done = Exported()
    wl_file, rec_file = out_dir / WORKLOAD_FILE, out_dir / RECORD_FILE
    with locked(paths, "export", path_key(out_dir), what=f"export directory {out_dir}"):
        check_export_dir(out_dir, device)   # again, under the lock: another export's files
        have = _existing_records(out_dir)
        todo = []   # (workload, the task's records the database lacks)
        for (tid,), group in frame.group_by(["task_id"], maintain_order=True):
            new = [(t, secs) for t, secs in zip(group["trace_json"], group["latencies"])
                   if (tid, t) not in have]
            done.present += len(group) - len(new)
            if new:
                todo.append((workload_of[tid], new))
        manifest = _manifest(paths, device, frame, workloads)
        if not todo and wl_file.exists() and rec_file.exists():
            write_json(out_dir / MANIFEST_FILE, manifest, "export manifest")
            return done
        # Appended to copies, which replace the files once every line is there (the workload
        # file first: a record never names a workload the file lacks). A full disk leaves the
        # database as it was.
        with atomic_write(rec_file, "database file") as rec_tmp, \
                atomic_write(wl_file, "database file") as wl_tmp:
            expect = {}
            for f, tmp in ((wl_file, wl_tmp), (rec_file, rec_tmp)):
                if f.exists():
                    shutil.copyfile(f, tmp)
                expect[f] = _whole_lines(tmp) if f.exists() else 0
            heads = _record_heads(wl_tmp, device, [w for w, _ in todo], expect, wl_file)
            with Progress(f"export {device.name}", sum(len(n) for _, n in todo),
                          unit="records") as lines, open(rec_tmp, "a", encoding="utf-8") as out:
                for (index, target, args), (_, new) in zip(heads, todo):
                    # the stored trace is already compact JSON (tcl.store.traces): spliced in
                    head, tail = f"[{index},[", f",{json.dumps(target)},{json.dumps(args)}]]\n"
                    out.writelines(f"{head}{trace_json},{json.dumps(list(secs))}{tail}"
                                   for trace_json, secs in new)
                    lines.advance(len(new))
                    done.written += len(new)
            expect[rec_file] += done.written
            for f, tmp in ((wl_file, wl_tmp), (rec_file, rec_tmp)):
                got = _whole_lines(tmp)
                if got != expect[f]:   # atomic_write says whether the disk was why
                    raise OSError(errno.EIO, f"wrote {got} of {expect[f]} whole lines; the "
                                  "database is left as it was", str(f))
        write_json(out_dir / MANIFEST_FILE, manifest, "export manifest")
    return done


def _record_heads(wl_tmp: Path, device: Device, workloads: list[str], expect: dict,
                  wl_file: Path) -> list[tuple[int, object, object]]:
    """Per workload (its JSON): the head of its tuning records' lines, (workload index in
    ``wl_tmp``, target, argument info), as MetaSchedule writes them. MetaSchedule commits the
    workloads to ``wl_tmp`` and one probe record (the empty trace) each to a scratch file, whose
    lines give the heads; the records themselves are then written as plain JSON lines with
    their stored traces (the same lines MetaSchedule writes for them, tests/test_collect.py),
    instead of replaying every trace into a schedule: 30 records/s became thousands."""
    import tempfile

    import tvm
    from tvm import s_tir

    ms = meta_schedule(tensor_intrin=False)
    with tempfile.TemporaryDirectory(prefix="tcl-export-") as scratch:
        probe_file = Path(scratch) / RECORD_FILE
        db = ms.database.JSONDatabase(path_workload=str(wl_tmp),
                                      path_tuning_record=str(probe_file), allow_missing=True)
        target = device.tvm_target()
        for workload_json in workloads:
            mod = tvm.ir.load_json(workload_json)
            expect[wl_file] += not db.has_workload(mod)
            wl = db.commit_workload(mod)
            args = ms.arg_info.ArgInfo.from_prim_func(mod["main"])
            db.commit_tuning_record(ms.database.TuningRecord(s_tir.Schedule(mod).trace, wl,
                                                             [1.0], target, args))
        del db
        probes = [json.loads(line) for line in probe_file.read_text().splitlines()
                  if line.strip()] if probe_file.exists() else []
    if len(probes) != len(workloads):
        raise OSError(errno.EIO, f"MetaSchedule wrote {len(probes)} of {len(workloads)} "
                      "probe records", str(probe_file))
    return [(index, target, args) for index, (_trace, _secs, target, args) in probes]


def _manifest(paths: Paths, device: Device, frame: pl.DataFrame,
              workloads: pl.DataFrame) -> dict:
    """What an exported database holds, for a reader without tcl: the device (target, the
    hosts that measured it), and per task its name, operator class, records and the networks
    that run it with their weights (how often a network runs the task)."""
    import tvm

    from ..zoo.extract import load_networks

    nets = load_networks(paths)
    runs = {tid: list(zip(g["network_key"], g["weight"].cast(pl.Float64)))
            for (tid,), g in nets.group_by(["task_id"])}
    names = {r["task_id"]: r for r in workloads.select("task_id", "task_name", "op_class")
             .iter_rows(named=True)}
    tasks = []
    for tid, n in frame.group_by(["task_id"], maintain_order=True).len().iter_rows():
        tasks.append({"task_id": tid, "task_name": names[tid]["task_name"],
                      "op_class": names[tid]["op_class"], "records": n,
                      "networks": [{"network": k, "weight": w} for k, w in runs.get(tid, [])]})
    return {"device": device.name, "target": device.target,
            "hosts": sorted(set(frame["host_cpu"])), "tvm_version": tvm.__version__,
            "exported_at": now_utc().isoformat(timespec="seconds"), "records": len(frame),
            "files": {"workload": WORKLOAD_FILE, "tuning_records": RECORD_FILE},
            "tasks": tasks}


def _whole_lines(path: Path) -> int:
    """The JSON lines of ``path`` up to the first torn one."""
    n = 0
    for line in path.read_bytes().splitlines():
        if line.strip():
            try:
                json.loads(line)
            except ValueError:
                break
            n += 1
    return n


def _first_line(e: Exception) -> str:
    text = str(e).strip()
    return text.splitlines()[-1] if text else type(e).__name__
