"""`tcl tune` end to end on a tiny network: MetaSchedule's search driven by a tcl cost model
(frozen, and as the prior of an online residual model) and by MetaSchedule's random model,
compiled with the tuned database; the compiled module's outputs match PyTorch's; library,
database, curve and summary (with the model's ranking of what the search measured) are written;
the tuning records join the store with source `tune`; a budget below one trial per task is
refused."""
from __future__ import annotations

import json
import textwrap

import polars as pl
import pytest

from tcl.config import Paths, TclError

pytestmark = pytest.mark.slow

NET = textwrap.dedent("""
    import torch
    from torch import nn

    class Tiny(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 8, 3, padding=1)
            self.fc = nn.Linear(8, 4)

        def forward(self, x):
            return self.fc(torch.relu(self.conv(x)).mean((2, 3)))

    def build():
        return Tiny()
""")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from tcl.zoo.user import UserNetworks

    root = tmp_path_factory.mktemp("tune")
    (root / "tiny_net.py").write_text(NET)
    paths = Paths(root / "data")
    inst, _ = UserNetworks(paths).add("tiny", f"{root / 'tiny_net.py'}:build", ["1x3x8x8"])
    return paths, inst, root


SMALL_SEARCH = {"population": 32, "generations": 1}   # MetaSchedule's 512 x 4: 40 s more a run


def _synthetic_model(path):
    """An XGB cost model fitted on synthetic features: it ranks real candidates through the
    adapter (its quality is beside the point here)."""
    from tcl.evaluate import synthetic_data
    from tcl.models import make_model

    programs = synthetic_data(n_tasks=4, programs_per_task=16, n_networks=2, n_holdout=1)[0]
    make_model("xgb", num_boost_round=5, nthread=1).fit(programs).save(path)
    return path


@pytest.mark.parametrize("model, update", [("file", "none"), ("file", "residual"),
                                           ("random", "none")])
def test_tune_compiles_a_network_that_matches_pytorch(tiny, model, update, tmp_path, capfd):
    from tcl.store.catalog import query
    from tcl.tune import TOLERANCE, tune_network

    paths, inst, root = tiny
    which = str(_synthetic_model(tmp_path / "m.model")) if model == "file" else "random"
    out = tmp_path / "run"
    r = tune_network(paths, "tiny", "cpu-avx2", which, trials=8, update=update, out=out,
                     progress=False, **SMALL_SEARCH)
    assert r.network == inst.key and r.tasks >= 2 and r.update == update
    assert (update == "residual") == ("residual" in r.model)
    assert sum(r.trials_per_task.values()) == r.trials and 0 < r.trials <= 8
    assert set(r.trials_per_task) and min(r.trials_per_task.values()) >= 1   # every task tuned
    assert r.max_abs_err <= TOLERANCE["atol"] and r.latency_ms > 0
    for name in ("network.so", "curve.csv", "curve.png", "summary.json"):
        assert (out / name).is_file(), name
    assert (out / "database" / "database_tuning_record.json").stat().st_size > 0
    curve = pl.read_csv(out / "curve.csv")
    assert curve["trials"].to_list() == sorted(curve["trials"].to_list())
    assert json.loads((out / "summary.json").read_text())["trials"] == r.trials
    tuned = query(paths, "select count(*) n from records where source = 'tune'")["n"][0]
    assert tuned >= r.records_added > 0
    summary = json.loads((out / "summary.json").read_text())
    assert r.build_s > 0 and r.run_s > 0 and 0 <= summary["overhead_share"] < 1
    _online_ranking_is_reported(summary, r, frozen=model == "file" and update == "none")
    _compile_finds_the_tuned_fused_task(paths, inst, out, capfd)


def _online_ranking_is_reported(summary: dict, r, frozen: bool) -> None:
    """summary.json says how the model ranked every candidate the search measured: as each
    round's model scored it and as the final model does (the same, for a frozen model)."""
    online = summary["online"]
    assert online == r.online and set(online) == {"as_used", "final"}
    for q in online.values():
        # MetaSchedule's UpdateCostModel passes on only the candidates that built
        assert 1 <= q["candidates"] <= r.trials and 1 <= q["tasks"] <= r.tasks
        assert sum(t["n"] for t in q["per_task"].values()) <= r.trials
        for value in (q["pairwise"], q["top1"]):
            assert value is None or 0 <= value <= 1
    if frozen:
        assert online["as_used"] == online["final"]


def _compile_finds_the_tuned_fused_task(paths, inst, out, capfd):
    """compile_relax looks the fused conv2d task up in the database and finds it (TVM 0.27 keys
    fused functions with an attribute the extracted tasks lack: tcl.tvm_compat.compile_database)."""
    from tcl.device import DeviceRegistry
    from tcl.tvm_compat import compile_database, meta_schedule
    from tcl.zoo.extract import relax_module

    ms = meta_schedule()
    mod = relax_module(inst, inst.module(), inst.example())
    db = ms.database.JSONDatabase(work_dir=str(out / "database"))
    capfd.readouterr()
    ms.relax_integration.compile_relax(compile_database(db), mod,
                                       DeviceRegistry(paths).get("cpu-avx2").tvm_target(), None,
                                       enable_warning=True)
    missing = [line for line in capfd.readouterr().err.splitlines() if "not found" in line]
    assert not [line for line in missing if "conv2d" in line], missing


def test_a_budget_below_one_trial_per_task_is_refused(tiny, tmp_path):
    from tcl.tune import tune_network

    paths, _, _ = tiny
    with pytest.raises(TclError, match="fewer than the .* tasks"):
        tune_network(paths, "tiny", "cpu-avx2", "random", trials=1, out=tmp_path / "x",
                     progress=False)
    with pytest.raises(TclError, match="unknown network 'nope'"):
        tune_network(paths, "nope", "cpu-avx2", "random", trials=8, progress=False)


def test_tune_bad_inputs_are_named(tiny, tmp_path, capsys):
    from tcl.cli import main
    from tcl.tune import tune_network

    paths, _, _ = tiny
    with pytest.raises(TclError, match="unknown device 'gpu-9000'"):
        tune_network(paths, "tiny", "gpu-9000", "random", trials=8, progress=False)
    with pytest.raises(TclError, match="fewer than the .* tasks"):
        tune_network(paths, "tiny", "cpu-avx2", "random", trials=0, out=tmp_path / "z",
                     progress=False)
    with pytest.raises(SystemExit):
        main(["--data", str(paths.root), "tune", "--network", "tiny", "--device", "cpu-avx2",
              "--trials", "0"])
    assert "--trials" in capsys.readouterr().err
    # no registered continual model and no trained kind for the device
    with pytest.raises(TclError, match="no model for device 'cpu-sse42'"):
        tune_network(paths, "tiny", "cpu-sse42", "latest", trials=8, out=tmp_path / "l",
                     progress=False)


def test_an_interrupted_run_keeps_its_measurements_and_starts_over(tiny, tmp_path, capsys):
    """Killed mid-run, a tuning run's directory holds a database but no summary; the next run
    with the same --out gives those records to the store, moves the directory aside, says so,
    and tunes afresh."""
    import os
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    from tcl.store.catalog import query
    from tcl.tune import tune_network

    paths, _, root = tiny
    out = tmp_path / "run"
    tcl = Path(sys.executable).parent / "tcl"
    proc = subprocess.Popen([tcl, "--data", str(paths.root), "tune", "--network", "tiny",
                             "--device", "cpu-avx2", "--model", "random", "--trials", "200",
                             "--population", "32", "--generations", "1", "--out", str(out)],
                            cwd=root, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    records = out / "database" / "database_tuning_record.json"
    deadline = time.time() + 600
    while time.time() < deadline and proc.poll() is None and not (
            records.is_file() and records.stat().st_size > 0):
        time.sleep(1)
    assert proc.poll() is None, "the run ended before it could be interrupted"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not (out / "summary.json").exists()
    before = query(paths, "select count(*) n from records where source = 'tune'")["n"][0]
    r = tune_network(paths, "tiny", "cpu-avx2", "random", trials=8, out=out, progress=False,
                     **SMALL_SEARCH)
    err = capsys.readouterr().err
    assert "held an interrupted run; starting over" in err
    aside = tmp_path / "run.interrupted-1"
    assert (aside / "database" / "database_tuning_record.json").stat().st_size > 0
    after = query(paths, "select count(*) n from records where source = 'tune'")["n"][0]
    assert after >= before and (out / "summary.json").is_file() and r.trials > 0
    with pytest.raises(TclError, match="holds a finished tuning run"):
        tune_network(paths, "tiny", "cpu-avx2", "random", trials=8, out=out, progress=False)

