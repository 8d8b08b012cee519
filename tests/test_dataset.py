"""What the models learn from and are scored on: each record's sources (params
train.sources), the training records every learner takes, the held-out programs."""
from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

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


def _learning_root(tmp_path, sources):
    """tiny_params' data root with ``train.sources`` = ``sources``: bert_tiny's training tasks
    ta (collected, and a tuning run's), tb (imported), its held-out task th (collected), and
    swin_t's tl (a long-tail family); every program featurized."""
    import numpy as np
    import yaml
    from test_status import _zoo
    from test_store import rows

    from tcl.features import FEATURE_SCHEMA
    from tcl.pipeline.params import load_params
    from tcl.store.records import RecordStore
    from tcl.tokens import PER_STORE_WIDTH, TOKEN_WIDTH

    raw = yaml.safe_load((Path(__file__).parent / "tiny_params.yaml").read_text())
    raw["sample"].update(max_train_tasks=1, max_holdout_tasks=None)
    raw["train"]["sources"] = sources
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(raw))
    params = load_params(tmp_path / "params.yaml", check_models=False)
    _zoo(params)
    rng, offset = np.random.default_rng(0), 0
    for task, n, source in (("ta", 2, "collect"), ("ta", 2, "tune:bert_tiny-b4-128"),
                            ("tb", 2, "import:logs/x.json"), ("th", 2, "collect"),
                            ("tl", 2, "collect")):
        RecordStore(params.paths).append(
            [dict(r, source=source) for r in rows(task=task, n=n, offset=offset)])
        offset += n
    for task, ids in (("ta", range(0, 4)), ("tb", range(4, 6)), ("th", range(6, 8)),
                      ("tl", range(8, 10))):
        write_parquet_atomic(pl.DataFrame(
            [{"program_id": f"p{i}", "task_id": task, "n_stores": 1, "n_tokens": 1,
              "per_store": rng.random(PER_STORE_WIDTH), "tokens": rng.random(TOKEN_WIDTH)}
             for i in ids], schema=FEATURE_SCHEMA), params.paths.features_file(task))
    return params


def test_every_learner_takes_the_training_records_of_train_sources(tmp_path):
    """One rule for what models learn from (tcl.dataset.training_records): the train stage's,
    the continual run's and tune's refit rows are the same records of train.sources, never a
    held-out task's. Tune's refit learned from every record whatever train.sources said."""
    from tcl.dataset import training_records
    from tcl.pipeline.continual import _records
    from tcl.train import _training_tasks
    from tcl.tune.run import refit_base

    every = {"p0", "p1", "p2", "p3", "p4", "p5", "p8", "p9"}   # th's p6, p7: held out
    for sources, want in ((list(SOURCES), every), (["reference"], {"p0", "p1"}),
                          (["reference", "tuning"], {"p0", "p1", "p2", "p3"}),
                          (["families", "imported"], {"p4", "p5", "p8", "p9"})):
        params = _learning_root(tmp_path / "-".join(sources), sources)
        paths, chosen = params.paths, params.train.sources
        records = training_records(paths, "cpu-avx2", chosen)
        assert set(records["program_id"]) == want, sources
        assert _training_tasks(records, None) == sorted(set(records["task_id"]))   # train
        assert set(_records(params, "cpu-avx2", None)["program_id"]) == want      # continual
        refit = refit_base(paths, "cpu-avx2", chosen)                             # tune
        assert set(refit.program_ids.astype(str)) == want, sources
        assert refit.labels is not None and len(refit) == len(want)
    assert set(refit_base(paths, "cpu-avx2").program_ids.astype(str)) == every   # no params


def test_tune_refit_takes_train_sources_from_the_params_of_its_data_root(tmp_path):
    """`tcl tune --update refit` reads train.sources from --params (default params.yaml) where
    that file names the data root tuned on; a file of another root says nothing (every
    record)."""
    from tcl.cli import build_parser
    from tcl.cli.tune import _refit_sources
    from tcl.config import Paths

    params = _learning_root(tmp_path, ["reference", "tuning"])
    for root, want in ((params.paths.root, ("reference", "tuning")), (tmp_path / "other", None)):
        args = build_parser().parse_args(
            ["--data", str(root), "tune", "--network", "bert_tiny", "--device", "cpu-avx2",
             "--update", "refit", "--params", str(params.source)])
        assert _refit_sources(args, Paths(root)) == want


def test_held_out_programs_are_the_held_out_tasks_records_but_a_tuning_runs(tmp_path):
    """What the held-out networks are scored on (tcl.dataset.held_out_program_set, for the
    evaluate stage and the continual run's forgetting alike): the held-out tasks' records of
    every source but tuning; a device with none of them is one clear error."""
    from tcl.config import TclError
    from tcl.dataset import held_out_program_set

    params = _learning_root(tmp_path, list(SOURCES))
    ps = held_out_program_set(params.paths, "cpu-avx2")
    assert ps.program_ids.astype(str).tolist() == ["p6", "p7"] and ps.labels is not None
    assert held_out_program_set(params.paths, "cpu-avx2", {"ta"}).program_ids.astype(
        str).tolist() == ["p0", "p1"]   # narrowed by the caller; ta's tuning records left out
    with pytest.raises(TclError, match="device 'cpu-sse42' has no measured program of a "
                                       "held-out task: run the measure stage first"):
        held_out_program_set(params.paths, "cpu-sse42")
