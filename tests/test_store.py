import json

import polars as pl
import pytest

from tcl.config import TclError
from tcl.store.catalog import Catalog, query, records
from tcl.store.records import RecordStore, now_utc, record_id


def rows(device="cpu-avx2", task="t1", n=3, offset=0):
    out = []
    for i in range(offset, offset + n):
        trace = json.dumps([[["Split", [], [i], []]], []])
        out.append({"record_id": record_id(device, task, trace), "program_id": f"p{i}",
                    "device": device, "host_cpu": "cpu", "target": "{}", "task_id": task,
                    "trace_json": trace, "latencies": [1e-3 * (i + 1)] * 3, "status": "ok",
                    "error": None, "build_secs": 0.1, "source": "test", "measured_at": now_utc(),
                    "tvm_version": "0.27"})
    return out


def test_append_is_atomic_partitioned_and_idempotent(paths):
    store = RecordStore(paths)
    files = store.append(rows(n=3) + rows(task="t2", n=2))
    assert {f.parent.name for f in files} == {"task=t1", "task=t2"}
    assert not list(paths.records_dir.rglob(".tmp-*"))
    store.append(rows(n=3))  # the same measurements again
    assert len(store.read()) == 5
    assert query(paths, "select count(*) as n from records")["n"][0] == 5
    latency = query(paths, "select latency from records where program_id = 'p1'")["latency"][0]
    assert latency == pytest.approx(2e-3)


def test_unknown_status_is_refused(paths):
    bad = rows(n=1)
    bad[0]["status"] = "fine"
    with pytest.raises(TclError, match="status 'fine'"):
        RecordStore(paths).append(bad)


def test_corrupt_partition_is_named_and_others_stay_readable(paths):
    store = RecordStore(paths)
    store.append(rows(task="good", n=2))
    (bad,) = store.append(rows(task="bad", n=2))
    bad.write_bytes(b"PAR1 this is not a parquet file")
    named = []
    assert len(RecordStore(paths, warn=named.append).read()) == 2   # skipped, and named
    assert len(named) == 1 and f"unusable record file {bad}" in named[0]
    assert len(store.read(task_id="good")) == 2
    warnings = []
    frame = query(paths, "select task_id, count(*) n from records group by 1",
                  warn=warnings.append)
    assert frame["task_id"].to_list() == ["good"]
    assert len(warnings) == 1 and str(bad) in warnings[0]


def test_catalog_views_exist_on_an_empty_store(paths):
    cat = Catalog(paths, in_memory=True)
    for view in ("records", "programs", "tasks", "networks", "devices"):
        assert isinstance(cat.sql(f"select * from {view}"), pl.DataFrame)
    assert "cpu-avx2" in cat.sql("select device from devices")["device"].to_list()
    with pytest.raises(TclError, match="query failed"):
        cat.sql("select * from nothing_here")


def test_records_reads_one_device_with_bound_values(paths):
    """The typed read path: the device, tasks and status are parameters, never SQL text."""
    failed = rows(task="t2", n=1)
    failed[0].update(status="run_error", latencies=[], error="boom")
    RecordStore(paths).append(rows(n=2) + rows(device="cpu-avx512", n=1) + failed)
    frame = records(paths, "cpu-avx2", ("program_id", "task_id", "latency"))
    assert frame.columns == ["program_id", "task_id", "latency"]
    assert frame.rows() == [("p0", "t1", pytest.approx(1e-3)), ("p1", "t1", pytest.approx(2e-3)),
                            ("p0", "t2", None)]
    assert records(paths, "cpu-avx2", ("program_id",), status="ok").height == 2
    assert records(paths, "cpu-avx2", ("task_id",), status="run_error")["task_id"].to_list() \
        == ["t2"]
    assert records(paths, "cpu-avx2", ("task_id",), task_ids=["t2"]).height == 1
    assert records(paths, "cpu-avx2", ("task_id",), task_ids=[]).is_empty()
    # a quote is part of the name (the old reads stripped it and read cpu-avx2's records)
    for name in ("cpu-avx2'", "cpu-'avx2", "x' OR '1'='1"):
        assert records(paths, name, ("program_id",)).is_empty()
    missing = records(paths, "no-such-device", ("program_id", "measured_at"))
    assert missing.is_empty() and missing.columns == ["program_id", "measured_at"]
    with pytest.raises(TclError, match="unknown column.*'latency; drop'"):
        records(paths, "cpu-avx2", ("latency; drop",))
    with pytest.raises(TclError, match="unknown status 'fine'"):
        records(paths, "cpu-avx2", ("program_id",), status="fine")


def test_retire_moves_old_files_out_of_use_and_keeps_them_readable(paths):
    from datetime import timedelta

    store = RecordStore(paths)
    (old,) = store.append(rows(task="t1", n=3))
    cutoff = now_utc() + timedelta(microseconds=1)
    (new,) = store.append([{**r, "measured_at": cutoff + timedelta(seconds=1)}
                           for r in rows(task="t2", n=2)])
    with pytest.raises(TclError, match="time zone"):
        store.retire("cpu-avx2", cutoff.replace(tzinfo=None), "naive")
    assert store.retire("cpu-avx2", cutoff, "check", dry_run=True).records == 3
    assert old.exists()

    done = store.retire("cpu-avx2", cutoff, "measured under load")
    assert (done.records, done.files, done.straddling) == (3, [old], [])
    assert not old.exists() and new.exists()
    assert store.record_ids("cpu-avx2", "t1") == set()  # to be measured again
    assert len(RecordStore(paths, retired=True).read(task_id="t1")) == 3
    log = [json.loads(line) for line in (paths.retired_dir / "log.jsonl").read_text().splitlines()]
    assert log[0]["reason"] == "measured under load" and log[0]["records"] == 3
    counts = query(paths, "select (select count(*) from records) r, "
                          "(select count(*) from retired) o")
    assert (counts["r"][0], counts["o"][0]) == (2, 3)


def test_retire_leaves_a_file_that_straddles_the_cutoff(paths):
    from datetime import timedelta

    store = RecordStore(paths)
    t0 = now_utc()
    batch = rows(n=2)
    batch[1]["measured_at"] = t0 + timedelta(seconds=10)
    (f,) = store.append(batch)
    done = store.retire("cpu-avx2", t0 + timedelta(seconds=5), "half")
    assert (done.records, done.straddling) == (0, [f]) and f.exists()


def test_retire_a_window_takes_only_what_was_measured_inside_it(paths):
    from datetime import timedelta

    store = RecordStore(paths)
    t0 = now_utc()
    (early,) = store.append([{**r, "measured_at": t0} for r in rows(task="t1", n=2)])
    (inside,) = store.append([{**r, "measured_at": t0 + timedelta(seconds=10)}
                              for r in rows(task="t2", n=2)])
    (late,) = store.append([{**r, "measured_at": t0 + timedelta(seconds=20)}
                            for r in rows(task="t3", n=2)])
    with pytest.raises(TclError, match="window is empty"):
        store.retire("cpu-avx2", t0, "x", after=t0 + timedelta(seconds=1))
    done = store.retire("cpu-avx2", t0 + timedelta(seconds=15), "a test shared the cores",
                        after=t0 + timedelta(seconds=5))
    assert (done.records, done.files) == (2, [inside])
    assert early.exists() and late.exists() and not inside.exists()
    log = json.loads((paths.retired_dir / "log.jsonl").read_text().splitlines()[-1])
    assert log["after"] is not None


def test_data_card_compares_retired_records_with_their_remeasurement(paths):
    from datetime import timedelta

    from tcl.datacard import retired_comparison

    store = RecordStore(paths)
    store.append(rows(n=8))                    # latencies 1..8 ms
    cutoff = now_utc() + timedelta(microseconds=1)
    store.retire("cpu-avx2", cutoff, "loaded")
    again = rows(n=8)
    for i, r in enumerate(again):              # half the latency, same order but for one swap
        r["latencies"] = [0.5e-3 * (i + 1)] * 3
    again[0]["latencies"], again[1]["latencies"] = again[1]["latencies"], again[0]["latencies"]
    store.append(again)
    cat = Catalog(paths, in_memory=True)
    try:
        out = retired_comparison(cat)["cpu-avx2"]
    finally:
        cat.close()
    assert out["programs"] == 8 and out["tasks"] == 1
    assert out["median_first_over_second"] == pytest.approx(2.0)
    assert 0.9 < out["median_spearman"] < 1.0


def test_json_registry_reads_one_error_and_writes_atomically(paths):
    """tcl.store.jsonfile: the device registry, user networks and failed-device state."""
    from tcl.store.devices import clear_failed, failures, mark_failed
    from tcl.store.jsonfile import JsonRegistry

    reg = JsonRegistry(paths.root / "things.json", "thing registry")
    assert reg.read() == {}
    reg.write({"a": {"n": 1}})
    assert reg.read() == {"a": {"n": 1}}
    assert [f.name for f in paths.root.iterdir()] == ["things.json"]   # no temporary left
    with pytest.raises(TclError, match=r"thing registry .*things.json is not valid \(KeyError"):
        reg.read(lambda raw: raw["b"])
    (paths.root / "things.json").write_text("[1, 2]")
    with pytest.raises(TclError, match="is not valid .*expected a JSON object, got list"):
        reg.read()
    mark_failed(paths, "cpu-avx2", "nothing measured")
    assert failures(paths)["cpu-avx2"]["reason"] == "nothing measured"
    clear_failed(paths, "cpu-avx2")
    assert failures(paths) == {} and paths.failures_file.exists()
    paths.failures_file.write_text("{torn")
    with pytest.raises(TclError, match="failed-device state .*device-failures.json is not valid"):
        failures(paths)


def test_the_measuring_rate_counts_the_collectors_records_only(paths):
    """A tuning run stores its records all at once, at its end: their timestamps are no rate
    (zen4-1c's read 9.29 records/s where its runs measured about 1)."""
    from datetime import timedelta

    from tcl.measure.collect import MIN_RECORDS_FOR_RATE, measured_throughput

    start, n = now_utc(), MIN_RECORDS_FOR_RATE
    collected = rows(n=n)
    for i, r in enumerate(collected):   # one record every 2 s
        r.update(source="collect", measured_at=start + timedelta(seconds=2 * i))
    tuned = rows(task="t2", n=10 * n)
    for r in tuned:                     # ten times as many, in the same second
        r.update(source="tune:net-b1", measured_at=start)
    RecordStore(paths).append(collected + tuned)
    assert measured_throughput(RecordStore(paths), "cpu-avx2") == pytest.approx(
        n / (2 * (n - 1)))


def test_an_estimate_at_the_default_rate_says_it_is_assumed(paths):
    """Issue 54: the collect dry run estimated at the default rate, without saying so, when the
    device had fewer records than a rate is measured from."""
    from datetime import timedelta

    from tcl.measure.collect import (DEFAULT_RECORDS_PER_SEC, MIN_RECORDS_FOR_RATE, Plan,
                                     throughput)
    from tcl.store.devices import BUILTIN_DEVICES

    few = rows(n=3)
    for r in few:
        r["source"] = "collect"
    RecordStore(paths).append(few)
    rate, basis = throughput(RecordStore(paths), "cpu-avx2")
    assert rate == DEFAULT_RECORDS_PER_SEC
    assert basis.startswith("assumed: cpu-avx2 has 3 collected records, fewer than the "
                            f"{MIN_RECORDS_FOR_RATE}")
    task = pl.DataFrame({"task_id": ["t1"], "op_class": ["dense"], "task_name": ["t1"],
                         "todo": [6]})
    plan = Plan(BUILTIN_DEVICES["cpu-avx2"], task, 16, rate, basis)
    assert f"at {DEFAULT_RECORDS_PER_SEC:.1f} records/s (assumed: " in plan.describe()
    start = now_utc()
    more = rows(task="t2", n=MIN_RECORDS_FOR_RATE)
    for i, r in enumerate(more):
        r.update(source="collect", measured_at=start + timedelta(seconds=i))
    RecordStore(paths).append(more)
    rate, basis = throughput(RecordStore(paths), "cpu-avx2")
    assert rate != DEFAULT_RECORDS_PER_SEC and basis.startswith("measured from cpu-avx2's")
