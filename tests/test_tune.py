"""`tcl tune` end to end on a tiny network: MetaSchedule's search driven by a tcl cost model
(frozen) and by MetaSchedule's random model, compiled with the tuned database; the compiled
module's outputs match PyTorch's; library, database, curve and summary are written; the tuning
records join the store with source `tune`; a budget below one trial per task is refused."""
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


def _synthetic_model(path):
    """An XGB cost model fitted on synthetic features: it ranks real candidates through the
    adapter (its quality is beside the point here)."""
    from tcl.evaluate import synthetic_data
    from tcl.models import make_model

    programs = synthetic_data(n_tasks=4, programs_per_task=16, n_networks=2, n_holdout=1)[0]
    make_model("xgb", num_boost_round=5, nthread=1).fit(programs).save(path)
    return path


@pytest.mark.parametrize("model", ["file", "random"])
def test_tune_compiles_a_network_that_matches_pytorch(tiny, model, tmp_path):
    from tcl.store.catalog import query
    from tcl.tune import TOLERANCE, tune_network

    paths, inst, root = tiny
    which = str(_synthetic_model(tmp_path / "m.model")) if model == "file" else "random"
    out = tmp_path / "run"
    r = tune_network(paths, "tiny", "cpu-avx2", which, trials=8, out=out, progress=False)
    assert r.network == inst.key and r.tasks >= 2
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


def test_a_budget_below_one_trial_per_task_is_refused(tiny, tmp_path):
    from tcl.tune import tune_network

    paths, _, _ = tiny
    with pytest.raises(TclError, match="fewer than the .* tasks"):
        tune_network(paths, "tiny", "cpu-avx2", "random", trials=1, out=tmp_path / "x",
                     progress=False)
    with pytest.raises(TclError, match="unknown network 'nope'"):
        tune_network(paths, "nope", "cpu-avx2", "random", trials=8, progress=False)
