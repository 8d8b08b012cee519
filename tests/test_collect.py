"""Real sampling, builds and measurements on tiny workloads, including the failure modes."""
import json
import shutil
import os
import signal
import subprocess
import sys
import textwrap
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from conftest import matmul_task, te_task, write_tasks
from tcl.config import TclError
from tcl.store.devices import BUILTIN_DEVICES, Device, MeasureSettings
from tcl.features import featurize, load_features
from tcl.tokens import TOKEN_WIDTH
from tcl.measure.collect import collect, plan
from tcl.sampling import ensure_candidates, load_candidates
from tcl.store.schemas import CANDIDATE_SCHEMA
from tcl.store.catalog import query
from tcl.store.records import RecordStore, program_id

pytestmark = pytest.mark.slow
DEVICE = BUILTIN_DEVICES["cpu-avx2"]


def crash_task():
    import tvm
    from tvm import te

    a = te.placeholder((16,), name="A")
    b = te.compute((16,), lambda i: a[i] + tvm.tirx.call_extern("float32", "abort"), name="B")
    return te_task("aborts", tvm.IRModule({"main": te.create_prim_func([a, b])}))


def add_unbuildable_candidate(paths, task):
    """A program of the task bound to GPU threads: LLVM cannot build it."""
    import tvm
    from tvm import s_tir

    from tcl.store.traces import trace_to_json

    sch = s_tir.Schedule(tvm.ir.load_json(task["workload_json"]))
    sch.bind(sch.get_loops(sch.get_sblock("C"))[0], "threadIdx.x")
    trace = trace_to_json(sch.trace)
    have = load_candidates(paths, task["task_id"])
    row = pl.DataFrame([{"program_id": program_id(task["task_id"], trace),
                         "task_id": task["task_id"], "trace_json": trace, "origin": "test",
                         "round": 99, "requested": len(have) + 1}], schema=CANDIDATE_SCHEMA)
    from tcl.store.records import write_parquet_atomic

    write_parquet_atomic(pl.concat([have, row]), paths.candidates_file(task["task_id"]))


@pytest.fixture(scope="module")
def collected(tmp_path_factory):
    from tcl.config import Paths

    paths = Paths(tmp_path_factory.mktemp("collect") / "data")
    task = matmul_task(64)
    tasks = write_tasks(paths, [task])
    ensure_candidates(paths, task["task_id"], task["workload_json"], 4)
    add_unbuildable_candidate(paths, task)
    stats = collect(paths, DEVICE, tasks, 5, batch_size=3, progress=False)
    return paths, task, tasks, stats


def test_collect_measures_keeps_repeats_and_records_build_failures(collected):
    paths, task, _, stats = collected
    assert stats.measured == 5 and stats.per_status == {"ok": 4, "build_error": 1}
    frame = RecordStore(paths).read()
    ok = frame.filter(pl.col("status") == "ok")
    assert ok["latencies"].list.len().to_list() == [DEVICE.measure.repeat] * 4
    assert (ok["latencies"].list.min() > 0).all()
    bad = frame.filter(pl.col("status") == "build_error")
    assert "not implemented" in bad["error"][0] or "thread" in bad["error"][0].lower()
    assert set(frame["host_cpu"]) == {DEVICE.host_cpu}
    assert stats.build_secs > 0 and stats.run_secs > 0


def test_second_run_measures_nothing_and_more_programs_measure_the_difference(collected):
    paths, task, tasks, _ = collected
    assert plan(paths, DEVICE, tasks, 5).todo == 0
    again = collect(paths, DEVICE, tasks, 5, progress=False)
    assert again.measured == 0 and again.skipped == 5
    more = collect(paths, DEVICE, tasks, 7, progress=False)
    assert more.measured == 2
    assert query(paths, "select count(*) n from records")["n"][0] == 7


def test_a_pipelined_collection_measures_what_a_plain_one_does(collected, tmp_path):
    """Building the next batch while this one runs (a 1-core device, the builder on the other
    cpu) stores the same programs with the same statuses as the plain collection."""
    from tcl.config import Paths

    paths, task, tasks, _ = collected
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs a cpu beside the device's")
    other = Paths(tmp_path / "data")
    write_tasks(other, [task])
    other.candidates_file(task["task_id"]).parent.mkdir(parents=True, exist_ok=True)
    other.candidates_file(task["task_id"]).write_bytes(
        paths.candidates_file(task["task_id"]).read_bytes())
    one_core = BUILTIN_DEVICES["cpu-avx2-1c"]
    stats = collect(other, one_core, tasks, 5, batch_size=2, progress=False, pipelined=True)
    assert stats.measured == 5 and stats.per_status == {"ok": 4, "build_error": 1}
    piped = RecordStore(other).read().sort("program_id")
    plain = RecordStore(paths).read().sort("program_id")   # other tests may have added more
    plain = plain.filter(pl.col("program_id").is_in(piped["program_id"].to_list()))
    assert piped["program_id"].to_list() == plain["program_id"].to_list()
    assert piped["status"].to_list() == plain["status"].to_list()
    assert collect(other, one_core, tasks, 5, progress=False, pipelined=True).measured == 0


def test_a_pipelined_collection_without_a_spare_cpu_is_refused(monkeypatch):
    from tcl.measure.devices import create

    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: {0})
    with pytest.raises(TclError, match="pipelined collection builds on cores cpu-avx2-1c does "
                                       "not use.*1 cpu"):
        create(BUILTIN_DEVICES["cpu-avx2-1c"]).build_cpus()


def test_a_stuck_build_times_out_alone_and_the_builds_after_it_still_build():
    """The pooled builder (pipelined collections, tcl tune) times each build on its own: with
    one worker, a build that never ends fails as timed out and the next builds still run (a
    batch-wide deadline once let one stuck build hold the whole batch, and fail it)."""
    import tvm
    from tvm import te
    from tvm.s_tir.meta_schedule.builder import BuilderInput
    from tvm.s_tir.meta_schedule.testing import te_workload

    from conftest import build_or_hang
    from tcl.measure.pooled_builder import pooled_builder

    def mod(name):
        func = te.create_prim_func(te_workload.matmul(8, 8, 8)).with_attr("global_symbol", name)
        return tvm.IRModule({"main": func})

    target = tvm.target.Target({"kind": "llvm"})
    builder = pooled_builder(max_workers=1, timeout_sec=20, build=build_or_hang)
    try:
        results = builder.build([BuilderInput(mod(n), target) for n in ("a", "hang", "b", "c")])
    finally:
        builder.close()
    assert [r.error_msg for r in results] == [None, "build timed out after 20 s", None, None]
    assert all(results[i].artifact_path for i in (0, 2, 3))


def test_the_pipelines_measurements_pipeline_only_where_a_core_is_free(monkeypatch, tmp_path):
    """``measure.pipelined`` reaches every collection of the pipeline (``collect_options``),
    and a device that uses every cpu this process may use is measured batch after batch
    instead of refused."""
    import yaml

    from tcl.pipeline.inputs import collect_options
    from tcl.pipeline.params import load_params

    raw = yaml.safe_load((Path(__file__).parent / "tiny_params.yaml").read_text())
    raw["measure"]["pipelined"] = True
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(raw))
    params = load_params(tmp_path / "params.yaml", check_models=False)
    one, two = BUILTIN_DEVICES["cpu-avx2-1c"], BUILTIN_DEVICES["cpu-avx2"]
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: {0, 1})
    assert collect_options(params, one)["pipelined"] is True
    assert collect_options(params, two)["pipelined"] is False
    raw["measure"]["pipelined"] = False
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(raw))
    params = load_params(tmp_path / "params.yaml", check_models=False)
    assert collect_options(params, one)["pipelined"] is False


def test_a_collection_slower_than_its_plan_says_so_after_the_first_batch(tmp_path):
    """Issue 53, point 5: the plan's rate (here an impossible 10,000 records/s) against the
    first batch's: one line with the new estimate."""
    from tcl.config import Paths

    paths = Paths(tmp_path / "data")   # its own root: the module's counts stay as they are
    tasks = write_tasks(paths, [matmul_task(16)])
    lines = []
    collect(paths, DEVICE, tasks, 2, batch_size=1, progress=False, report=lines.append,
            planned_rate=1e4)
    said = [t for t in lines if "the first batch ran at" in t]
    assert len(said) == 1 and "slower than the plan's 1e+04" in said[0], lines


def test_candidates_span_random_and_mutations_and_are_distinct(collected):
    paths, task, _, _ = collected
    cands = load_candidates(paths, task["task_id"])
    assert cands["trace_json"].n_unique() == len(cands)
    assert {"random", "mutation"} <= set(cands["origin"])


def test_features_are_cached_per_program(collected):
    paths, task, _, _ = collected
    n = featurize(paths, progress=False)
    assert n == 7  # every program of the task: 6 sampled and the unbuildable one
    assert featurize(paths, progress=False) == 0


def test_featurize_says_where_it_is_without_a_terminal(collected, monkeypatch):
    """Never silent (issue 53, point 4): no progress bar, so progress lines (interval 0 here)."""
    from tcl import progress

    paths, task, _, _ = collected
    shutil.rmtree(paths.features_dir, ignore_errors=True)
    monkeypatch.setattr(progress, "EVERY_S", 0.0)
    lines = []
    n = featurize(paths, progress=False, report=lines.append)
    assert n >= 5 and lines and lines[-1].startswith(f"featurize: {n} of {n} programs done (100%)")
    feats = load_features(paths, [task["task_id"]])
    # rows come in no promised order, and the unbuildable program's trace may be one token long
    for row in feats.iter_rows(named=True):
        assert len(row["per_store"]) == row["n_stores"] * 164 and row["n_stores"] >= 1
        assert len(row["tokens"]) == row["n_tokens"] * TOKEN_WIDTH and row["n_tokens"] >= 1
    assert feats["n_tokens"].max() > 3   # a sampled schedule is a sequence of instructions


def test_export_writes_the_lines_metaschedule_writes(collected, tmp_path):
    """The export writes the stored traces as JSON lines (issue 53: 30 records/s replaying each
    trace into a schedule); they are the lines MetaSchedule's own JSONDatabase writes for the
    same records."""
    import tvm
    from tvm import s_tir

    from tcl.measure.msjson import RECORD_FILE, WORKLOAD_FILE, export_database
    from tcl.store.records import RecordStore
    from tcl.tvm_compat import meta_schedule

    paths, task, _, _ = collected
    out = tmp_path / "fast"
    export_database(paths, DEVICE, out)
    ms = meta_schedule()
    ref = tmp_path / "ref"
    ref.mkdir()
    db = ms.database.JSONDatabase(path_workload=str(ref / WORKLOAD_FILE),
                                  path_tuning_record=str(ref / RECORD_FILE), allow_missing=True)
    mod = tvm.ir.load_json(task["workload_json"])
    wl = db.commit_workload(mod)
    args = ms.arg_info.ArgInfo.from_prim_func(mod["main"])
    ok = RecordStore(paths).read().filter(pl.col("status") == "ok").sort("record_id")
    for trace_json, secs in zip(ok["trace_json"], ok["latencies"]):
        sch = s_tir.Schedule(mod)
        s_tir.schedule.Trace.apply_json_to_schedule(json.loads(trace_json), sch)
        db.commit_tuning_record(ms.database.TuningRecord(sch.trace, wl, list(secs),
                                                         DEVICE.tvm_target(), args))
    del db
    for name in (WORKLOAD_FILE, RECORD_FILE):
        fast = [json.loads(x) for x in (out / name).read_text().splitlines()]
        mine = [json.loads(x) for x in (ref / name).read_text().splitlines()]
        assert sorted(map(json.dumps, fast)) == sorted(map(json.dumps, mine)), name


def test_export_loads_in_metaschedule_and_import_is_idempotent(collected, tmp_path):
    import tvm

    from tcl.measure.msjson import export_database, import_database
    from tcl.tvm_compat import meta_schedule

    paths, task, _, _ = collected
    out = tmp_path / "db"
    assert export_database(paths, DEVICE, out).written == 6  # every ok record
    again = export_database(paths, DEVICE, out)  # the same directory again: nothing twice
    assert again.written == 0 and again.present == 6
    # the manifest says what the database holds, for a reader without tcl
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["device"] == DEVICE.name and manifest["target"] == DEVICE.target
    assert manifest["records"] == 6 and len(manifest["hosts"]) == 1
    assert [t["task_id"] for t in manifest["tasks"]] == [task["task_id"]]
    assert manifest["tasks"][0]["records"] == 6 and manifest["tasks"][0]["op_class"]
    other = Device("another", {"kind": "llvm", "num-cores": 1})
    with pytest.raises(TclError, match="export 'another' into a directory of its own"):
        export_database(paths, other, out)
    ms = meta_schedule()
    db = ms.database.JSONDatabase(work_dir=str(out))
    mod = tvm.ir.load_json(task["workload_json"])
    assert len(db) == 6
    sch = ms.tir_integration.compile_tir(db, mod, DEVICE.tvm_target())
    assert sch is not None  # MetaSchedule picked the best exported record
    stats = import_database(paths, out, DEVICE)
    assert stats.records == 0 and not stats.problems  # same ids: nothing new


def test_malformed_import_line_is_named_and_the_rest_imported(collected, tmp_path, paths):
    from tcl.measure.msjson import RECORD_FILE, export_database, import_database

    src, _, _, _ = collected
    out = tmp_path / "db"
    export_database(src, DEVICE, out)
    lines = (out / RECORD_FILE).read_text().splitlines()
    lines[2] = lines[2][:40]
    (out / RECORD_FILE).write_text("\n".join(lines) + "\n")
    stats = import_database(paths, out, DEVICE)
    assert stats.records == len(lines) - 1
    assert len(stats.problems) == 1 and f"{RECORD_FILE}:3:" in stats.problems[0]


def test_import_keeps_every_line_and_each_line_target(collected, tmp_path, paths):
    """Repeats of a program become one record with all latencies; a line measured for another
    target is counted and keeps its target (refused with strict); imported tasks get their
    name, op class and flop count from the workload, as zoo tasks do."""
    from tcl.measure.msjson import RECORD_FILE, export_database, import_database

    src, task, _, _ = collected
    out = tmp_path / "db"
    export_database(src, DEVICE, out)
    lines = [json.loads(x) for x in (out / RECORD_FILE).read_text().splitlines()]
    repeat = json.loads(json.dumps(lines[1]))
    repeat[1][1] = [2 * t for t in repeat[1][1]]            # measured again, twice as slow
    failed = json.loads(json.dumps(lines[1]))
    failed[1][1] = [1e10]                                   # and once failed
    lines[0][1][2] = dict(lines[0][1][2], mcpu="nehalem")   # another target
    (out / RECORD_FILE).write_text("\n".join(json.dumps(x) for x in lines + [repeat, failed])
                                   + "\n")
    with pytest.raises(TclError, match="1 of .* lines were measured for another target"):
        import_database(paths, out, DEVICE, strict=True)
    assert RecordStore(paths).read().is_empty()            # strict: nothing stored
    stats = import_database(paths, out, DEVICE)
    assert (stats.lines, stats.programs, stats.records) == (len(lines) + 2, len(lines),
                                                            len(lines))
    assert stats.target_mismatches == 1 and not stats.problems
    frame = RecordStore(paths).read()
    rec = frame.filter(pl.col("latencies").list.len() == 2 * len(lines[1][1][1]))
    assert len(rec) == 1 and sorted(rec["latencies"][0]) == sorted(lines[1][1][1] + repeat[1][1])
    nehalem = frame.filter(pl.col("target").str.contains("nehalem"))
    assert len(nehalem) == 1

    (row,) = pl.read_parquet(paths.imported_tasks_file).iter_rows(named=True)
    # as the zoo classifies it: a TE matmul's anchor block is named "C", not "matmul"
    assert row["op_class"] == "reduction" and row["flop"] == 2 * 64 ** 3   # a 64^3 matmul
    assert row["task_name"] == f"imported_{task['task_id'][:8]}"   # its function is "main"


def test_predict_ranks_a_databases_programs_with_a_model(collected, tmp_path):
    """`tcl predict` on an exported JSONDatabase: every distinct program scored once, ranked
    within its task, with the scores the model gives the store's own (cached) features."""
    from tcl.cli import main
    from tcl.dataset import load_program_set
    from tcl.models import make_model
    from tcl.measure.msjson import export_database

    paths, _, _, _ = collected
    featurize(paths, progress=False)
    ps = load_program_set(paths, DEVICE.name)
    model = make_model("xgb", num_boost_round=5, nthread=1).fit(ps)
    model.save(tmp_path / "m.model")
    db = tmp_path / "db"
    export_database(paths, DEVICE, db)
    out = tmp_path / "scores.csv"
    assert main(["--data", str(paths.root), "predict", str(db), "--device", DEVICE.name,
                 "--model", str(tmp_path / "m.model"), "--out", str(out)]) == 0
    scores = pl.read_csv(out)
    ok = RecordStore(paths).read().filter(pl.col("status") == "ok")
    assert sorted(scores["program_id"]) == sorted(ok["program_id"])
    assert sorted(scores["rank"]) == list(range(1, len(scores) + 1))    # one task
    expected = dict(zip(ps.program_ids.astype(str), model.predict(ps)))
    for pid, score in zip(scores["program_id"], scores["score"]):
        assert score == pytest.approx(float(expected[pid]), rel=1e-5)
    assert main(["--data", str(paths.root), "predict", str(tmp_path / "nothing"), "--device",
                 DEVICE.name, "--model", str(tmp_path / "m.model")]) == 2


def test_crashing_and_slow_kernels_become_error_rows(paths):
    from tvm.s_tir.meta_schedule.testing import te_workload  # noqa: F401

    import tvm
    from tvm import te

    slow = te_task("slow", tvm.IRModule({"main": te.create_prim_func(
        te_workload.matmul(512, 512, 512))}))
    tasks = write_tasks(paths, [crash_task(), slow])
    # Every timing lasts >= 3 x 1.5 s, past the 1 s limit: a kernel that times out.
    device = replace(DEVICE, measure=MeasureSettings(timeout_sec=1.0, min_repeat_ms=1500))
    stats = collect(paths, device, tasks, 1, progress=False)
    status = dict(query(paths, "select task_id, status from records").iter_rows())
    assert status[tasks["task_id"][0]] == "run_error"
    assert status[tasks["task_id"][1]] == "timeout"
    assert stats.measured == 2


RESUME_SCRIPT = textwrap.dedent("""
    import sys, polars as pl
    from pathlib import Path
    from tcl.config import Paths
    from tcl.store.devices import BUILTIN_DEVICES
    from tcl.measure.collect import collect
    paths = Paths(Path(sys.argv[1]))
    tasks = pl.read_parquet(paths.tasks_file)
    collect(paths, BUILTIN_DEVICES["cpu-avx2"], tasks, 12, batch_size=3, progress=False)
""")


def test_sigkill_mid_run_then_resume_loses_and_duplicates_nothing(paths, tmp_path):
    task = matmul_task(48)
    write_tasks(paths, [task])
    ensure_candidates(paths, task["task_id"], task["workload_json"], 12)
    script = tmp_path / "resume.py"
    script.write_text(RESUME_SCRIPT)
    cmd = [sys.executable, str(script), str(paths.root)]
    proc = subprocess.Popen(cmd, start_new_session=True)
    deadline = time.time() + 240
    while time.time() < deadline and len(RecordStore(paths).files()) < 1:
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)  # the collector and its build/run workers
    proc.wait()
    first = RecordStore(paths).read()
    assert 1 <= len(first) < 12, "kill landed mid-run"
    subprocess.run(cmd, check=True, timeout=600)
    final = RecordStore(paths).read()
    assert len(final) == 12 and final["record_id"].n_unique() == 12
    assert set(first["record_id"]) <= set(final["record_id"])
    raw = pl.concat([pl.read_parquet(f) for f in RecordStore(paths).files()])
    assert len(raw) == 12  # finished work was skipped, not measured twice
    assert not list(paths.records_dir.rglob(".tmp-*"))


PROBE_SCRIPT = textwrap.dedent("""
    import sys
    from pathlib import Path
    from types import SimpleNamespace

    import polars as pl

    from tcl.cli.common import _note_sigint, _run
    from tcl.config import Paths
    from tcl.measure.collect import probe_rate
    from tcl.store.devices import BUILTIN_DEVICES

    paths = Paths(Path(sys.argv[1]))
    tasks = pl.read_parquet(paths.tasks_file)
    # as `tcl device add --dry-run` runs its probe (plan_add_device), under the CLI's handling
    probe = lambda _args: probe_rate(paths, BUILTIN_DEVICES["cpu-sse42"], tasks, 600)
    seen = []
    _note_sigint(seen)
    sys.exit(_run(SimpleNamespace(func=probe), seen))
""")


def test_ctrl_c_during_a_dry_runs_probe_is_one_line_and_exit_130(paths, tmp_path):
    """Issue 54 item 17: Ctrl-C during `device add --dry-run`'s probe printed a traceback per
    build worker. Now: the probe's workers end silently, one line says nothing was stored, 130."""
    import psutil

    task = matmul_task(128)
    write_tasks(paths, [task])
    ensure_candidates(paths, task["task_id"], task["workload_json"], 16)
    script = tmp_path / "probe.py"
    script.write_text(PROBE_SCRIPT)
    proc = subprocess.Popen([sys.executable, str(script), str(paths.root)],
                            start_new_session=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 240
        while time.time() < deadline and proc.poll() is None and not any(
                "popen_worker" in " ".join(c.cmdline())
                for c in psutil.Process(proc.pid).children(recursive=True)):
            time.sleep(0.1)
        time.sleep(1.0)   # the build workers are importing or building now
        os.killpg(proc.pid, signal.SIGINT)   # what a terminal's Ctrl-C does
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, err
    lines = [line for line in (out + err).splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith("tcl: interrupted by SIGINT: the probe stored nothing"), lines
    assert not RecordStore(paths, warn=None).files()


def _imported_root(collected, tmp_path):
    """A data root holding only a JSONDatabase imported from the collected one: no zoo."""
    from tcl.config import Paths
    from tcl.measure.msjson import export_database, import_database

    src, task, _, _ = collected
    db = tmp_path / "db"
    export_database(src, DEVICE, db)
    paths = Paths(tmp_path / "imported")
    stats = import_database(paths, db, DEVICE)
    assert stats.tasks == 1 and not paths.tasks_file.exists()     # the workload is remembered
    return paths, task


def test_score_ranks_imported_records_per_task_class_and_network_without_a_zoo(collected, tmp_path):
    """`tcl score` on a data root of imported logs only: per task, per operator class and per
    network (weights from a file), every figure as tcl.metrics computes it; a model trained on
    another device is refused unless asked for."""
    from tcl import metrics
    from tcl.cli import main
    from tcl.dataset import load_program_set
    from tcl.models import make_model
    from tcl.score import score_records
    from tcl.store.catalog import query

    paths, task = _imported_root(collected, tmp_path)
    assert query(paths, "select count(network_key) n from networks")["n"][0] == 0   # binds
    featurize(paths, progress=False)
    ps = load_program_set(paths, DEVICE.name)
    model = make_model("xgb", num_boost_round=5, nthread=1).fit(ps)
    model.save(tmp_path / "m.model")
    (tmp_path / "m.json").write_text(json.dumps({"device": DEVICE.name, "kind": "xgb"}))
    weights = tmp_path / "weights.csv"
    weights.write_text(f"network,task_id,weight\nmine,{task['task_id']},3\n")
    got = score_records(paths, DEVICE.name, str(tmp_path / "m.model"), weights_file=weights)
    (row,) = got["tasks"].iter_rows(named=True)
    per_task = metrics.task_metrics(model.predict(ps), ps.latency, ps.task_ids.astype(str))
    assert row["top1"] == pytest.approx(per_task["best"][0] / per_task["pick1"][0])
    assert row["pairwise"] == pytest.approx(per_task["correct"][0] / per_task["pairs"][0])
    assert row["op_class"] == "reduction" and row["task_name"].startswith("imported_")
    (net,) = got["networks"].iter_rows(named=True)
    assert net["network_key"] == "mine" and net["top1"] == pytest.approx(row["top1"])
    assert got["classes"]["op_class"].to_list() == ["reduction"]
    out = tmp_path / "scored"
    assert main(["--data", str(paths.root), "score", "--device", DEVICE.name, "--model",
                 str(tmp_path / "m.model"), "--source", "import", "--out", str(out)]) == 0
    assert pl.read_csv(out / "tasks.csv")["n_programs"].to_list() == [row["n_programs"]]
    # a model trained on another device, given to score: refused, naming both devices
    (tmp_path / "m.json").write_text(json.dumps({"device": "cpu-sse42", "kind": "xgb"}))
    with pytest.raises(TclError, match="trained on device 'cpu-sse42'.*not 'cpu-avx2'"):
        score_records(paths, DEVICE.name, str(tmp_path / "m.model"))
    assert score_records(paths, DEVICE.name, str(tmp_path / "m.model"), any_device=True)
    with pytest.raises(TclError, match="no records from source 'tune'"):
        score_records(paths, DEVICE.name, str(tmp_path / "m.model"), source="tune",
                      any_device=True)


def test_empty_and_missing_databases_are_named(tmp_path, paths):
    from tcl.measure.msjson import RECORD_FILE, WORKLOAD_FILE, import_database
    from tcl.score import score_records

    with pytest.raises(TclError, match="no measured records"):
        score_records(paths, DEVICE.name, "xgb")
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / RECORD_FILE).write_text("")
    (empty / WORKLOAD_FILE).write_text("")
    with pytest.raises(TclError, match="empty"):
        import_database(paths, empty, DEVICE)
    with pytest.raises(TclError, match="no .*database|does not exist|not a"):
        import_database(paths, tmp_path / "nothing", DEVICE)
    assert RecordStore(paths).read().is_empty()


def test_tuning_a_held_out_network_in_another_layout_keeps_its_tasks_held_out(paths, tmp_path):
    """`tcl tune --layout` measures tasks the zoo lacks (imported ones). Those of a held-out
    network stay out of training (near copies of its own tasks); another network's do not."""
    from conftest import metaschedule_database
    from tcl.dataset import measured, tune_source
    from tcl.measure.msjson import import_database
    from tcl.store.records import write_parquet_atomic
    from tcl.store.schemas import NETWORK_SCHEMA
    from tcl.dataset import holdout_task_ids

    zoo_task = matmul_task(64)
    write_tasks(paths, [zoo_task])
    write_parquet_atomic(pl.DataFrame(
        [{"network": "net", "batch": 1, "input_shape": "1x64", "network_key": key,
          "task_id": zoo_task["task_id"], "weight": 1, "holdout": held}
         for key, held in (("net-b1", True), ("net-b4", False))], schema=NETWORK_SCHEMA),
        paths.networks_file)
    (tmp_path / "db").mkdir()
    db = metaschedule_database(tmp_path / "db")   # a matmul16: not a zoo task
    import_database(paths, db, DEVICE, source=tune_source("net-b4"))
    (imported,) = set(measured(paths, DEVICE.name)["task_id"].to_list())
    assert holdout_task_ids(paths) == {zoo_task["task_id"]}
    assert measured(paths, DEVICE.name, sources=["tuning"]).height == 3   # tuning, either way
    import_database(paths, db, Device("other", DEVICE.target), source=tune_source("net-b1"))
    assert holdout_task_ids(paths) == {zoo_task["task_id"], imported}
