"""What the models learn from: each record's sources (params train.sources)."""
from __future__ import annotations

import polars as pl

from tcl.dataset import SOURCES, record_sources
from tcl.store.records import write_parquet_atomic
from tcl.store.schemas import NETWORK_SCHEMA


def _networks(paths, rows: list[tuple[str, str]]) -> None:
    frame = pl.DataFrame([{"network": n, "batch": 1, "input_shape": "1x8", "network_key": n,
                           "task_id": t, "weight": 1, "holdout": False} for n, t in rows],
                         schema=NETWORK_SCHEMA)
    paths.networks_file.parent.mkdir(parents=True, exist_ok=True)
    write_parquet_atomic(frame, paths.networks_file)


def test_record_sources_from_the_record_and_its_tasks_networks(paths):
    # t-ref: a reference network's; t-fam: a long-tail family's; t-user: the user's own network;
    # t-both: a task the reference and a family share; t-none: no network of the zoo runs it
    _networks(paths, [("resnet50", "t-ref"), ("unet", "t-fam"), ("my_net", "t-user"),
                      ("resnet50", "t-both"), ("llama", "t-both")])
    frame = pl.DataFrame({
        "task_id": ["t-ref", "t-fam", "t-user", "t-both", "t-none", "t-ref", "t-fam"],
        "source": ["collect", "collect", "collect", "collect", "collect", "tune",
                   "import:logs/a.json"]})
    got = [sorted(s) for s in record_sources(paths, frame).to_list()]
    assert got == [["reference"], ["families"], ["user"], ["families", "reference"],
                   ["reference"], ["tuning"], ["imported"]]
    assert {s for row in got for s in row} == set(SOURCES)
