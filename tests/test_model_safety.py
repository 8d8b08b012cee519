"""Model files are data (issue 22, "Safe to share"): a crafted file runs no code wherever a model
is loaded (load_model, tcl predict --model FILE, a replaced registry file, a replaced
models/<device>/<kind>.model), older files are converted only by `tcl models convert`, the
registry checks its content hash, and every command that takes a model refuses another device's
with one rule and one --any-device flag. Issue 38: every file records its device, kind and
content hash and a load checks them; a failed training keeps the models it would replace. Tiny
models (untrained, or XGBoost fitted in a second): no TVM builds."""
from __future__ import annotations

import base64
import json
import os
import pickle
from pathlib import Path

import numpy as np
import pytest
import torch

from tcl.cli import main
from tcl.config import TclError
from tcl.models import load_model, make_model
from tcl.models.checkpoint import plain, read_checkpoint

torch.set_num_threads(1)
DEVICE, OTHER = "cpu-avx2", "cpu-sse42"
TINY = {"tenset-mlp": dict(hidden=8), "mamba": dict(d_model=8, n_layers=1, d_state=4),
        "tlp": dict(hidden=(8, 8, 8, 8), decoder=(8,), heads=2, max_tokens=8)}


class Payload:
    """What a crafted model file holds: unpickling it runs a shell command that creates
    ``marker``. (Defined here, so the full unpickler finds it; the safe one refuses it.)"""

    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self):
        return os.system, (f"touch '{self.marker}'",)


def crafted(path: Path, marker: Path, kind: str = "tenset-mlp", raw: int = 0) -> Path:
    """A model file with a payload: a torch checkpoint naming a kind (``raw``: a bare pickle of
    that protocol)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if raw:
        path.write_bytes(pickle.dumps({"kind": kind, "x": Payload(marker)}, protocol=raw))
    else:
        torch.save({"kind": kind, "version": 1, "config": {}, "state_dict": {},
                    "x": Payload(marker)}, path)
    return path


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def tiny_continual(devices: list[str], seed: int = 0):
    from tcl.continual import MultiDeviceModel

    return MultiDeviceModel("tenset-mlp", devices, dict(TINY["tenset-mlp"]), seed=seed,
                            device="cpu")


def register(paths, model, device: str = DEVICE):
    from tcl.registry import ModelRegistry

    return ModelRegistry(paths).register(model, device=device, parent=None, method="scratch",
                                         snapshot=f"s-{model.content_hash()}", n_records=1,
                                         newest_measured_at=None)


def add_records(paths, device: str = DEVICE) -> None:
    """Measured records of one task for ``device`` (enough for score to reach the model)."""
    from tcl.store.records import RecordStore, now_utc, record_id

    trace = json.dumps([[["Split", [], [1], []]], []])
    RecordStore(paths).append([{
        "record_id": record_id(device, "t1", trace), "program_id": "p1", "device": device,
        "host_cpu": "cpu", "target": "{}", "task_id": "t1", "trace_json": trace,
        "latencies": [1e-3] * 3, "status": "ok", "error": None, "build_secs": 0.1,
        "source": "test", "measured_at": now_utc(), "tvm_version": "0.27"}])


# -- 1. no code from data ------------------------------------------------------------------------
def test_the_payload_is_live_under_the_full_unpickler(tmp_path):
    """The control: the files these tests craft do run their command when fully unpickled, so
    a missing marker elsewhere means the payload was refused, not that it was harmless."""
    marker = tmp_path / "MARKER"
    torch.load(crafted(tmp_path / "m.model", marker), weights_only=False)
    assert marker.exists()


@pytest.mark.parametrize("raw", [0, 2, pickle.HIGHEST_PROTOCOL],
                         ids=["torch-checkpoint", "pickle-2", "pickle-highest"])
def test_load_model_refuses_a_crafted_file_and_runs_nothing(tmp_path, raw):
    """torch's format and a bare pickle of protocol 2 reach the payload's global: refused as
    objects, not offered to the convert command (issue 54); a newer protocol stops the safe
    reader earlier (its FRAME opcode): refused as unreadable. Either way, the file is named
    and nothing runs."""
    from tcl.models import MODEL_KINDS

    marker = tmp_path / "MARKER"
    f = crafted(tmp_path / "evil.model", marker, raw=raw)
    why = r"refused; tcl never writes such a file" if raw in (0, 2) else \
        "is not a readable tcl model file"
    with pytest.raises(TclError, match=rf"evil\.model {'.*' if raw in (0, 2) else ''}{why}"):
        load_model(f)
    for kind in ("tenset-mlp", "mamba", "tlp", "continual"):   # each kind's own load too
        with pytest.raises(TclError, match=why):
            MODEL_KINDS[kind].load(f)
    assert not marker.exists()


def test_predict_refuses_a_crafted_model_file(paths, tmp_path, capsys):
    marker = tmp_path / "MARKER"
    f = crafted(tmp_path / "evil.model", marker)
    (tmp_path / "db").mkdir()
    code, _, err = run(capsys, "--data", str(paths.root), "predict", str(tmp_path / "db"),
                       "--device", DEVICE, "--model", str(f))
    assert code == 2 and str(f) in err and "tcl models convert" not in err
    assert not marker.exists()


def test_a_replaced_trained_model_file_is_refused_by_every_command(paths, tmp_path, capsys):
    """data/models/<device>/xgb.model (JSON normally) replaced by a crafted checkpoint:
    predict and score by kind, and load_model, refuse it; nothing runs."""
    marker = tmp_path / "MARKER"
    f = crafted(paths.models_dir / DEVICE / "xgb.model", marker, kind="xgb")
    add_records(paths)
    (tmp_path / "db").mkdir()
    for argv in (["predict", str(tmp_path / "db")], ["score"]):
        code, _, err = run(capsys, "--data", str(paths.root), *argv, "--device", DEVICE,
                           "--model", "xgb")
        assert code == 2 and "xgb.model" in err and "tcl models convert" not in err, err
    with pytest.raises(TclError, match="refused"):
        load_model(f)
    assert not marker.exists()


def test_an_xgb_file_cannot_smuggle_a_pickle_into_its_booster(tmp_path):
    """The xgb format is JSON; its booster bytes go to XGBoost's UBJSON reader, never pickle."""
    marker = tmp_path / "MARKER"
    f = tmp_path / "xgb.model"
    f.write_text(json.dumps({"kind": "xgb", "version": 1, "params": {}, "best_iteration": 0,
                             "booster_ubj": base64.b64encode(pickle.dumps(Payload(marker)))
                             .decode()}))
    with pytest.raises(TclError, match=r"xgb\.model: its booster is not an XGBoost UBJSON"):
        load_model(f)
    f.write_text(json.dumps({"kind": "xgb", "version": 1, "params": ["x"]}))
    with pytest.raises(TclError, match=r"xgb\.model is not an xgb model file"):
        load_model(f)
    assert not marker.exists()


def test_a_replaced_registry_file_is_refused_naming_both_hashes(paths, tmp_path, capsys):
    model = tiny_continual([DEVICE])
    entry = register(paths, model)
    f = paths.root / entry.path
    original = f.read_bytes()
    (tmp_path / "db").mkdir()
    # a crafted file in its place: refused by the safe reader, nothing runs; and not offered
    # to `tcl models convert`, which would run it (issue 38)
    marker = tmp_path / "MARKER"
    crafted(f, marker, kind="continual")
    code, _, err = run(capsys, "--data", str(paths.root), "predict", str(tmp_path / "db"),
                       "--device", DEVICE)
    assert code == 2 and entry.id in err and "replaced or changed" in err, err
    assert "tcl models convert" not in err and not marker.exists()
    # another valid model in its place: the content hash differs, refused before use
    tiny_continual([DEVICE], seed=1).save(f)
    from tcl.registry import ModelRegistry

    with pytest.raises(TclError) as e:
        ModelRegistry(paths).load(entry)
    message = str(e.value)
    assert entry.content_hash in message and str(f) in message and entry.id in message
    other = tiny_continual([DEVICE], seed=1).content_hash()
    assert other in message
    f.write_bytes(original)                       # restored: loads, the same weights
    assert ModelRegistry(paths).load(entry).content_hash() == entry.content_hash


# -- what tcl writes reads back as data ------------------------------------------------------------
def test_every_model_kind_saves_what_the_safe_reader_reads(tmp_path):
    from tcl.models.nn import synthetic_programs

    models = {kind: make_model(kind, device="cpu", **kw) for kind, kw in TINY.items()}
    models["continual"] = tiny_continual(["a", "b"])
    for kind, model in models.items():
        f = tmp_path / f"{kind}.model"
        model.save(f)
        blob = torch.load(f, map_location="cpu", weights_only=True)   # raises if not data
        assert blob["kind"] == kind and type(load_model(f)).__name__ == type(model).__name__
    xgb = make_model("xgb", num_boost_round=2, nthread=1).fit(
        synthetic_programs(4, 8, stores=(1, 3), tokens=(2, 4)))
    xgb.save(tmp_path / "xgb.model")
    assert json.loads((tmp_path / "xgb.model").read_text())["kind"] == "xgb"


def test_plain_turns_numpy_into_tensors_and_refuses_other_objects():
    got = plain({"a": np.arange(3, dtype=np.float32), "b": np.float64(0.5), "c": (1, "x"),
                 "d": Path("p"), "e": [None, True]})
    assert torch.equal(got["a"], torch.arange(3, dtype=torch.float32))
    assert got["b"] == 0.5 and type(got["b"]) is float and got["c"] == (1, "x")
    assert got["d"] == "p" and got["e"] == [None, True]
    with pytest.raises(TclError, match=r"checkpoint\['x'\] is a Payload"):
        plain({"x": Payload(Path("never"))})


def test_an_old_file_is_refused_then_converted_once_by_the_command(tmp_path, capsys):
    """An older file (numpy values where tensors and floats belong) needs the full unpickler:
    refused, naming the command; `tcl models convert` rewrites it, read as data only, and
    keeps the original; afterwards it loads as data, with the same weights."""
    model = make_model("tenset-mlp", device="cpu", **TINY["tenset-mlp"])
    state = {k: v.numpy().copy() for k, v in model.net.state_dict().items()}
    f = tmp_path / "old.model"
    torch.save({"kind": "tenset-mlp", "version": model.version,
                "config": {**model.config, "lr": np.float64(model.config["lr"])},
                "state_dict": state}, f)
    with pytest.raises(TclError, match=r"old\.model.*`tcl models convert .*old\.model`"):
        load_model(f)
    code, out, err = run(capsys, "models", "convert", str(f))
    assert code == 0 and "converted" in out and "read as data only" in out, err
    assert (tmp_path / "old.model.pre-convert").read_bytes() != f.read_bytes()
    back = load_model(f)
    for k, v in model.net.state_dict().items():
        assert torch.equal(back.net.state_dict()[k], v)
    code, out, _ = run(capsys, "models", "convert", str(f))
    assert code == 0 and "already readable" in out
    code, _, err = run(capsys, "models", "convert", str(tmp_path / "missing.model"))
    assert code == 2 and "missing.model does not exist" in err


def test_read_checkpoint_names_a_garbage_file(tmp_path):
    f = tmp_path / "junk.model"
    f.write_bytes(b"\x00 not a model")
    with pytest.raises(TclError, match=r"junk\.model is not a readable tcl model file"):
        read_checkpoint(f)
    with pytest.raises(TclError, match="does not exist"):
        read_checkpoint(tmp_path / "none.model")


# -- 2. another device's model ---------------------------------------------------------------------
def _other_device_model(tmp_path) -> Path:
    f = tmp_path / "m.model"
    make_model("tenset-mlp", device="cpu", **TINY["tenset-mlp"]).save(f)
    f.with_suffix(".json").write_text(json.dumps({"device": OTHER, "kind": "tenset-mlp"}))
    return f


def test_model_devices_reads_heads_training_facts_and_place(paths, tmp_path):
    from tcl.resolve import check_model_device, model_devices

    f = _other_device_model(tmp_path)
    assert model_devices(paths, f) == ([OTHER], str(f.with_suffix(".json")))
    placed = paths.models_dir / OTHER / "tlp.model"          # no training facts beside it
    placed.parent.mkdir(parents=True)
    make_model("tlp", device="cpu", **TINY["tlp"]).save(placed)
    assert model_devices(paths, placed)[0] == [OTHER]
    assert model_devices(paths, tmp_path / "loose.model") == ([], "")
    both = tiny_continual(["a", "b"])
    assert model_devices(paths, f, both) == (["a", "b"], "the devices it serves")
    check_model_device(f, (["a", "b"], "x"), "b", False)    # served: fine
    check_model_device(f, ([], ""), "b", False)             # nothing says: fine
    with pytest.raises(TclError, match=r"trained on device 'a', 'b' \(x\), not 'c'.*--any-device"):
        check_model_device(f, (["a", "b"], "x"), "c", False)
    check_model_device(f, (["a", "b"], "x"), "c", True)


def test_predict_score_and_tune_refuse_another_devices_model_unless_any_device(
        paths, tmp_path, capsys, monkeypatch):
    """The CLI end to end for predict and score; tune through cost_model_for, the call
    tune_network makes (a real `tcl tune` first spends ~20 s importing MetaSchedule), and its
    CLI passes --any-device on to it."""
    import tcl.cli.tune
    import tcl.tune
    from tcl.resolve import resolve_model

    f = _other_device_model(tmp_path)
    add_records(paths)
    db = tmp_path / "db"
    db.mkdir()
    refused = f"trained on device '{OTHER}'"
    for argv in (["predict", str(db)], ["score"]):
        code, _, err = run(capsys, "--data", str(paths.root), *argv, "--device", DEVICE,
                           "--model", str(f))
        assert code == 2 and refused in err and f"not '{DEVICE}'" in err \
            and "--any-device" in err, (argv, err)
    with pytest.raises(TclError, match=rf"{refused} .*not '{DEVICE}'.*--any-device"):
        tcl.tune.cost_model_for(paths, DEVICE, str(f), "none")
    # --any-device: the model is taken and the command goes on to its next step (predict's:
    # reading the database, stubbed here: MetaSchedule's import alone takes ~20 s)
    import tcl.measure.msjson

    def reached(work_dir):
        raise TclError(f"reached {work_dir}")

    monkeypatch.setattr(tcl.measure.msjson, "read_programs", reached)
    code, _, err = run(capsys, "--data", str(paths.root), "predict", str(db), "--device", DEVICE,
                       "--model", str(f), "--any-device")
    assert code == 2 and refused not in err and f"reached {db}" in err, err
    code, _, err = run(capsys, "--data", str(paths.root), "score", "--device", DEVICE,
                       "--model", str(f), "--any-device")
    assert code == 2 and refused not in err and "no workload" in err, err
    got = resolve_model(paths, DEVICE, str(f), any_device=True)   # what tune gets
    assert got.what == str(f) and got.model.kind == "tenset-mlp"
    seen = {}
    # the name `tcl tune` calls: tcl.cli.tune imports it at its top
    monkeypatch.setattr(tcl.cli.tune, "tune_network", lambda *a, **kw: seen.update(kw) or 1 / 0)
    run(capsys, "--data", str(paths.root), "tune", "--network", "n", "--device", DEVICE,
        "--model", str(f), "--any-device")
    assert seen["any_device"] is True


def test_a_continual_model_serving_other_devices_is_refused(paths, tmp_path, capsys):
    f = tmp_path / "c.model"
    tiny_continual([OTHER]).save(f)
    (tmp_path / "db").mkdir()
    code, _, err = run(capsys, "--data", str(paths.root), "predict", str(tmp_path / "db"),
                       "--device", DEVICE, "--model", str(f))
    assert code == 2 and "the devices it serves" in err and f"'{OTHER}'" in err, err
    from tcl.resolve import resolve_model

    model = resolve_model(paths, DEVICE, str(f), any_device=True).model
    assert model.target == OTHER                       # its own head scores


def test_resolve_model_takes_every_spec_form(paths):
    """Issue 41: one rule for which model a step uses: a kind, a file, latest (and its fallback
    to a trained kind), DEVICE/latest and */latest (a teacher), DEVICE/KIND and */KIND, none."""
    from tcl.resolve import resolve_model

    def tiny(f: Path) -> Path:
        f.parent.mkdir(parents=True, exist_ok=True)
        make_model("tenset-mlp", device="cpu", **TINY["tenset-mlp"]).save(f)
        return f

    tiny(paths.model_file(DEVICE, "tenset-mlp"))
    tiny(paths.model_file(OTHER, "tenset-mlp"))
    root = paths.root.name
    for spec in ("tenset-mlp", "latest", None):    # a kind; latest with nothing registered
        got = resolve_model(paths, DEVICE, spec)
        assert (got.what, got.entry) == (f"{root}/models/{DEVICE}/tenset-mlp.model", None), spec
    loose = tiny(paths.root / "loose.model")       # a file: named relative to the data root
    assert resolve_model(paths, DEVICE, str(loose)).what == f"{root}/loose.model"
    for spec in (f"{OTHER}/tenset-mlp", "*/tenset-mlp"):   # another device's: on purpose only
        assert resolve_model(paths, DEVICE, spec, any_device=True).what == f"{OTHER}/tenset-mlp"
        with pytest.raises(TclError, match=f"trained on device '{OTHER}'.*--any-device"):
            resolve_model(paths, DEVICE, spec)

    mine = register(paths, tiny_continual([DEVICE]), DEVICE)
    theirs = register(paths, tiny_continual([DEVICE, OTHER], seed=1), OTHER)
    got = resolve_model(paths, DEVICE, "latest")
    assert (got.what, got.entry.id, got.model.target) == (f"registry {mine.id}", mine.id, DEVICE)
    for spec in (f"{OTHER}/latest", "*/latest"):  # another device's newest (its head): a teacher
        got = resolve_model(paths, DEVICE, spec)      # it serves DEVICE too: no refusal
        assert (got.what, got.entry.id, got.model.target) == (f"registry {theirs.id}",
                                                              theirs.id, OTHER), spec
    assert resolve_model(paths, DEVICE, "*/latest", backbone="mamba", optional=True) is None
    with pytest.raises(TclError, match=r"trained on device 'cpu-avx2' \(the devices it serves"):
        resolve_model(paths, OTHER, f"{DEVICE}/latest")

    assert resolve_model(paths, DEVICE, "none", optional=True) is None
    with pytest.raises(TclError, match="model 'none': this step needs a model"):
        resolve_model(paths, DEVICE, "none")
    assert resolve_model(paths, DEVICE, "mamba", optional=True) is None   # nothing there
    with pytest.raises(TclError, match=rf"{OTHER}/mamba: .* does not exist"):
        resolve_model(paths, DEVICE, f"{OTHER}/mamba")
    with pytest.raises(TclError, match="no registered continual model serves device 'x'"):
        resolve_model(paths, "x", "continual")


def test_load_false_names_the_same_model_without_reading_it_and_refuses_the_same(paths):
    """Issue 56: dry runs and the refresh name a model with ``resolve_model(..., load=False)``:
    the answer the loading call gives (what, registry row), no model read, the same refusals."""
    from tcl.resolve import resolve_model

    paths.model_file(OTHER, "tenset-mlp").parent.mkdir(parents=True)
    make_model("tenset-mlp", device="cpu", **TINY["tenset-mlp"]).save(
        paths.model_file(OTHER, "tenset-mlp"))
    (paths.model_file(OTHER, "xgb")).write_bytes(b"not read")   # a load would refuse it
    theirs = register(paths, tiny_continual([OTHER]), OTHER)
    for spec in ("*/latest", f"{OTHER}/latest", "*/tenset-mlp", f"{OTHER}/tenset-mlp"):
        loaded = resolve_model(paths, DEVICE, spec, any_device=True)
        named = resolve_model(paths, DEVICE, spec, any_device=True, load=False)
        assert named.model is None and loaded.model is not None, spec
        assert (named.what, named.entry) == (loaded.what, loaded.entry), spec
    assert resolve_model(paths, OTHER, "continual", load=False).entry.id == theirs.id
    assert resolve_model(paths, OTHER, "xgb", load=False).what.endswith("xgb.model")
    for spec in (f"{OTHER}/tenset-mlp", f"{OTHER}/latest"):   # another device's: still refused
        with pytest.raises(TclError, match=f"trained on device '{OTHER}'"):
            resolve_model(paths, DEVICE, spec, load=False)
    assert resolve_model(paths, DEVICE, "*/mamba", load=False, optional=True) is None


def test_the_cold_start_is_one_default_for_collect_select_and_add_device(paths):
    """Issue 56: one cold-start default (tcl.resolve.COLD_START), named once: another device's
    newest registered continual model, else its trained tenset-mlp, then mamba. `tcl collect
    --select` takes the first found; the add-device run takes a registered one only (it distills
    its teacher); a selection's later rounds train its first kind."""
    from tcl.measure.active import Selection
    from tcl.resolve import COLD_START, cold_start_model

    assert COLD_START == ("*/latest", "*/tenset-mlp", "*/mamba")
    assert Selection().round_model == "tenset-mlp"
    assert cold_start_model(paths, DEVICE) is None
    f = paths.model_file(OTHER, "mamba")
    f.parent.mkdir(parents=True)
    make_model("mamba", device="cpu", **TINY["mamba"]).save(f)
    assert cold_start_model(paths, DEVICE).what == f"{OTHER}/mamba"
    assert cold_start_model(paths, DEVICE, registered=True) is None
    make_model("tenset-mlp", device="cpu", **TINY["tenset-mlp"]).save(
        paths.model_file(OTHER, "tenset-mlp"))
    assert cold_start_model(paths, DEVICE).what == f"{OTHER}/tenset-mlp"
    theirs = register(paths, tiny_continual([OTHER]), OTHER)
    for registered in (False, True):
        got = cold_start_model(paths, DEVICE, registered=registered, load=False)
        assert (got.entry.id, got.model) == (theirs.id, None)
    assert cold_start_model(paths, DEVICE, backbone="mamba").what == f"{OTHER}/tenset-mlp"
    assert cold_start_model(paths, DEVICE, backbone="mamba", registered=True) is None


def test_any_device_is_one_flag_on_every_command_that_takes_a_model():
    from tcl.cli import build_parser

    parser = build_parser()
    helps = set()
    for argv in (["predict", "d", "--device", "x"], ["score", "--device", "x"],
                 ["tune", "--network", "n", "--device", "x"]):
        assert parser.parse_args(argv + ["--any-device"]).any_device is True
        assert parser.parse_args(argv).any_device is False
        sub = parser._subparsers._group_actions[0].choices[argv[0]]
        helps |= {a.help for a in sub._actions if "--any-device" in a.option_strings}
    assert len(helps) == 1


# -- 3. a failed training keeps the models it would replace (issue 38) -----------------------------
def training_root(paths) -> None:
    """Records and cached features of three tasks on DEVICE (no zoo, no TVM): enough to fit."""
    import polars as pl

    from tcl.features import FEATURE_SCHEMA
    from tcl.store.records import RecordStore, write_parquet_atomic
    from tcl.tokens import PER_STORE_WIDTH, TOKEN_WIDTH
    from test_store import rows

    rng = np.random.default_rng(0)
    for k, t in enumerate(("t1", "t2", "t3")):
        RecordStore(paths).append(rows(task=t, n=4, offset=4 * k))
        write_parquet_atomic(pl.DataFrame(
            [{"program_id": f"p{i}", "task_id": t, "n_stores": 1, "n_tokens": 1,
              "per_store": rng.random(PER_STORE_WIDTH), "tokens": rng.random(TOKEN_WIDTH)}
             for i in range(4 * k, 4 * k + 4)], schema=FEATURE_SCHEMA), paths.features_file(t))


def test_a_failed_training_leaves_the_previous_models_intact(paths, monkeypatch):
    """Issue 38: a `tcl train` that failed (a features file missing) had first deleted the
    device's seed models. Fits go to a staging folder and replace the models only once every
    one succeeded; a seed no longer asked for goes only then."""
    import tcl.train
    from tcl.train import train_seeds

    training_root(paths)
    xgb = {"num_boost_round": 2, "nthread": 1}
    files = train_seeds(paths, DEVICE, "xgb", xgb, seeds=[0, 1], workers=1)
    models = paths.models_dir / DEVICE
    before = {p: p.read_bytes() for p in models.rglob("*") if p.is_file()}
    assert files == [paths.model_file(DEVICE, "xgb"), paths.model_file(DEVICE, "xgb", 1)]
    assert len(before) == 4                                   # two models, two training facts
    paths.features_file("t2").unlink()
    with pytest.raises(TclError, match="features not computed"):
        train_seeds(paths, DEVICE, "xgb", {**xgb, "num_boost_round": 3}, seeds=[0, 1],
                    workers=1)
    assert {p: p.read_bytes() for p in models.rglob("*") if p.is_file()} == before
    training_root(paths)
    real = tcl.train.make_model                               # the second seed's fit fails,
    monkeypatch.setattr(tcl.train, "make_model",              # after the first one's was saved
                        lambda kind, **kw: 1 / 0 if kw["seed"] == 1 else real(kind, **kw))
    with pytest.raises(ZeroDivisionError):
        train_seeds(paths, DEVICE, "xgb", {**xgb, "num_boost_round": 3}, seeds=[0, 1],
                    workers=1)
    assert {p: p.read_bytes() for p in models.rglob("*") if p.is_file()} == before
    assert sorted(p.name for p in models.iterdir()) == ["xgb.json", "xgb.model", "xgb.seeds"]
    monkeypatch.undo()
    train_seeds(paths, DEVICE, "xgb", xgb, seeds=[0], workers=1)   # one seed now: s1 goes
    assert paths.model_file(DEVICE, "xgb").read_bytes() != b"" and \
        list(paths.seeds_dir(DEVICE, "xgb").iterdir()) == []


def test_a_fit_whose_inputs_are_unchanged_is_reused_and_a_new_record_refits(paths):
    """Nothing recomputed that did not change (issue 53, point 2): training facts hold the fit's
    inputs key (records, knobs, seed, features version, fitting code); the same inputs reuse
    the model, a new record of the device or other knobs fit again."""
    from test_store import rows
    from tcl.store.records import RecordStore
    from tcl.train import train_seeds

    training_root(paths)
    xgb = {"num_boost_round": 2, "nthread": 1}
    said = []
    files = train_seeds(paths, DEVICE, "xgb", xgb, seeds=[0, 1], workers=1)
    stamp = {f: f.stat().st_mtime_ns for f in files}
    assert all(json.loads(f.with_suffix(".json").read_text())["inputs"] for f in files)

    import tcl.train
    tcl.train.train_many(paths, [(DEVICE, "xgb", xgb)], seeds=[0, 1], workers=1,
                         say=said.append)
    assert {f: f.stat().st_mtime_ns for f in files} == stamp          # not fitted again
    assert said and "reused" in said[0] and "xgb" in said[0]

    tcl.train.train_many(paths, [(DEVICE, "xgb", {**xgb, "eta": 0.1})], seeds=[0, 1],
                         workers=1, say=said.append)
    assert all(f.stat().st_mtime_ns != stamp[f] for f in files)       # other knobs: fit again
    stamp = {f: f.stat().st_mtime_ns for f in files}

    RecordStore(paths).append(rows(task="t3", n=1, offset=20))        # a new record of t3
    import polars as pl
    from tcl.features import FEATURE_SCHEMA, load_features
    from tcl.store.records import write_parquet_atomic
    have = load_features(paths, ["t3"])
    extra = have.head(1).with_columns(pl.lit("p20").alias("program_id"))
    write_parquet_atomic(pl.concat([have, extra]).cast(FEATURE_SCHEMA), paths.features_file("t3"))
    tcl.train.train_many(paths, [(DEVICE, "xgb", {**xgb, "eta": 0.1})], seeds=[0, 1],
                         workers=1, say=said.append)
    assert all(f.stat().st_mtime_ns != stamp[f] for f in files)


@pytest.mark.parametrize("kind", ["xgb", "tenset-mlp", "mamba", "tlp"])
@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_non_finite_features_are_refused_naming_the_features_file(paths, capsys, kind, bad):
    """Issue 54: XGBoost trained on all-NaN features with rc 0 and no warning; Mamba refused
    them without naming the file. Every kind is refused at one edge, the features file named,
    and nothing is written under models/."""
    import polars as pl

    from tcl.store.records import write_parquet_atomic
    from tcl.train import train_seeds

    training_root(paths)
    for t in ("t1", "t2", "t3"):   # tokens a neural kind takes: column 0 a vocabulary id
        f = paths.features_file(t)
        frame = pl.read_parquet(f)
        frame = frame.with_columns(tokens=pl.Series([[1.0, *v[1:]] for v in frame["tokens"]],
                                                    dtype=pl.List(pl.Float32)))
        if t == "t2":   # every feature of t2's programs NaN (or infinite)
            frame = frame.with_columns(pl.col("per_store").list.eval(pl.element() * bad))
        write_parquet_atomic(frame, f)
    with pytest.raises(TclError) as e:
        train_seeds(paths, DEVICE, kind, dict(TINY.get(kind, {"num_boost_round": 2}),
                                              epochs=1) if kind != "xgb" else
                    {"num_boost_round": 2, "nthread": 1}, seeds=[0], workers=1)
    message = str(e.value)
    assert str(paths.features_file("t2")) in message, message
    assert "NaN or infinite" in message and "p4" in message, message
    assert not paths.model_file(DEVICE, kind).exists()



# -- 4. every model file is checked: device, kind, contents (issue 38) ----------------------------
def test_a_trained_model_file_names_its_device_wherever_it_is_copied(paths, tmp_path, capsys):
    """A model file copied out of models/<device>/ without its training facts was taken by
    another device's predict and score; the file now records its device itself."""
    import shutil

    from tcl.resolve import resolve_model
    from tcl.train import train_seeds

    training_root(paths)
    (trained,) = train_seeds(paths, DEVICE, "xgb", {"num_boost_round": 2, "nthread": 1},
                             seeds=[0], workers=1)
    loose = shutil.copy(trained, tmp_path / "loose.model")
    add_records(paths, OTHER)
    (tmp_path / "db").mkdir()
    for argv in (["predict", str(tmp_path / "db")], ["score"]):
        code, _, err = run(capsys, "--data", str(paths.root), *argv, "--device", OTHER,
                           "--model", str(loose))
        assert code == 2 and len(err.splitlines()) == 1, err
        assert f"trained on device '{DEVICE}' (recorded in the file), not '{OTHER}'" in err, err
    model = resolve_model(paths, OTHER, str(loose), any_device=True).model   # the way out
    assert model.made_for == DEVICE


def damage_a_tensor(f: Path) -> None:
    """Flip one byte of the first tensor's data in a torch file (stored zip parts: the bytes
    lie as they are, and torch checks no CRC)."""
    import zipfile

    with zipfile.ZipFile(f) as z:
        info = next(i for i in z.infolist() if "/data/" in i.filename)
    raw = bytearray(f.read_bytes())
    start = info.header_offset + 30 + len(info.filename.encode()) + \
        int.from_bytes(raw[info.header_offset + 28:info.header_offset + 30], "little")
    raw[start] ^= 0xFF
    f.write_bytes(bytes(raw))


def test_a_damaged_checkpoint_is_one_line_naming_the_file(paths, tmp_path, capsys):
    """A byte flipped inside a checkpoint's weights loaded silently as other weights (torch
    checks no zip CRC): now refused, naming the file."""
    f = tmp_path / "m.model"
    make_model("tenset-mlp", device="cpu", **TINY["tenset-mlp"]).save(f)
    damage_a_tensor(f)
    with pytest.raises(TclError, match=r"m\.model is damaged: its part .* fails its CRC"):
        load_model(f)
    (tmp_path / "db").mkdir()
    code, _, err = run(capsys, "--data", str(paths.root), "predict", str(tmp_path / "db"),
                       "--device", DEVICE, "--model", str(f))
    assert code == 2 and len(err.splitlines()) == 1 and f"{f} is damaged" in err, err


def test_a_changed_model_file_is_refused_by_its_recorded_content_hash(tmp_path):
    """Every file tcl writes records the hash of its contents; an xgb file (JSON: no CRC)
    whose booster or params were edited is refused."""
    from tcl.models.nn import synthetic_programs

    f = tmp_path / "xgb.model"
    make_model("xgb", num_boost_round=2, nthread=1).fit(
        synthetic_programs(4, 8, stores=(1, 3), tokens=(2, 4))).save(f)
    doc = json.loads(f.read_text())
    f.write_text(json.dumps({**doc, "best_iteration": doc["best_iteration"] + 1}))
    with pytest.raises(TclError, match=r"xgb\.model is damaged or was changed .* hash to"):
        load_model(f)


def test_a_file_of_another_kind_under_a_kinds_name_is_refused(paths, tmp_path, capsys):
    """An xgb model saved as models/<device>/mamba.model was taken as the mamba model."""
    from tcl.models.nn import synthetic_programs

    f = paths.model_file(DEVICE, "mamba")
    f.parent.mkdir(parents=True)
    make_model("xgb", num_boost_round=2, nthread=1).fit(
        synthetic_programs(4, 8, stores=(1, 3), tokens=(2, 4))).save(f)
    add_records(paths)
    (tmp_path / "db").mkdir()
    for argv in (["predict", str(tmp_path / "db")], ["score"]):
        code, _, err = run(capsys, "--data", str(paths.root), *argv, "--device", DEVICE,
                           "--model", "mamba")
        assert code == 2 and len(err.splitlines()) == 1, err
        assert "holds a 'xgb' model, not the 'mamba' model asked for" in err, err
    with pytest.raises(TclError, match="holds a 'xgb' model, not the 'mamba'"):
        load_model(f, kind="mamba")


def test_models_convert_runs_nothing_of_a_registry_file_and_checks_its_hash(
        paths, tmp_path, capsys):
    """`tcl models convert` on a registry file ran the full unpickler on whatever was there (a
    swapped file's code) and converted another model under the registered id. It now reads a
    registry file as data only (an older tcl's numpy values allowed) and converts it only if
    it hashes to the registry's record."""
    entry = register(paths, tiny_continual([DEVICE]))
    f = paths.root / entry.path
    original = f.read_bytes()
    marker = tmp_path / "MARKER"
    crafted(f, marker, kind="continual")
    code, _, err = run(capsys, "models", "convert", str(f))
    assert code == 2 and not marker.exists() and "replaced or changed" in err, err
    assert not f.with_name(f.name + ".pre-convert").exists()

    def old_format(model) -> None:   # what an older tcl wrote: numpy where tensors belong
        torch.save({"kind": "continual", "version": model.version, "backbone": model.backbone,
                    "hyper": model.hyper, "devices": model.devices, "target": model.target,
                    "state_dict": {k: v.numpy().copy()
                                   for k, v in model.net.state_dict().items()}}, f)

    old_format(tiny_continual([DEVICE], seed=1))                 # another model, old format
    code, _, err = run(capsys, "models", "convert", str(f))
    assert code == 2 and entry.content_hash in err and "not the recorded" in err, err
    assert not f.with_name(f.name + ".pre-convert").exists()
    old_format(tiny_continual([DEVICE]))                         # the registered one: converted
    code, out, err = run(capsys, "models", "convert", str(f))
    assert code == 0 and "converted" in out, err
    from tcl.registry import ModelRegistry

    assert ModelRegistry(paths).load(entry).content_hash() == entry.content_hash
    f.write_bytes(original)


# -- 5. convert runs nothing that no hash record vouches for (issue 54) ---------------------------
def _payload_in_registry_link(paths, tmp_path, marker) -> Path:
    """A registered model's file replaced by a link to a crafted file outside the registry."""
    f = paths.root / register(paths, tiny_continual([DEVICE])).path
    f.unlink()
    f.symlink_to(crafted(tmp_path / "elsewhere" / "evil.model", marker, kind="continual"))
    return f


def _payload_in_registry_without_table(paths, tmp_path, marker) -> Path:
    """A crafted file in models/registry/ of a root whose registry.duckdb is missing."""
    return crafted(paths.registry_dir / "0123456789abcdef.model", marker, kind="continual")


def _payload_as_trained_kind(paths, tmp_path, marker) -> Path:
    """models/<device>/<kind>.model replaced by a crafted file."""
    return crafted(paths.model_file(DEVICE, "tenset-mlp"), marker)


def _payload_anywhere(paths, tmp_path, marker) -> Path:
    return crafted(tmp_path / "downloaded.model", marker)


@pytest.mark.parametrize("place", [_payload_in_registry_link, _payload_in_registry_without_table,
                                   _payload_as_trained_kind, _payload_anywhere],
                         ids=["registry-link", "registry-without-table", "trained-kind",
                              "anywhere"])
def test_models_convert_never_runs_a_payload_and_no_refusal_offers_it(
        paths, tmp_path, capsys, place):
    """Issue 54: `tcl models convert` ran a payload through a registry file that is a link, a
    registry folder whose registry.duckdb is missing, and a replaced
    models/<device>/<kind>.model, whose refusal named `tcl models convert`. Convert now reads
    every file as data only (an older tcl's numpy values allowed), so no payload runs, and a
    refusal of a file holding other objects never offers the command."""
    marker = tmp_path / "MARKER"
    f = place(paths, tmp_path, marker)
    code, out, err = run(capsys, "models", "convert", str(f))
    assert code == 2 and len(err.splitlines()) == 1 and str(f) in err, (out, err)
    assert "tcl models convert" not in err and not marker.exists(), err
    assert not list(f.parent.glob("*.pre-convert")) and not list(f.parent.glob("*.converted"))
    with pytest.raises(TclError) as e:               # what every command's load says of it
        load_model(f)
    assert "tcl models convert" not in str(e.value) and not marker.exists()


def test_models_convert_refuses_a_registry_file_no_row_vouches_for(paths, tmp_path, capsys):
    """An older tcl's file (numpy values) in models/registry/ is converted only against the
    registry's hash: without registry.duckdb, or without a row naming it, it is refused."""
    model = tiny_continual([DEVICE])
    f = paths.registry_dir / "0123456789abcdef.model"
    f.parent.mkdir(parents=True)
    torch.save({"kind": "continual", "version": model.version, "backbone": model.backbone,
                "hyper": model.hyper, "devices": model.devices, "target": model.target,
                "state_dict": {k: v.numpy().copy() for k, v in model.net.state_dict().items()}},
               f)
    code, _, err = run(capsys, "models", "convert", str(f))
    assert code == 2 and str(f) in err and "registry.duckdb" in err, err
    assert "does not exist" in err and not f.with_name(f.name + ".pre-convert").exists()
    register(paths, tiny_continual([DEVICE], seed=1))   # a registry, but no row names the file
    code, _, err = run(capsys, "models", "convert", str(f))
    assert code == 2 and str(f) in err and "no row" in err, err
    assert not f.with_name(f.name + ".pre-convert").exists()


def test_models_convert_of_a_directory_says_it_is_a_directory(tmp_path, capsys):
    """Issue 54: `tcl models convert DIR` said the file "does not exist"."""
    code, _, err = run(capsys, "models", "convert", str(tmp_path))
    assert code == 2 and f"{tmp_path} is a directory" in err and "does not exist" not in err, err
