"""Scale-out on Dask (tiny profile): the sample and featurize flows on prefect-dask's
DaskTaskRunner over a real LocalCluster give what the local run gives; the measure stage builds
on a Dask cluster (an existing one, joined by its address) and the records are as good as the
local builder's; an unreachable scheduler is a clear error that names it."""
from __future__ import annotations

import socket
from pathlib import Path

import polars as pl
import pytest
import yaml

from tcl.config import TclError

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[1]


def _params(root: Path, **scale_out):
    from tcl.pipeline import stages
    from tcl.pipeline.params import load_params

    raw = yaml.safe_load((ROOT / "tests" / "tiny_params.yaml").read_text())
    raw["scale_out"].update(scale_out)
    root.mkdir(parents=True, exist_ok=True)
    (root / "params.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    params = load_params(root / "params.yaml", check_models=False)
    stages.run_zoo(params)
    return params


def _frames(params):
    from tcl.features import load_features
    from tcl.pipeline.inputs import selected_tasks
    from tcl.sampling import load_candidates

    ids = selected_tasks(params)["task_id"].to_list()
    cands = pl.concat([load_candidates(params.paths, t) for t in ids]).sort("program_id")
    feats = load_features(params.paths, ids).sort("program_id")
    return cands.select("program_id", "trace_json"), feats


def test_sample_and_featurize_on_a_local_dask_cluster_match_the_local_run(tmp_path):
    from flows.featurize import featurize
    from flows.sample import sample

    local = _params(tmp_path / "local")
    dask = _params(tmp_path / "dask", task_runner="dask", dask_workers=2)
    for p in (local, dask):
        assert sample(params_file=str(p.source)) == 8     # 2 tasks x 4 programs
        assert featurize(params_file=str(p.source)) == 8
    (c1, f1), (c2, f2) = _frames(local), _frames(dask)
    assert c1.equals(c2)
    assert f1.equals(f2)
    assert sample(params_file=str(dask.source)) == 0     # incremental there too


def test_measure_builds_on_an_existing_dask_cluster(tmp_path):
    from distributed import LocalCluster

    from tcl.pipeline import stages
    from tcl.store.catalog import query

    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                      dashboard_address=None, host="127.0.0.1") as cluster:
        params = _params(tmp_path, task_runner="dask", dask_address=cluster.scheduler_address)
        stages.run_sample(params, progress=False)
        stats = stages.run_measure(params, "cpu-avx2", progress=False)
        # the builds ran as tasks of the cluster (its scheduler runs in this process)
        assert "build_to_bytes" in cluster.scheduler.task_prefixes
    assert stats.measured == 8
    got = dict(query(params.paths, "select status, count(*) n from records group by 1").iter_rows())
    # every program built on the cluster; a run may still time out on a loaded machine (the
    # runner's verdict, measured here, not the builder's: CI once saw one of eight)
    assert sum(got.values()) == 8 and set(got) <= {"ok", "timeout"} and got.get("ok", 0) >= 1


def test_an_unreachable_scheduler_is_named(tmp_path):
    from tcl.pipeline import stages

    with socket.socket() as s:              # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    params = _params(tmp_path, task_runner="dask", dask_address=f"tcp://127.0.0.1:{port}")
    with pytest.raises(TclError, match=f"Dask scheduler at tcp://127.0.0.1:{port} "
                                       r"\(scale_out.dask_address\) is unreachable"):
        stages.run_measure(params, "cpu-avx2", progress=False)
