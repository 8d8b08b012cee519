"""`tcl zoo add`: a user's PyTorch network joins the zoo like a built-in one, params.yaml names
it, and every bad input (a factory or module that does not exist, an operator the exporter
cannot convert, inputs that do not fit, a name taken) is a clear error that adds nothing."""
from __future__ import annotations

import hashlib
import re
import textwrap
from pathlib import Path

import polars as pl
import pytest
import yaml

from tcl.cli import main

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[1]

NETS = textwrap.dedent("""
    import torch
    from torch import nn

    class Small(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 8, 3, padding=1)
            self.fc = nn.Linear(8, 10)

        def forward(self, x):
            return self.fc(torch.relu(self.conv(x)).mean((2, 3)))

    class Spectral(nn.Module):
        def forward(self, x):
            return torch.fft.rfft(x).abs()

    class TwoInputs(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(100, 16)
            self.fc = nn.Linear(16, 4)

        def forward(self, ids, scale):
            return self.fc(self.emb(ids).mean(1)) * scale

    def build():
        return Small()

    def spectral():
        return Spectral()

    def two_inputs():
        return TwoInputs()

    def not_a_module():
        return 3

    def hang():
        import time

        time.sleep(10 ** 6)
""")


def run(capsys, root, *argv):
    code = main(["--data", str(root), *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def _state(root: Path) -> dict[str, str]:
    """Content hashes of the zoo tables and the user network registry."""
    files = [root / "zoo" / "tasks.parquet", root / "zoo" / "networks.parquet",
             root / "user_networks.json"]
    return {f.name: hashlib.sha256(f.read_bytes()).hexdigest() if f.exists() else "" for f in files}


@pytest.fixture
def user_module(tmp_path, monkeypatch):
    (tmp_path / "mynets.py").write_text(NETS)
    monkeypatch.chdir(tmp_path)            # MODULE:FACTORY imports from the working directory
    return tmp_path


def test_a_users_network_joins_the_zoo_and_params_name_it(user_module, tmp_path, capsys):
    from tcl.pipeline import stages
    from tcl.pipeline.params import load_params

    root = tmp_path / "data"
    code, out, err = run(capsys, root, "zoo", "add", "mynet", "--model", "mynets:build",
                         "--input", "1x3x16x16")
    assert code == 0, err
    assert "added mynet-1x3x16x16" in out
    code, out, _ = run(capsys, root, "zoo", "add", "mynet", "--model", "mynets:build",
                       "--input", "1x3x16x16")
    assert code == 0 and "already in the zoo" in out
    # a second variant; a file path and several inputs (with a dtype) for another network
    assert run(capsys, root, "zoo", "add", "mynet", "--model", "mynets:build",
               "--input", "2x3x16x16")[0] == 0
    assert run(capsys, root, "zoo", "add", "pair", "--model",
               f"{user_module / 'mynets.py'}:two_inputs", "--input", "4x8:int64",
               "--input", "4x4", "--holdout")[0] == 0
    nets = pl.read_parquet(root / "zoo" / "networks.parquet")
    assert set(nets["network_key"]) == {"mynet-1x3x16x16", "mynet-2x3x16x16", "pair-4x8-int64_4x4"}
    assert nets.filter(pl.col("network") == "pair")["holdout"].all()
    tasks = pl.read_parquet(root / "zoo" / "tasks.parquet")
    assert set(nets["task_id"]) <= set(tasks["task_id"]) and "conv" in set(tasks["op_class"])
    code, out, _ = run(capsys, root, "zoo", "list")
    assert code == 0 and "mynet-2x3x16x16" in out and "user" in out and "swin_t" in out

    raw = yaml.safe_load((ROOT / "tests" / "tiny_params.yaml").read_text())
    raw["data"] = str(root)
    raw["zoo"]["networks"] = ["mynet", "pair"]
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    params = load_params(tmp_path / "params.yaml", check_models=False)
    keys = [i.key for i in stages.instances(params)]
    assert keys == ["mynet-1x3x16x16", "mynet-2x3x16x16", "pair-4x8-int64_4x4"]
    assert stages.run_zoo(params) >= 1           # already extracted: nothing redone
    selected = stages.selected_tasks(params)
    assert selected.filter(pl.col("holdout")).height >= 1        # pair's tasks are held out


@pytest.mark.parametrize("model, inputs, message", [
    ("mynets:nope", ["1x3x16x16"], "mynets has no 'nope'; it defines: .*build"),
    ("nosuchmodule:build", ["1x3x16x16"], "cannot import 'nosuchmodule'"),
    ("missing.py:build", ["1x3x16x16"], "no file .*missing.py"),
    ("mynets:spectral", ["1x16"], "no converter for operator.*_fft_r2c"),
    ("mynets:build", ["1x5x16x16"], "inputs 1x5x16x16 do not fit network 'bad'.*3 channels"),
    ("mynets:not_a_module", ["1x3"], "returned an object of type int; expected a torch.nn.Module"),
    ("mynets:build", ["1x3xsixteen"], "invalid --input '1x3xsixteen'"),
    ("mynets", ["1x3x16x16"], "expected MODULE:FACTORY"),
])
def test_bad_networks_are_named_and_add_nothing(user_module, tmp_path, capsys, model, inputs,
                                                message):
    root = tmp_path / "data"
    assert run(capsys, root, "zoo", "add", "good", "--model", "mynets:build",
               "--input", "1x3x8x8")[0] == 0
    before = _state(root)
    argv = ["zoo", "add", "bad", "--model", model]
    for i in inputs:
        argv += ["--input", i]
    code, _, err = run(capsys, root, *argv)
    assert code == 2 and re.search(message, err), err
    assert _state(root) == before                          # nothing half-added


def test_a_factory_that_never_returns_times_out_and_adds_nothing(user_module, tmp_path, capsys):
    """--timeout, else params.yaml's zoo.factory_timeout_s: the error names the factory and the
    timeout, and the zoo and the registry stay as they were."""
    root = tmp_path / "data"
    before = _state(root)
    code, _, err = run(capsys, root, "zoo", "add", "stuck", "--model", "mynets:hang",
                       "--input", "1x3x8x8", "--timeout", "2")
    assert code == 2, err
    assert "network 'stuck': mynets:hang did not return its module within 2 s" in err
    assert _state(root) == before
    raw = yaml.safe_load((ROOT / "tests" / "tiny_params.yaml").read_text())
    raw["data"] = str(root)
    raw["zoo"]["factory_timeout_s"] = 1
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    code, _, err = run(capsys, root, "zoo", "add", "stuck", "--model", "mynets:hang",
                       "--input", "1x3x8x8")
    assert code == 2 and "did not return its module within 1 s" in err, err
    assert _state(root) == before


def test_names_that_are_taken_are_refused(user_module, tmp_path, capsys):
    root = tmp_path / "data"
    code, _, err = run(capsys, root, "zoo", "add", "resnet18", "--model", "mynets:build",
                       "--input", "1x3x8x8")
    assert code == 2 and "built-in network" in err
    assert run(capsys, root, "zoo", "add", "mine", "--model", "mynets:build",
               "--input", "1x3x8x8")[0] == 0
    code, _, err = run(capsys, root, "zoo", "add", "mine", "--model", "mynets:two_inputs",
                       "--input", "1x8:int64", "--input", "1x4")
    assert code == 2 and "refusing to redefine it" in err
    code, _, err = run(capsys, root, "zoo", "add", "Bad-Name", "--model", "mynets:build",
                       "--input", "1x3x8x8")
    assert code == 2 and "invalid network name" in err
    (root / "user_networks.json").write_text("{not json")
    code, _, err = run(capsys, root, "zoo", "list")
    assert code == 2 and "user_networks.json is not valid" in err
