"""Continual distillation: the multi-device model, the five methods, the registry, the pipeline
call, and the bad inputs the issue names (another architecture, no subset, a device before its
teacher, distilling again with nothing new)."""
from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml

from tcl.config import TclError
from tcl.continual import DISTILLERS, DeviceData, MultiDeviceModel, Settings, make_distiller
from tcl.continual.train import distill_loss
from tcl.metrics import pairwise_accuracy
from tcl.models.nn import synthetic_programs

ROOT = Path(__file__).resolve().parents[1]
TINY_HYPER = {"tenset-mlp": {"hidden": 32, "epochs": 10, "batch_size": 16, "lr": 3e-3,
                             "patience": 2},
              "mamba": {"d_model": 8, "n_layers": 1, "d_state": 4, "epochs": 3,
                        "batch_size": 64, "patience": 2}}


def _data(device: str, seed: int, labelled_share: float = 0.25) -> DeviceData:
    pool = synthetic_programs(n_groups=8, per_group=16, seed=seed)
    rng = np.random.default_rng(seed)
    pick = np.sort(rng.choice(len(pool), int(len(pool) * labelled_share), replace=False))
    labelled = pool.subset(pick)
    unlabelled = pool.subset(np.arange(len(pool)))
    unlabelled.labels = None
    return DeviceData(device, labelled, None, unlabelled)


def _first(backbone: str = "tenset-mlp") -> MultiDeviceModel:
    s = Settings(backbone, TINY_HYPER[backbone])
    return make_distiller("scratch").fit(None, _data("a", 0, 1.0), s)


@pytest.mark.parametrize("method", list(DISTILLERS))
def test_every_method_serves_every_device_it_learned(method):
    s = Settings("tenset-mlp", TINY_HYPER["tenset-mlp"])
    teacher = _first()
    history = [_data("a", 0, 1.0)]
    new = _data("b", 1)
    student = make_distiller(method).fit(None if method == "scratch" else teacher, new, s,
                                         history)
    expected = ["b"] if method == "scratch" else ["a", "b"]
    assert student.devices == expected and student.target == "b"
    scores = student.predict(new.unlabelled)
    assert scores.shape == (len(new.unlabelled),) and np.isfinite(scores).all()
    # the synthetic label is a function of the features: every method learns something
    truth = synthetic_programs(n_groups=8, per_group=16, seed=1)
    assert pairwise_accuracy(scores, truth.labels, truth.group) > 0.52
    assert teacher.devices == ["a"]   # the teacher is never modified


def test_distillation_keeps_the_old_heads_and_finetuning_moves_them():
    s = Settings("tenset-mlp", TINY_HYPER["tenset-mlp"])
    teacher = _first()
    new = _data("b", 1)
    probe = synthetic_programs(n_groups=8, per_group=16, seed=5)
    before = teacher.scores(probe, "a")

    def drift(model):   # 1 - correlation of the old head's scores with the teacher's
        return 1 - np.corrcoef(before, model.scores(probe, "a"))[0, 1]

    kept = drift(make_distiller("distill").fit(teacher, new, s))
    moved = drift(make_distiller("finetune").fit(teacher, new, s))
    assert kept < moved


def test_parameters_grow_by_one_head_per_device_under_five_percent():
    for backbone in ("tenset-mlp", "mamba"):
        model = MultiDeviceModel(backbone, ["a"])
        one = model.n_parameters()
        model.net.add_device("b")
        two = model.n_parameters()
        assert two["shared"] == one["shared"]
        assert two["total"] - one["total"] == one["per_device"]
        assert one["per_device"] / one["total"] <= 0.05, (backbone, one)


def test_save_load_round_trip_keeps_every_head(tmp_path):
    s = Settings("mamba", TINY_HYPER["mamba"])
    teacher = make_distiller("scratch").fit(None, _data("a", 0, 1.0), s)
    student = make_distiller("distill").fit(teacher, _data("b", 1), s)
    f = tmp_path / "m.model"
    student.save(f)
    from tcl.models import load_model

    back = load_model(f)
    probe = synthetic_programs(n_groups=4, per_group=8, seed=3)
    for d in ("a", "b"):
        np.testing.assert_allclose(back.scores(probe, d), student.scores(probe, d), rtol=1e-5)
    assert back.content_hash() == student.content_hash() and back.target == "b"
    assert back.for_device("a").target == "a" and back.target == "b"   # a view, not a change
    with pytest.raises(TclError, match="has not learned device 'c'"):
        back.for_device("c")


def test_distill_loss_is_a_ranking_match():
    import torch

    g = torch.tensor([0, 0, 0, 1, 1, 1, 2])
    t = torch.tensor([1.0, 2.0, 3.0, 5.0, 5.0, 5.0, 1.0])
    assert float(distill_loss(t * 10 + 3, t, g)) < 1e-4        # same ranking, any scale
    assert float(distill_loss(-t, t, g)) > 3                     # reversed: 2 * 2 per task
    # groups of one program, or where the teacher scores all alike, carry nothing


# -- bad input ------------------------------------------------------------------------------------
def test_a_teacher_of_another_architecture_is_refused(tmp_path):
    from tcl.models import make_model

    plain = make_model("tenset-mlp", hidden=16)
    s = Settings("tenset-mlp", TINY_HYPER["tenset-mlp"])
    with pytest.raises(TclError, match="needs a 'continual' model"):
        make_distiller("distill").fit(plain, _data("b", 1), s)
    mamba_teacher = _first("mamba")
    with pytest.raises(TclError, match="backbone is 'mamba'"):
        make_distiller("distill").fit(mamba_teacher, _data("b", 1), s)
    # a file of another version
    import torch

    f = tmp_path / "old.model"
    mamba_teacher.save(f)
    blob = torch.load(f, weights_only=True)
    blob["version"] = 0
    blob.pop("content_hash")        # edited by hand: the hash would refuse it first
    torch.save(blob, f)
    with pytest.raises(TclError, match="version 0"):
        MultiDeviceModel.load(f)


def test_no_subset_and_a_device_the_teacher_knows_are_refused():
    s = Settings("tenset-mlp", TINY_HYPER["tenset-mlp"])
    with pytest.raises(TclError, match="no measured subset"):
        DeviceData("b", synthetic_programs(n_groups=1, per_group=2).subset(np.array([], int)))
    teacher = _first()
    with pytest.raises(TclError, match="has learned device 'a' already"):
        make_distiller("distill").fit(teacher, _data("a", 1), s)
    with pytest.raises(TclError, match="needs a teacher"):
        make_distiller("compress").fit(None, _data("b", 1), s)
    with pytest.raises(TclError, match="unknown distillation method"):
        make_distiller("magic")


def test_registry_registers_by_content_and_reports_damage(paths, capsys):
    from tcl.registry import ModelRegistry

    reg = ModelRegistry(paths)
    assert reg.latest("a") is None and reg.frame().is_empty()
    model = _first()
    e = reg.register(model, device="a", parent=None, method="scratch", snapshot="k1",
                     n_records=10, newest_measured_at=None, metrics={"new": {"top1": 0.5}})
    assert (paths.root / e.path).exists() and e.id == model.content_hash()[:16]
    again = reg.register(model, device="a", parent=None, method="scratch", snapshot="k1",
                         n_records=10, newest_measured_at=None)
    assert again.id == e.id and len(reg.entries()) == 1
    assert reg.latest("a").metrics["new"]["top1"] == 0.5
    assert reg.load(e).content_hash() == model.content_hash()
    # `tcl models list`: the versions as a table that fits 100 columns (issue 42)
    from tcl.cli import main

    assert main(["--data", str(paths.root), "models", "list"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["id", "device", "parent", "method", "records", "top1", "pairwise",
                              "created"]
    assert out[1].split()[:5] == [e.id, "a", "-", "scratch", "10"] and "0.5" in out[1]
    assert max(map(len, out)) <= 100
    reg.file.write_bytes(b"not a database")
    with pytest.raises(TclError, match="registry .* cannot be opened"):
        reg.entries()


def test_registry_waits_out_another_process_holding_its_file(paths):
    """DuckDB locks a database file per process: a reader or writer in another tcl process (two
    add-device runs at once) is waited for, never reported as a damaged registry."""
    import subprocess
    import sys

    from tcl.registry import ModelRegistry

    reg = ModelRegistry(paths)
    reg.register(_first(), device="a", parent=None, method="scratch", snapshot="k1",
                 n_records=10, newest_measured_at=None)
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time, duckdb; c = duckdb.connect(sys.argv[1]); "
         "print('held', flush=True); time.sleep(2); c.close()", str(reg.file)],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        assert [e.snapshot for e in reg.entries()] == ["k1"]   # waited, then read
    finally:
        holder.wait(timeout=60)
    assert holder.returncode == 0


# -- the pipeline call on real measurements --------------------------------------------------------
@pytest.fixture(scope="module")
def two_devices(tmp_path_factory):
    """The tiny profile measured for real on two devices, and a sequence over them."""
    from tcl.pipeline import stages
    from tcl.pipeline.params import load_params

    root = tmp_path_factory.mktemp("continual")
    raw = yaml.safe_load((ROOT / "tests" / "tiny_params.yaml").read_text())
    raw["devices"] = ["cpu-avx2", "cpu-avx2-1c"]
    raw["continual"].update(first="cpu-avx2", then={"cpu-avx2-1c": "cpu-avx2"}, subset=0.5,
                            backbone="tenset-mlp")
    raw["train"]["models"] = ["tenset-mlp"]
    raw["train"]["hyper"] = {"tenset-mlp": {"hidden": 16, "epochs": 3, "batch_size": 64}}
    raw["select"]["teacher"] = "cpu-avx2/tenset-mlp"
    (root / "params.yaml").write_text(yaml.safe_dump(raw))
    params = load_params(root / "params.yaml")
    stages.run_zoo(params)
    stages.run_sample(params, progress=False)
    for d in raw["devices"]:
        stages.run_measure(params, d, progress=False)
    stages.run_featurize(params, progress=False)
    return params


@pytest.mark.slow
def test_distill_device_end_to_end(two_devices, capsys):
    from tcl.pipeline.continual import distill_device
    from tcl.registry import ModelRegistry

    params = two_devices
    with pytest.raises(TclError, match="comes after 'cpu-avx2'.*distill --device cpu-avx2"):
        distill_device(params, "cpu-avx2-1c")
    first = distill_device(params, "cpu-avx2")
    assert first.new and first.entry.method == "scratch" and first.entry.parent is None
    second = distill_device(params, "cpu-avx2-1c")
    e = second.entry
    assert second.new and e.parent == first.entry.id and e.devices == ["cpu-avx2", "cpu-avx2-1c"]
    assert e.method == "distill" and 0 < e.n_records < first.entry.n_records
    assert set(second.metrics["forgetting"]) == {"cpu-avx2"}
    assert "overall" in second.metrics["forgetting"]["cpu-avx2"]["pairwise"]
    # the subset is a stored selection: the catalog joins it with the records
    from tcl.store.catalog import query

    picked = query(params.paths, "select count(*) n from selections s join records r "
                                 "using (device, program_id) where device = 'cpu-avx2-1c'")
    assert picked["n"][0] == e.n_records
    # nothing new: nothing retrained, nothing registered, and the message says so
    capsys.readouterr()
    again = distill_device(params, "cpu-avx2-1c", say=print)
    assert not again.new and again.entry.id == e.id
    assert "nothing new" in capsys.readouterr().out
    assert len(ModelRegistry(params.paths).entries()) == 2
    # another method is another version, with the same parent
    mtl = distill_device(params, "cpu-avx2-1c", method="multitask")
    assert mtl.new and mtl.entry.method == "multitask" and mtl.entry.parent == first.entry.id
    assert ModelRegistry(params.paths).latest("cpu-avx2-1c").id == mtl.entry.id


@pytest.mark.slow
def test_models_list_and_distill_cli(two_devices):
    import subprocess
    import sys

    root = two_devices.source.parent
    tcl = [sys.executable, "-m", "tcl.cli"]
    out = subprocess.run([*tcl, "distill", "--device", "cpu-avx2"], cwd=root, text=True,
                         capture_output=True)
    assert out.returncode == 0, out.stderr
    listed = subprocess.run([*tcl, "models", "list", "--format", "csv"], cwd=root, text=True,
                            capture_output=True)
    assert listed.returncode == 0 and "cpu-avx2" in listed.stdout
    bad = subprocess.run([*tcl, "distill", "--device", "cpu-sse42"], cwd=root, text=True,
                         capture_output=True)
    assert bad.returncode == 2 and "not in params.yaml's continual sequence" in bad.stderr


def test_the_continual_run_learns_from_every_source_the_params_name(tmp_path):
    """The registry's models learn from what the train stage learns from (train.sources, never
    a held-out task): a family's records and reference tasks beyond sample.max_train_tasks
    count; with train.sources [reference] the family's and the imported records do not."""
    from test_status import _zoo
    from test_store import rows

    from tcl.pipeline.continual import _records
    from tcl.pipeline.params import load_params
    from tcl.store.records import RecordStore

    raw = yaml.safe_load((ROOT / "tests" / "tiny_params.yaml").read_text())
    raw["sample"].update(max_train_tasks=1, max_holdout_tasks=None)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(raw))
    params = load_params(tmp_path / "params.yaml", check_models=False)
    _zoo(params)   # ta, tb: bert_tiny's training tasks; th: held out; tl: swin_t (a family)
    offset = 0
    for task, n in {"ta": 2, "tb": 3, "th": 4, "tl": 5, "tx": 6}.items():   # tx: imported
        source = "import:logs/x.json" if task == "tx" else "collect"
        RecordStore(params.paths).append(
            [dict(r, source=source) for r in rows(task=task, n=n, offset=offset)])
        offset += n
    every = _records(params, "cpu-avx2", None)
    assert every.group_by("task_id").len().sort("task_id").rows() == [
        ("ta", 2), ("tb", 3), ("tl", 5), ("tx", 6)]
    assert {"measured_at", "latency"} <= set(every.columns)
    assert _records(params, "cpu-avx2", ["tb", "th"])["task_id"].unique().to_list() == ["tb"]

    raw["train"]["sources"] = ["reference"]
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(raw))
    reference = load_params(tmp_path / "params.yaml", check_models=False)
    assert sorted(_records(reference, "cpu-avx2", None)["task_id"].unique()) == ["ta", "tb"]


def test_tuning_records_of_training_tasks_join_the_subset_unselected(tmp_path):
    """A tuning run's records were measured on the device by the search itself: they join the
    device's subset without a selection (the flywheel), a held-out task's never, and none with
    train.sources that leave tuning out. The held-out networks are never scored on them."""
    from test_status import _zoo
    from test_store import rows

    from tcl.dataset import evaluation_records
    from tcl.pipeline.continual import _records, tuning_ids
    from tcl.pipeline.params import load_params
    from tcl.store.records import RecordStore

    raw = yaml.safe_load((ROOT / "tests" / "tiny_params.yaml").read_text())
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(raw))
    params = load_params(tmp_path / "params.yaml", check_models=False)
    _zoo(params)   # ta, tb: bert_tiny's training tasks; th: held out
    offset = 0
    for task, n, source in (("ta", 2, "collect"), ("ta", 3, "tune:bert_tiny-b4-128"),
                            ("tb", 2, "tune"), ("th", 4, "tune:bert_tiny-b1-128")):
        RecordStore(params.paths).append(
            [dict(r, source=source) for r in rows(task=task, n=n, offset=offset)])
        offset += n
    records = _records(params, "cpu-avx2", None)
    assert tuning_ids(params, records) == {"p2", "p3", "p4", "p5", "p6"}
    # nor is a held-out network scored on a tuning run's picks: only on what every device
    # measures (ta's collected records here; th's are all a tuning run's)
    assert evaluation_records(params.paths, "cpu-avx2")["program_id"].to_list() == ["p0", "p1"]

    raw["train"]["sources"] = ["reference"]
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(raw))
    reference = load_params(tmp_path / "params.yaml", check_models=False)
    assert tuning_ids(reference, _records(reference, "cpu-avx2", None)) == set()


def test_a_chain_made_again_leaves_the_family_out_and_the_real_registry_alone(tmp_path):
    """benchmarks/chain_model.py: a family's tasks are every task its networks run, and the
    scratch root shares the data root's every entry but its models (a registry of its own)."""
    from conftest import benchmark_module
    from test_status import _zoo

    from tcl.pipeline.params import load_params

    raw = yaml.safe_load((ROOT / "tests" / "tiny_params.yaml").read_text())
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(raw))
    params = load_params(tmp_path / "params.yaml", check_models=False)
    _zoo(params)   # bert_tiny: th (held out), ta, tb; swin_t: tl
    (params.paths.models_dir / "registry").mkdir(parents=True)
    with benchmark_module("chain_model") as chain:
        assert chain.family_task_ids(params.paths, "bert") == {"th", "ta", "tb"}
        assert chain.family_task_ids(params.paths, "swin_t") == {"tl"}
        with pytest.raises(TclError, match="family 'bertt': expected one of .*bert"):
            chain.family_task_ids(params.paths, "bertt")
        root = chain.scratch_root(params.paths.root, tmp_path / "scratch")
    assert (root / "zoo").resolve() == params.paths.zoo_dir.resolve()
    assert not (root / "models").exists()   # the scratch registry's files stay in the scratch
    (root / "models").mkdir()
    (root / "models" / "registry.duckdb").write_text("")
    assert not (params.paths.models_dir / "registry.duckdb").exists()


def test_cross_host_pairs_say_what_differs_and_seeds_show_their_count():
    """benchmarks/cross_host.py labels each pair by what differs (host, code, both), and the
    benchmarks' mean ± standard error says how many repeats stand behind fewer than five."""
    from conftest import benchmark_module

    haswell, znver4 = {"kind": "llvm", "mcpu": "haswell"}, {"kind": "llvm", "mcpu": "znver4"}
    targets = {"zen1": haswell, "zen4-haswell": haswell, "zen4": znver4}
    hosts = {"zen1": "Zen 1", "zen4-haswell": "Zen 4", "zen4": "Zen 4"}
    with benchmark_module("cross_host") as cross:
        assert cross.differs("zen1", "zen4-haswell", targets, hosts) == "host only"
        assert cross.differs("zen4", "zen4-haswell", targets, hosts).startswith("code only")
        assert cross.differs("zen1", "zen4", targets, hosts) == "host and code"
        assert cross.mean_se([0.5]) == "0.500 (n=1)"
        assert cross.mean_se([0.4, 0.6, float("nan"), None]) == "0.500 ± 0.100 (n=2)"
        assert cross.mean_se([1, 2, 3, 4, 5], digits=1) == "3.0 ± 0.7"
