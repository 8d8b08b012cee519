"""`tcl status` right after a model: pending counts only newer records the models learn from
(train.sources, never a held-out task); the other newer records are listed by why no model uses
them."""
from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import polars as pl
import yaml
from test_store import rows

from tcl.cli import main
from tcl.continual.model import MultiDeviceModel
from tcl.pipeline.params import load_params
from tcl.pipeline.inputs import instances
from tcl.registry import ModelRegistry
from tcl.pipeline.status import device_status
from tcl.store.records import RecordStore, now_utc, write_parquet_atomic
from tcl.store.schemas import NETWORK_SCHEMA, TASK_SCHEMA
from tcl.zoo.networks import zoo_instances

ROOT = Path(__file__).resolve().parents[1]


def _zoo(params) -> None:
    """bert_tiny (zoo.networks): held-out task th, training tasks ta (heavier) and tb; swin_t (a
    long-tail family, not in zoo.networks): tl."""
    held, train = sorted(instances(params), key=lambda i: not i.holdout)
    (tail, *_) = zoo_instances(["swin_t"], small=True)
    nets = [(held, "th", 1), (train, "ta", 5), (train, "tb", 1), (tail, "tl", 1)]
    write_parquet_atomic(pl.DataFrame(
        [{"network": i.network, "batch": i.batch, "input_shape": i.input_shape,
          "network_key": i.key, "task_id": t, "weight": w, "holdout": i.holdout}
         for i, t, w in nets], schema=NETWORK_SCHEMA), params.paths.networks_file)
    write_parquet_atomic(pl.DataFrame(
        [{"task_id": t, "task_name": t, "op_class": "dense", "workload_json": "", "flop": 0.0}
         for _, t, _ in nets], schema=TASK_SCHEMA), params.paths.tasks_file)


def _register(params, newest, seed: int) -> None:
    model = MultiDeviceModel("tenset-mlp", ["cpu-avx2"], {"hidden": 8}, seed=seed)
    ModelRegistry(params.paths).register(model, device="cpu-avx2", parent=None, method="scratch",
                                         snapshot=str(newest), n_records=1,
                                         newest_measured_at=newest)


def test_status_counts_training_tasks_and_names_why_other_records_are_unused(tmp_path, capsys):
    raw = yaml.safe_load((ROOT / "tests" / "tiny_params.yaml").read_text())
    raw["sample"].update(max_train_tasks=1, max_holdout_tasks=None)
    raw["train"]["sources"] = ["reference"]   # the families and imported logs are not learned from
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(raw))
    params = load_params(tmp_path / "params.yaml", check_models=False)
    _zoo(params)
    store = RecordStore(params.paths)
    then = now_utc() - timedelta(hours=1)
    store.append([dict(r, measured_at=then) for r in rows(task="ta", n=2)])
    _register(params, then, seed=0)
    newer = {"ta": 2, "tb": 3, "th": 4, "tl": 5, "tx": 6}   # tx: imported, not in the zoo
    offset = 10
    for task, n in newer.items():
        source = "import:logs/x.json" if task == "tx" else "collect"
        store.append([dict(r, source=source) for r in rows(task=task, n=n, offset=offset)])
        offset += n

    # Every reference record counts, beyond sample.max_train_tasks too (the train stage's rule).
    (row,) = device_status(params.paths, params).iter_rows(named=True)
    assert row["pending"] == "5 newer records"
    assert row["not_used"] == (
        "4 of held-out tasks (evaluation only); 11 of sources outside train.sources "
        "(long-tail families: swin_t 5; imported logs: import 6)")
    # The CLI reads the params file of the data root and prints the reasons under the table.
    assert main(["--data", str(params.paths.root), "status", "--params",
                 str(tmp_path / "params.yaml")]) == 0
    out = capsys.readouterr().out
    assert "5 newer records" in out
    assert "cpu-avx2: newer records that no model trains on: 4 of held-out tasks" in out
    # With every source (the default) all but the held-out records are pending.
    raw["train"]["sources"] = ["reference", "families", "user", "imported", "tuning"]
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(raw))
    every = load_params(tmp_path / "params.yaml", check_models=False)
    (row,) = device_status(params.paths, every).iter_rows(named=True)
    assert (row["pending"], row["not_used"]) == ("16 newer records",
                                                 "4 of held-out tasks (evaluation only)")
    # Without the params file every record but the held-out ones counts (as before).
    (row,) = device_status(params.paths).iter_rows(named=True)
    assert row["pending"] == "16 newer records"

    # A model made from all of them: up to date, and nothing newer to explain.
    _register(params, store.read(columns=["measured_at"])["measured_at"].max(), seed=1)
    (row,) = device_status(params.paths, params).iter_rows(named=True)
    assert (row["pending"], row["not_used"]) == ("up to date", "")


def test_a_registered_model_whose_file_is_gone_is_stale_and_made_again(tmp_path):
    """Issue 54: after models/registry/<id>.model was deleted, `tcl status` said "up to date" and
    `tcl distill` said "nothing new" (its snapshot was registered) without making it again. A
    registered model whose file is missing is stale: status names it, the distillation's
    "nothing new" test (``find``) passes it over, and registering it again writes the file."""
    raw = yaml.safe_load((ROOT / "tests" / "tiny_params.yaml").read_text())
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(raw))
    params = load_params(tmp_path / "params.yaml", check_models=False)
    _zoo(params)
    store = RecordStore(params.paths)
    store.append(rows(task="ta", n=2))
    newest = store.read(columns=["measured_at"])["measured_at"].max()
    _register(params, newest, seed=0)
    registry = ModelRegistry(params.paths)
    (entry,) = registry.entries()
    (row,) = device_status(params.paths, params).iter_rows(named=True)
    assert row["pending"] == "up to date"

    (params.paths.root / entry.path).unlink()
    (row,) = device_status(params.paths, params).iter_rows(named=True)
    assert row["pending"] == (f"model {entry.id}'s file {params.paths.root / entry.path} is "
                              "missing: the next distillation makes it again")
    assert registry.find(str(newest)) is None        # not "nothing new"

    _register(params, newest, seed=0)                # the distillation's register, made again
    assert registry.load(registry.find(str(newest))).content_hash() == entry.content_hash
    (row,) = device_status(params.paths, params).iter_rows(named=True)
    assert row["pending"] == "up to date"
