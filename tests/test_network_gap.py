"""benchmarks/network_gap.py's pure part: a profile's calls attributed to tasks, the rows outside
every task, the VM's share and the totals against the estimate; a run directory that is not a
finished tuning run is a one-line error."""
from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import benchmark_module
from tcl.config import Paths, TclError

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def gap():
    with benchmark_module("network_gap") as module:
        yield module


def _profile():
    """Two profiled runs of a network: conv (one task, two structurally equal kernels, weight
    2), dense (tuned task), a reshape task the VM turned into a view (never called), a kernel
    of no task, and the VM's builtins."""
    run = [("vm.builtin.alloc_storage", 0.01), ("conv", 4.0), ("vm.builtin.alloc_tensor", 0.01),
           ("conv1", 4.0), ("extra_layout", 1.0), ("dense", 2.0)]
    slower = [(n, ms * 3 if n == "conv" else ms) for n, ms in run]
    return [run, slower, run]


def test_calls_are_attributed_to_tasks_and_the_rest_is_named(gap):
    calls = gap.median_calls(_profile())
    assert [n for n, _ in calls] == [n for n, _ in _profile()[0]]
    assert dict(calls)["conv"] == 4.0                       # the median, not the slow run
    kernel_task = {"conv": "fused_conv", "conv1": "fused_conv", "dense": "fused_dense"}
    tasks = {"fused_conv": {"weight": 2, "best_ms": 3.0, "kernels": ["conv", "conv1"],
                            "tuned": ["conv", "conv1"]},
             "fused_dense": {"weight": 1, "best_ms": 2.0, "kernels": ["dense"], "tuned": []},
             "reshape": {"weight": 1, "best_ms": math.nan, "kernels": [], "tuned": []}}
    alone = {"conv": {"runner": 3.5}, "conv1": {"runner": 3.5}, "dense": {"runner": 2.0},
             "extra_layout": {"runner": 0.5}}
    table = gap.attribute(calls, kernel_task, tasks, alone, end_to_end_ms=12.0)
    rows = {r["task"]: r for r in table["tasks"]}
    conv = rows["fused_conv"]
    assert conv["kernels"] == ["conv", "conv1"] and conv["calls"] == 2 and conv["tuned"] == "2/2"
    assert conv["estimate_ms"] == 6.0 and conv["network_ms"] == 8.0
    assert conv["ratio"] == pytest.approx(8 / 6) and conv["alone_ms"] == {"runner": 7.0}
    assert conv["ratio_alone"] == pytest.approx(8 / 7)
    assert rows["fused_dense"]["tuned"] == "0/1" and rows["fused_dense"]["ratio"] == 1.0
    assert rows["reshape"]["calls"] == 0 and rows["reshape"]["network_ms"] == 0
    assert [r["kernel"] for r in table["outside"]] == ["extra_layout"]
    assert table["builtins"] == {"calls": 2, "network_ms": pytest.approx(0.02)}
    t = table["totals"]
    # the estimate leaves out a task that never ran, as tcl tune's curve does
    assert t["estimate_ms"] == 8.0 and t["tasks_network_ms"] == 10.0 and t["outside_ms"] == 1.0
    assert t["vm_overhead_ms"] == pytest.approx(12.0 - 11.02)
    assert t["tasks_alone_ms"] == {"runner": 9.0}
    assert t["tuned_tasks"] == 1 and t["tasks"] == 3          # reshape has no compiled kernel
    text = gap.format_table({"latency_ms": 12.5, "estimate_ms": 8.0, "timer_ms": 12.2}, table)
    lines = text.splitlines()
    assert lines[0].startswith("| task | kernels | tuned | weight | calls | best ms")
    assert lines[2].startswith("| fused_conv | conv, conv1 | 2/2 | 2 | 2 | 3.00 | 6.00 | 7.00 "
                               "| 8.00 | 1.33 | 1.14 |")
    assert any(line.startswith("| (no task) | extra_layout |") for line in lines)
    assert any(line.startswith("| total | 1/3 tasks tuned |") and "| 12.00 | 1.50 |" in line
               for line in lines)
    assert "no successful measurement (left out of the estimate, as the curve does): reshape" \
        in text
    assert "weight is not their calls in the profile: reshape (weight 1, 0 calls)" in text


def test_runs_that_called_different_functions_are_refused(gap):
    with pytest.raises(TclError, match="different functions"):
        gap.median_calls([[("a", 1.0)], [("b", 1.0)]])


def test_a_directory_that_is_not_a_finished_run_is_a_one_line_error(tmp_path, gap):
    (tmp_path / "database").mkdir()
    with pytest.raises(TclError, match="not a finished tcl tune run"):
        gap.load_run(tmp_path)
    (tmp_path / "summary.json").write_text(json.dumps({"network": "n"}))
    with pytest.raises(TclError, match="not a tcl tune summary"):
        gap.load_run(tmp_path)
    (tmp_path / "summary.json").write_text(json.dumps(
        {"network": "n", "device": "d", "seed": 0, "latency_ms": 3.0}))
    (tmp_path / "curve.csv").write_text("trials,wall_s,estimate_ms\n1,0.1,NaN\n2,0.2,2.5\n")
    assert gap.load_run(tmp_path)["estimate_ms"] == 2.5
    from tcl.tune.layout import UNFUSED

    for compiled in ({"layout_option": "nchwc"}, {"math": "fast"}):   # compile_relax's: read
        (tmp_path / "summary.json").write_text(json.dumps(
            {"network": "n", "device": "d", "seed": 0, "latency_ms": 3.0, "compile": compiled}))
        assert gap.load_run(tmp_path)["choices"]["layout"] in ("nchw", "nchwc")
    for compiled in ({"layout_option": "prepack"}, {"fusion": UNFUSED},
                     {"conv_option": "winograd-2"}):   # compiled another way: refused
        (tmp_path / "summary.json").write_text(json.dumps(
            {"network": "n", "device": "d", "seed": 0, "latency_ms": 3.0, "compile": compiled}))
        with pytest.raises(TclError, match="fused runs of direct convolutions in nchw or nchwc"):
            gap.load_run(tmp_path)
    out = subprocess.run([sys.executable, ROOT / "benchmarks" / "network_gap.py",
                          tmp_path / "missing"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and "not a finished tcl tune run" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1


@pytest.mark.slow
def test_the_gap_of_a_tiny_tuned_network(gap, tmp_path):
    """A real tuning run of the tiny network through network_gap: every task's kernel is found
    and carries its tuned record, the weights equal the calls, nothing runs outside the tasks,
    and the end to end splits into tasks, builtins and the VM's rest."""
    from test_tune import NET

    from tcl.tune import tune_network
    from tcl.zoo.user import UserNetworks

    (tmp_path / "tiny_net.py").write_text(NET)
    paths = Paths(tmp_path / "data")
    UserNetworks(paths).add("tiny", f"{tmp_path / 'tiny_net.py'}:build", ["1x3x8x8"])
    out = tmp_path / "run"
    # 4 trials a task: with one, a task whose only (random) candidate failed had no tuned record
    tune_network(paths, "tiny", "cpu-avx2", "random", trials=12, out=out, progress=False,
                 population=32, generations=1)
    result = gap.gap(paths, out, repeats=1)
    table, t = result["table"], result["table"]["totals"]
    called = [r for r in table["tasks"] if r["calls"]]
    assert called and t["tuned_tasks"] == len(called) and not table["outside"]
    assert all(r["tuned"] == "1/1" and r["weight"] == r["calls"] for r in called)
    assert set(result["kernel_task"].values()) == {r["task"] for r in table["tasks"]}
    for r in called:
        assert r["best_ms"] > 0 and r["network_ms"] > 0
        assert all(ms > 0 for ms in r["alone_ms"].values()) and "remeasured" in r["alone_ms"]
    assert t["end_to_end_ms"] == pytest.approx(
        t["tasks_network_ms"] + t["outside_ms"] + t["builtins_ms"] + t["vm_overhead_ms"])
    # curve.csv keeps 4 decimals
    assert t["estimate_ms"] == pytest.approx(result["run"]["estimate_ms"], abs=1e-4)
    assert result["pinned"]["TVM_NUM_THREADS"] == "2"      # cpu-avx2's cores, as tcl tune pins
