import json

import polars as pl
import pytest

from tcl.config import TclError
from tcl.store.catalog import Catalog, query
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
    with pytest.raises(TclError, match=f"corrupt Parquet file {bad}"):
        store.read()
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
