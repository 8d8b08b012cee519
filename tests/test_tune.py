"""`tcl tune` end to end on a tiny network: MetaSchedule's search driven by a tcl cost model
(frozen, and as the prior of an online residual model) and by MetaSchedule's random model,
compiled with the tuned database; the compiled module's outputs match PyTorch's; library,
database, curve and summary (with the model's ranking of what the search measured) are written;
the tuning records join the store with source `tune`; a budget below one trial per task is
refused."""
from __future__ import annotations

import json
import shutil
import textwrap
from pathlib import Path

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
    tuned = query(paths, "select count(*) n from records where source like 'tune%'")["n"][0]
    assert tuned >= r.records_added > 0
    summary = json.loads((out / "summary.json").read_text())
    assert r.build_s > 0 and r.run_s > 0 and 0 <= summary["overhead_share"] < 1
    assert summary["compile"]["layout"] == "NCHW" and summary["compile"]["pipeline"]
    assert summary["compile"]["layout_option"] == "nchw"
    assert "layout" not in json.loads((out / "run.json").read_text())   # earlier runs resume
    _online_ranking_is_reported(summary, r, frozen=model == "file" and update == "none")
    _time_split_is_reported(summary, r, tcl_model=model == "file")
    _compile_finds_the_tuned_fused_task(paths, inst, out, capfd)
    if model == "random":
        _retimes_keep_every_sitting(root, out, r, tmp_path)


def test_tune_ends_comparing_the_network_with_pytorch_and_onnxruntime_on_the_same_cores():
    """The last line of `tcl tune`: the tuned network as a ratio of what the user would run
    instead, on the same cores; a missing onnxruntime is named with how to install it."""
    from tcl.tune import TuneResult, versus_line

    r = TuneResult("resnet18", "zen4-1c", "tcl", "residual", 0, 64, 1, {}, latency_ms=52.9,
                   latency_std_ms=0.1, torch_ms=50.4, max_abs_err=0.0, tune_s=1.0, build_s=0.0,
                   run_s=0.0, compile_s=0.0, records_added=0, out="run", onnxruntime_ms=33.8)
    assert versus_line(r, 1) == ("52.9 ms, 1.05x PyTorch eager (50.4 ms), 1.57x onnxruntime "
                                 "(33.8 ms), on 1 core")
    r.onnxruntime_ms = float("nan")
    assert versus_line(r, 2).endswith('onnxruntime not installed (pip install -e ".[baselines]"), '
                                      "on 2 cores")


def test_the_frameworks_a_user_would_run_instead_are_timed_for_real():
    """PyTorch eager and onnxruntime (where installed: NaN where not) time the model's own runs:
    a forward that sleeps 20 ms reads at least 20 ms (a figure that is not the run's, a
    constant or a cached result, would not), and onnxruntime's figure grows with the work."""
    import time

    import torch

    from tcl.measure.devices.settings import TimingProtocol
    from tcl.tune.frameworks import eager_ms, onnxruntime_ms, onnxruntime_version

    class Sleeps(torch.nn.Module):
        def forward(self, x):
            time.sleep(0.02)
            return x + 1

    example, three = (torch.randn(4, 16),), TimingProtocol(repeat=3)
    assert eager_ms(Sleeps().eval(), example, threads=1, timing=three) >= 20.0
    small = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU()).eval()
    ort = onnxruntime_ms(small, example, threads=1, timing=three)
    if not onnxruntime_version():
        assert ort != ort                                  # NaN: not installed, not guessed
        return
    big = torch.nn.Sequential(*[torch.nn.Linear(512, 512) for _ in range(8)]).eval()
    assert onnxruntime_ms(big, (torch.randn(64, 512),), threads=1, timing=three) > ort > 0


def _retimes_keep_every_sitting(root, out, r, tmp_path) -> None:
    """benchmarks/tuning.py --retime times the finished run's network again: the run's own
    figures stay under as_tuned, each sitting is kept, the row reads the median of them."""
    results = tmp_path / "rows.jsonl"
    row = {"out": str(out), "network": "tiny", "device": "cpu-avx2", "model_arg": "random",
           "update": "none", "seed": 0, "latency_ms": r.latency_ms,
           "latency_std_ms": r.latency_std_ms, "torch_ms": r.torch_ms}
    results.write_text(json.dumps(row) + "\n")
    bench = _bench_tuning()
    bench.retime_rows(results, root)
    bench.retime_rows(results, root)                 # retimed already: skipped
    bench.retime_rows(results, root, again=True)     # one more sitting
    got = json.loads(results.read_text())
    assert got["as_tuned"]["latency_ms"] == r.latency_ms and len(got["retimes"]) == 2
    assert got["latency_ms"] == pytest.approx(
        sum(x["latency_ms"] for x in got["retimes"]) / 2)   # the median of two


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


def _time_split_is_reported(summary: dict, r, tcl_model: bool) -> None:
    """summary.json and the lines `tcl tune` prints say where the tuning time went (the parts
    sum to the wall time), how many candidates the search scored in how many predict calls,
    and, for a tcl model, how often its feature cache spared featurizing."""
    from tcl.tune import SPLIT, report_lines

    split = summary["time_split"]
    assert split == r.time_split and list(split) == list(SPLIT)
    assert all(p["s"] >= 0 and 0 <= p["share"] <= 1 for p in split.values())
    assert sum(p["s"] for p in split.values()) == pytest.approx(r.tune_s, abs=0.2)
    assert split["build"]["s"] == pytest.approx(r.build_s, abs=0.1) and split["search"]["s"] > 0
    scoring = summary["scoring"]
    # the search scores a generation's population in one call, not a candidate at a time
    assert scoring["scored"] >= scoring["predict_calls"] * SMALL_SEARCH["population"] // 2 > 0
    lines = report_lines(r)
    assert lines[0].startswith(f"time: {r.tune_s:.0f}s tuning = search ")
    assert all(f" {part} " in lines[0] for part in SPLIT)
    assert any(line.startswith("online ranking") and "pairwise" in line for line in lines)
    if tcl_model:
        assert split["featurize"]["s"] > 0 and split["predict"]["s"] > 0
        cache = scoring["feature_cache"]
        # every measured candidate was scored first: update and the ranking figures hit
        assert cache["hits"] >= r.trials and cache["entries"] == cache["misses"] > 0
        print("\n".join(lines))
        assert cache["bytes"] <= cache["max_bytes"] and "cache hits" in lines[1]


def _compile_finds_the_tuned_fused_task(paths, inst, out, capfd, layout="nchw", conv="direct"):
    """compile_relax looks the fused conv2d task up in the database and finds it (TVM 0.27 keys
    fused functions with an attribute the extracted tasks lack: tcl.tvm_compat.compile_database)."""
    from tcl.store.devices import DeviceRegistry
    from tcl.tune import network_module
    from tcl.tvm_compat import compile_database, meta_schedule

    ms = meta_schedule()
    target = DeviceRegistry(paths).get("cpu-avx2").tvm_target()
    mod = network_module(inst, inst.module(), inst.example(), layout, target, conv=conv)
    db = ms.database.JSONDatabase(work_dir=str(out / "database"))
    capfd.readouterr()
    ms.relax_integration.compile_relax(compile_database(db), mod, target, None,
                                       enable_warning=True)
    missing = [line for line in capfd.readouterr().err.splitlines() if "not found" in line]
    assert not [line for line in missing if "conv2d" in line], missing


def test_prepack_folds_the_weight_layouts_the_tuned_kernels_chose(tiny):
    """`--layout prepack`: MetaSchedule's RewriteLayout lays weights out for the kernels it
    measures (their traces transform a layout); the compile step applies the tuned kernels and
    folds each rewrite into the constant weight, so the network calls no layout transform, takes
    PyTorch's input and matches its output. The run's directory, parameters and summary name
    the layout."""
    import shutil

    import tvm
    from tvm import relax

    from tcl.store.devices import DeviceRegistry
    from tcl.tune import TOLERANCE, network_module, tune_network
    from tcl.tune.layout import applied_module
    from tcl.tvm_compat import FAILED_RUN_SECS, meta_schedule

    paths, inst, _ = tiny
    out = paths.tuning_dir / f"{inst.key}-cpu-avx2-random-none-s0-prepack"
    try:
        r = tune_network(paths, "tiny", "cpu-avx2", "random", trials=8, progress=False,
                         layout="prepack", **SMALL_SEARCH)
        assert r.out == str(out) and r.max_abs_err <= TOLERANCE["atol"]
        assert json.loads((out / "run.json").read_text())["layout"] == "prepack"
        summary = json.loads((out / "summary.json").read_text())
        assert summary["compile"] == r.compile and r.compile["layout_option"] == "prepack"
        ms = meta_schedule()
        db = ms.database.JSONDatabase(work_dir=str(out / "database"))
        rewrote = [rec for rec in db.get_all_tuning_records()
                   if max(float(x) for x in rec.run_secs) < FAILED_RUN_SECS
                   and any(i.kind.name == "TransformLayout" for i in rec.trace.insts)]
        assert rewrote, "no measured candidate rewrote a weight's layout"
        target = DeviceRegistry(paths).get("cpu-avx2").tvm_target()
        mod = network_module(inst, layout="prepack", target=target)
        packed = applied_module(db, mod, target, "prepack")
        called = lambda m: _called_kernels(m["main"], relax, tvm)   # noqa: E731
        assert any(name.endswith("_prepacked") for name in called(packed)), called(packed)
        assert len(called(packed)) == len(called(mod))   # no layout transform left to run
    finally:   # the module's later tests plan from the runs under tuning/: leave none
        shutil.rmtree(out, ignore_errors=True)


def _called_kernels(func, relax, tvm) -> list[str]:
    """The PrimFuncs a Relax function calls (call_tir), in order."""
    call_tir, names = tvm.ir.Op.get("relax.call_tir"), []
    relax.analysis.post_order_visit(func, lambda e: names.append(e.args[0].name_hint) if (
        isinstance(e, relax.Call) and e.op.same_as(call_tir)) else None)
    return names


BLOCKED_NET = textwrap.dedent("""
    import torch
    from torch import nn

    class Blocked(nn.Module):   # the second convolution's 8 channels fill one AVX2 block
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
            self.conv2 = nn.Conv2d(8, 8, 3, padding=1)
            self.fc = nn.Linear(8, 4)

        def forward(self, x):
            return self.fc(torch.relu(self.conv2(torch.relu(self.conv1(x)))).mean((2, 3)))

    def build():
        return Blocked()
""")


def test_nchwc_tunes_blocked_convolutions_and_matches_pytorch(tiny, tmp_path, capfd):
    """`--layout nchwc`: a convolution whose channels fill the target's vector block (8 fp32 on
    AVX2) is tuned and compiled as TOPI's conv2d_NCHWc (Relax cannot legalize a blocked conv2d
    itself), one whose channels do not (3 in) stays NCHW; the compiled network finds the tuned
    kernels, takes PyTorch's input and matches its output."""
    from tcl.tune import TOLERANCE, tune_network
    from tcl.zoo.user import UserNetworks

    paths, _, root = tiny
    (root / "blocked_net.py").write_text(BLOCKED_NET)
    inst, _ = UserNetworks(paths).add("blocked", f"{root / 'blocked_net.py'}:build", ["1x3x8x8"])
    out = tmp_path / "run"
    # 4 trials a task: with 2, a task whose random candidates all failed (a timeout on a loaded
    # host) had no tuned record for the compile check below
    r = tune_network(paths, "blocked", "cpu-avx2", "random", trials=16, out=out, progress=False,
                     layout="nchwc", **SMALL_SEARCH)
    assert r.max_abs_err <= TOLERANCE["atol"] and min(r.trials_per_task.values()) >= 1
    names = list(r.trials_per_task)
    assert any("conv2d_NCHWc" in n for n in names) and any(
        "conv2d" in n and "NCHWc" not in n for n in names), names
    summary = json.loads((out / "summary.json").read_text())
    assert summary["compile"]["layout"].startswith("NCHW8c") and \
        summary["compile"]["layout_option"] == "nchwc"
    _compile_finds_the_tuned_fused_task(paths, inst, out, capfd, layout="nchwc")


def test_a_winograd_run_is_refused_before_it_tunes_and_says_why(tiny, tmp_path):
    """`--conv winograd-2`: the kernels tune, but TVM 0.27's compile_relax cannot replay their
    traces, so a run is refused before anything is tuned or written, naming the cause; the
    dry run plans it and says the same."""
    from tcl.tune import plan_tuning, tune_network
    from tcl.tune.winograd import NOT_COMPILED

    paths, inst, _ = tiny
    out = tmp_path / "run"
    with pytest.raises(TclError, match="--conv winograd-2: tuned Winograd kernels do not "
                                       "compile in TVM 0.27"):
        tune_network(paths, "tiny", "cpu-avx2", "random", trials=8, out=out, progress=False,
                     conv="winograd-2", **SMALL_SEARCH)
    assert not out.exists()
    plan = plan_tuning(paths, "tiny", "cpu-avx2", "random", trials=8, conv="winograd-2")
    assert NOT_COMPILED in plan.describe()


GELU_NET = textwrap.dedent("""
    import torch

    class Gelu(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1, self.fc2 = torch.nn.Linear(16, 32), torch.nn.Linear(32, 16)

        def forward(self, x):
            return torch.softmax(self.fc2(torch.nn.functional.gelu(self.fc1(x))), dim=-1)

    def build():
        return Gelu()
""")


def test_fast_math_computes_gelu_and_softmax_without_exact_erf_and_matches_pytorch(tmp_path):
    """`--fast-math`: gelu through TOPI's fast_erf (LLVM has no vector erf: the exact one calls
    libm per element) and softmax through fast_exp; the network still matches PyTorch."""
    from tcl.tune import TOLERANCE, network_module, tune_network
    from tcl.zoo.user import UserNetworks

    paths = Paths(tmp_path / "data")   # its own data root: the dry-run test checks tiny's
    (tmp_path / "gelu_net.py").write_text(GELU_NET)
    inst, _ = UserNetworks(paths).add("gelu", f"{tmp_path / 'gelu_net.py'}:build", ["4x16"])
    exact, fast = (network_module(inst, fast_math=f).script() for f in (False, True))
    assert "T.erf(" in exact and "T.erf(" not in fast and "fast_gelu" in fast
    assert "T.exp(" in exact and "T.exp(" not in fast   # fast_exp is a polynomial
    out = tmp_path / "run"
    r = tune_network(paths, "gelu", "cpu-avx2", "random", trials=8, out=out, progress=False,
                     fast_math=True, **SMALL_SEARCH)
    assert r.max_abs_err <= TOLERANCE["atol"]
    assert r.compile["math"] != "exact" and "FastMathTransform" in r.compile["pipeline"]
    assert json.loads((out / "run.json").read_text())["fast_math"] is True


def test_no_fuse_tunes_one_kernel_per_operator_and_recompiles_as_the_run_did(tmp_path):
    """`--no-fuse`: Relax's zero pipeline without FuseOps/FuseTIR, so each operator is its own
    task; the run still matches PyTorch, says so in run.json and summary.json, and a finished
    run's summary gives back the choices it compiled with (the budget curve recompiles from it)."""
    from tcl.store.devices import DeviceRegistry
    from tcl.tune import TOLERANCE, compile_choices, network_module, tunable_tasks, tune_network
    from tcl.tune.layout import run_suffix
    from tcl.zoo.user import UserNetworks

    paths = Paths(tmp_path / "data")
    (tmp_path / "gelu_net.py").write_text(GELU_NET)
    inst, _ = UserNetworks(paths).add("gelu", f"{tmp_path / 'gelu_net.py'}:build", ["4x16"])
    target = DeviceRegistry(paths).get("cpu-avx2").tvm_target()
    fused, unfused = (len(tunable_tasks(network_module(inst, target=target, fuse=f), target))
                      for f in (True, False))
    assert unfused > fused, (unfused, fused)
    r = tune_network(paths, "gelu", "cpu-avx2", "random", trials=2 * unfused, progress=False,
                     fuse=False, **SMALL_SEARCH)
    assert r.tasks == unfused and r.max_abs_err <= TOLERANCE["atol"]
    assert r.out.endswith("-nofuse") and run_suffix("nchwc", True, False) == \
        "-nchwc-fastmath-nofuse"
    assert json.loads((Path(r.out) / "run.json").read_text())["fuse"] is False
    summary = json.loads((Path(r.out) / "summary.json").read_text())
    assert compile_choices(summary) == {"layout": "nchw", "fast_math": False, "fuse": False,
                                        "conv": "direct"}
    assert compile_choices({}) == {"layout": "nchw", "fast_math": False, "fuse": True,
                                   "conv": "direct"}
    # compiled unfused, every task's kernel is a tuned one (compile_relax would fuse anew first)
    import tvm

    from tcl.tune.layout import applied_module
    from tcl.tvm_compat import meta_schedule

    db = meta_schedule().database.JSONDatabase(work_dir=str(Path(r.out) / "database"))
    applied = applied_module(db, network_module(inst, target=target, fuse=False), target,
                             fuse=False)
    tuned = [f for f in applied.functions.values() if isinstance(f, tvm.tirx.PrimFunc)
             and f.attrs.get("tirx.is_scheduled", False)]
    assert len(tuned) == unfused   # one per task (fc1's and fc2's weight transposes are no task)


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
    with pytest.raises(TclError, match="layout 'nhwc': expected one of nchw, prepack, nchwc"):
        tune_network(paths, "tiny", "cpu-avx2", "random", trials=8, layout="nhwc",
                     out=tmp_path / "y", progress=False)
    for flag in (["--trials", "0"], ["--layout", "nhwc"]):
        with pytest.raises(SystemExit):
            main(["--data", str(paths.root), "tune", "--network", "tiny", "--device",
                  "cpu-avx2", *flag])
        assert flag[0] in capsys.readouterr().err
    # no registered continual model and no trained kind for the device
    with pytest.raises(TclError, match="no model for device 'cpu-sse42'"):
        tune_network(paths, "tiny", "cpu-sse42", "latest", trials=8, out=tmp_path / "l",
                     progress=False)


def test_an_interrupted_run_keeps_its_measurements_and_starts_over(tiny, capsys):
    """Killed mid-run, a tuning run's directory holds a database but no summary; the next run
    in the default directory (named by network, device, model, update mode and seed) with other
    parameters (here the budget) gives those records to the store, moves the directory aside,
    says so, and tunes afresh. (A directory named by --out is refused instead: below.)"""
    import shutil

    from tcl.store.catalog import query
    from tcl.tune import tune_network

    paths, inst, root = tiny
    out = paths.tuning_dir / f"{inst.key}-cpu-avx2-random-none-s0"
    aside = out.with_name(f"{out.name}.interrupted-1")
    try:
        _start_and_kill(paths, root, out, 200, explicit=False)
        before = query(paths, "select count(*) n from records where source like 'tune%'")["n"][0]
        r = tune_network(paths, "tiny", "cpu-avx2", "random", trials=8, progress=False,
                         **SMALL_SEARCH)
        err = capsys.readouterr().err
        assert "held an interrupted run; starting over" in err and r.out == str(out)
        assert (aside / "database" / "database_tuning_record.json").stat().st_size > 0
        after = query(paths, "select count(*) n from records where source like 'tune%'")["n"][0]
        assert after >= before and (out / "summary.json").is_file() and r.trials > 0
        with pytest.raises(TclError, match="holds a finished tuning run"):
            tune_network(paths, "tiny", "cpu-avx2", "random", trials=8, progress=False)
    finally:   # the module's later tests plan from the runs under tuning/: leave none
        shutil.rmtree(out, ignore_errors=True)
        shutil.rmtree(aside, ignore_errors=True)


def _start_and_kill(paths, root, out, trials: int, scheduler: str = "gradient",
                    explicit: bool = True) -> list[tuple[int, str]]:
    """Starts `tcl tune` (random model, a small search) in a subprocess, kills it once it has
    measured a round, and returns its database's (workload, record) lines. ``explicit``: pass
    ``out`` as --out (else it is the run's default directory)."""
    import os
    import signal
    import subprocess
    import sys
    import time

    tcl = Path(sys.executable).parent / "tcl"
    # --layout nchw: the library's default, which the runs it is compared with use
    proc = subprocess.Popen([tcl, "--data", str(paths.root), "tune", "--network", "tiny",
                             "--layout", "nchw",
                             "--device", "cpu-avx2", "--model", "random", "--trials", str(trials),
                             "--population", "16", "--generations", "1",
                             "--scheduler", scheduler] + (["--out", str(out)] if explicit else []),
                            cwd=root, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    # the curve's point is written after the round's records
    records, curve = out / "database" / "database_tuning_record.json", out / "curve.jsonl"
    deadline = time.time() + 600
    while time.time() < deadline and proc.poll() is None and not (
            curve.is_file() and curve.stat().st_size > 0):
        time.sleep(0.2)
    assert proc.poll() is None, "the run ended before it could be interrupted"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not (out / "summary.json").exists()
    return [tuple(json.loads(line)) for line in records.read_text().splitlines() if line]


def test_an_interrupted_run_resumes_where_it_stopped(tiny, tmp_path, capsys):
    """Killed mid-run, a tuning run started again with the same parameters and directory goes
    on from its database: the rounds it measured stay (the tasks they tuned are not tuned
    again while others wait), the rest of the budget goes to the tasks not reached, the curve
    continues, and the run ends like one that was never stopped (summary, compiled network)."""
    from collections import Counter

    from tcl.tune import TOLERANCE, tune_network

    paths, _, root = tiny
    out, trials = tmp_path / "run", 96
    # round-robin: each task's round reaches the database as it ends (gradient joins none
    # before its first round robin is over)
    before = _start_and_kill(paths, root, out, trials, "round-robin")
    r = tune_network(paths, "tiny", "cpu-avx2", "random", trials=trials, out=out,
                     progress=False, population=16, generations=1, scheduler="round-robin")
    assert "resuming the interrupted run" in capsys.readouterr().err
    assert not (tmp_path / "run.interrupted-1").exists()
    assert r.resumed["trials"] == len(before) > 0
    lines = [tuple(json.loads(line)) for line in
             (out / "database" / "database_tuning_record.json").read_text().splitlines() if line]
    assert lines[:len(before)] == before   # nothing measured before is lost or rewritten
    # every task tuned, within the budget (MetaSchedule starts a round while under it: one
    # round of overshoot, as in an uninterrupted run)
    assert r.trials == len(lines) <= trials + min(64, trials // r.tasks) and \
        len(r.trials_per_task) == r.tasks
    counts, after = Counter(w for w, _ in before), Counter(w for w, _ in lines)
    if len(counts) < r.tasks:   # tasks were left: those tuned before get no second round
        assert all(after[w] == n for w, n in counts.items())
    trials_on_curve = [p["trials"] for p in r.curve]
    assert trials_on_curve[0] <= len(before) and trials_on_curve[-1] == r.trials
    assert trials_on_curve == sorted(trials_on_curve)
    assert (out / "summary.json").is_file() and r.max_abs_err <= TOLERANCE["atol"]


def test_the_dry_run_plans_from_the_zoo_and_earlier_runs(tiny, tmp_path):
    """`tcl tune --dry-run`'s plan: the zoo's tasks, trials per round, and an estimate whose
    search part rests on earlier runs on the device when there are any (an assumption, named,
    when there are none); it tunes and writes nothing."""
    from tcl.tune import ASSUMED_SEARCH_S_PER_SCORED, SPLIT, TCL_SEARCH, plan_tuning
    from tcl.zoo.extract import load_networks

    paths, inst, _ = tiny
    before = sorted(p for p in paths.root.rglob("*"))
    plan = plan_tuning(paths, "tiny", "cpu-avx2", trials=12, population=16, generations=1)
    zoo = load_networks(paths)
    assert plan.network == inst.key and plan.per_iter == 12 // plan.tasks
    assert plan.tasks == (zoo["network_key"] == inst.key).sum() >= 2
    assert plan.scored == plan.rounds * 16 * 2 and plan.rounds == -(-12 // plan.per_iter)
    assert plan.search_s_per_scored == ASSUMED_SEARCH_S_PER_SCORED
    assert plan.eta_s == pytest.approx(12 / plan.records_per_s +
                                       plan.scored * ASSUMED_SEARCH_S_PER_SCORED)
    text = plan.describe()
    assert f"12 trials over {plan.tasks} tasks" in text and "assumed: no earlier tuning run" in text
    assert sorted(p for p in paths.root.rglob("*")) == before
    # an earlier run on the device: its search overhead per scored candidate
    run = paths.root / "tuning" / "earlier"
    run.mkdir(parents=True)
    split = {k: {"s": 1.0 if k in ("search", "featurize", "predict", "update") else 50.0,
                 "share": 0.0} for k in SPLIT}
    (run / "summary.json").write_text(json.dumps(
        {"device": "cpu-avx2", "time_split": split, "scoring": {"scored": 400},
         "trials": 100, "build_s": 60.0, "run_s": 40.0}))
    (paths.root / "tuning" / "older").mkdir()
    (paths.root / "tuning" / "older" / "summary.json").write_text('{"device": "cpu-avx2"}')
    plan = plan_tuning(paths, "tiny", "cpu-avx2", trials=12, population=16, generations=1)
    assert plan.search_s_per_scored == pytest.approx(4 / 400)
    assert "median of 1 earlier tuning run(s) on cpu-avx2" in plan.describe()
    # ... and its building and running rate, rather than the collections'
    assert plan.records_per_s == pytest.approx(1.0)
    assert "12 trials at 1.00 records/s, median of 1 earlier tuning run(s)" in plan.describe()
    with pytest.raises(TclError, match="fewer than the .* tasks"):
        plan_tuning(paths, "tiny", "cpu-avx2", trials=1)
    # a layout other than the default: what the plan cannot know of it without extracting
    assert "layout nchwc: the task count is the zoo's NCHW extraction's" in plan_tuning(
        paths, "tiny", "cpu-avx2", trials=12, layout="nchwc").describe()
    assert "no fusion: every operator is its own task" in plan_tuning(
        paths, "tiny", "cpu-avx2", trials=12, fuse=False).describe()
    assert "layout" not in plan.describe()
    # the scheduler it names is the one the run uses (issue 54: round-robin said "gradient")
    more = dict(trials=4 * plan.tasks, population=16, generations=1)
    assert "MetaSchedule's gradient scheduler picks" in plan_tuning(
        paths, "tiny", "cpu-avx2", scheduler="gradient", **more).describe()
    robin = plan_tuning(paths, "tiny", "cpu-avx2", scheduler="round-robin", **more).describe()
    assert "round-robin scheduler takes in turn" in robin and "gradient" not in robin
    # what the user leaves out: tcl's models search 64 x 2, MetaSchedule's own 512 x 4
    assert plan_tuning(paths, "tiny", "cpu-avx2", trials=12).population == TCL_SEARCH[0]
    assert plan_tuning(paths, "tiny", "cpu-avx2", "xgb-online", trials=12).generations == 4


def test_the_dry_run_expects_the_latency_of_the_closest_devices_budget_curve(tiny):
    """`--dry-run` says what the budget buys: the device's own budget curve, else the closest
    device's (same target, then same LLVM CPU), interpolated in log2 of the budget, the
    setting matching the model; a malformed curve file is refused in one line."""
    from tcl.tune import CURVES_FILE, expected_latency, plan_tuning

    paths, inst, _ = tiny
    assert "no budget curve of" in plan_tuning(paths, "tiny", "cpu-avx2", trials=12).describe()
    point = lambda dev, target, setting, b, ms: json.dumps(   # noqa: E731
        {"device": dev, "target": target, "network": inst.key, "setting": setting, "budget": b,
         "latency_ms": ms, "se_ms": 1.0, "torch_ms": 50.0, "host": "Zen 4"})
    haswell = {"kind": "llvm", "mcpu": "haswell", "num-cores": 1}   # cpu-avx2-1c's CPU
    curves = [point("far", {"kind": "llvm", "mcpu": "znver4"}, "tcl", 4, 999.0),
              point("near", haswell, "tcl", 4, 80.0), point("near", haswell, "tcl", 16, 60.0),
              point("near", haswell, "xgb-online", 4, 90.0)]
    (paths.root / CURVES_FILE).write_text("\n".join(curves) + "\n")
    e = expected_latency(paths, "cpu-avx2", inst.key, "latest", 8.0)
    assert e.device == "near" and e.setting == "tcl" and e.between == (4, 16)
    assert e.latency_ms == pytest.approx(80.0 - 20.0 / 2)   # halfway in log2 between 4 and 16
    assert expected_latency(paths, "cpu-avx2", inst.key, "xgb-online", 64.0).latency_ms == 90.0
    assert expected_latency(paths, "cpu-avx2", inst.key, "latest", 1.0).latency_ms == 80.0
    assert expected_latency(paths, "cpu-avx2", "other-net", "latest", 4.0) is None
    text = plan_tuning(paths, "tiny", "cpu-avx2", trials=12).describe()
    assert "the budget curve of near, tcl" in text and "PyTorch eager there: 50.0 ms" in text
    (paths.root / CURVES_FILE).write_text('{"device": "near"}\n')
    with pytest.raises(TclError, match="not a budget-curve file"):
        expected_latency(paths, "cpu-avx2", inst.key, "latest", 8.0)
    (paths.root / CURVES_FILE).unlink()


def _tcl_cells(rows, update, search):
    """(device, network) -> mean latency and mean search overhead share of tcl's runs under
    MetaSchedule's gradient scheduler (rows of 12-05 name no scheduler: they ran under it)."""
    import statistics

    cells: dict = {}
    for r in rows:
        s = r["search"]
        if (r["model_arg"], r["update"], (s["population"], s["generations"]),
                s.get("scheduler", "gradient")) == ("tcl", update, search, "gradient"):
            cells.setdefault((r["device"], r["network"]), []).append(r)
    return {k: (statistics.mean(r["latency_ms"] for r in v),
                statistics.mean(r["overhead_share"] for r in v)) for k, v in cells.items()}


def test_the_defaults_are_the_measured_best_for_tcl_and_metaschedules_own_for_its_models():
    """tcl's models run as a prior with an online residual model and a lean search by default,
    because the committed runs that chose them say so (docs/results.md, "tcl tune's
    defaults": docs/bench-tuning-64-xeon.jsonl, 58 runs on two one-core profiles): in every
    matched cell residual is no slower than frozen beyond the 3% noise floor, and 64 x 2 is no
    slower than 128 x 2 beyond it at a lower search overhead. xgb-online and random keep
    MetaSchedule's search and no update mode; what the caller names wins, and a wrong value is
    named before anything loads."""
    from tcl.tune import TCL_SEARCH, TCL_UPDATE, tuning_defaults

    noise = 1.03
    raw = Path(__file__).resolve().parents[1] / "docs" / "bench-tuning-64-xeon.jsonl"
    rows = [json.loads(line) for line in raw.read_text().splitlines() if line.strip()]
    residual, frozen = _tcl_cells(rows, "residual", (128, 2)), _tcl_cells(rows, "none", (128, 2))
    matched = residual.keys() & frozen.keys()
    assert len(matched) == 4
    assert TCL_UPDATE == ("residual" if all(residual[k][0] <= noise * frozen[k][0]
                                            for k in matched) else "none")
    # the search: the cheapest measured one whose networks are as fast, within the noise, as
    # every other measured search's in every cell they share
    searches = {(r["search"]["population"], r["search"]["generations"]) for r in rows
                if r["model_arg"] == "tcl" and r["update"] == TCL_UPDATE}
    cells = {s: _tcl_cells(rows, TCL_UPDATE, s) for s in searches}
    cells = {s: c for s, c in cells.items() if c}

    def as_fast(a, b):
        shared = cells[a].keys() & cells[b].keys()
        return bool(shared) and all(cells[a][k][0] <= noise * cells[b][k][0] for k in shared)

    fine = [s for s in cells if all(as_fast(s, t) for t in cells if t != s)]
    overhead = {s: sum(o for _, o in cells[s].values()) / len(cells[s]) for s in fine}
    assert len(cells) >= 2 and TCL_SEARCH == min(fine, key=overhead.get), (cells, overhead)
    assert tuning_defaults("latest") == ("residual", 64, 2)
    assert tuning_defaults("model.pt") == ("residual", 64, 2)
    assert tuning_defaults("xgb-online") == tuning_defaults("random") == ("none", 512, 4)
    assert tuning_defaults("latest", "none", 64, 1) == ("none", 64, 1)
    with pytest.raises(TclError, match="--update 'fast': expected one of none, refit, residual"):
        tuning_defaults("latest", "fast")
    with pytest.raises(TclError, match="population 1 / generations 2"):
        tuning_defaults("latest", population=1)


def _bench_tuning():
    """benchmarks/tuning.py as a module (scripts import their helpers from their directory)."""
    import importlib.util
    import sys

    root = Path(__file__).resolve().parents[1] / "benchmarks"
    spec = importlib.util.spec_from_file_location("bench_tuning", root / "tuning.py")
    bench = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(root))   # its `from _common import ...`
    try:
        spec.loader.exec_module(bench)
    finally:
        sys.path.remove(str(root))
    return bench


def test_tuning_benchmark_counts_per_task_trials_to_a_reference_best():
    """benchmarks/tuning.py's per-task race: the position of each task's first candidate at
    least as fast as the reference's best for it, summed over the tasks that reach it."""
    bench = _bench_tuning()
    ref = [{"sequences": {"0": [3.0, 2.0, None], "1": [5.0, 4.0]}},
           {"sequences": {"0": [2.5], "1": [6.0, 3.0], "2": [None]}}]
    best = bench.per_task_best(ref)   # medians of each run's best; task 2 never ran
    assert best == {"0": 2.25, "1": 3.5}
    run = {"0": [None, 9.0, 2.2, 1.0], "1": [4.0, 3.6]}   # task 1 never gets to 3.5
    assert bench.trials_to_reach(run, best) == (3, 1, 2)
    assert bench.trials_to_reach({}, best) == (0, 0, 2)


def test_tuning_benchmark_names_each_rows_host_and_compares_within_it(tmp_path, capsys):
    """Every table row names its host (CPU model, family/model), and a run is raced only against
    the reference's runs on the same host: the same network and device on two hosts are two
    groups."""
    bench = _bench_tuning()
    zen = "AMD EPYC (AuthenticAMD family 26 model 2; avx2 avx512f)"
    xeon = "Intel(R) Xeon(R) Processor (GenuineIntel family 6 model 167 stepping 1; avx2)"
    assert bench.host_short(zen) == "AMD EPYC 26/2" and bench.host_short(None) == "-"

    def row(model, host, ms):
        return {"network_arg": "n", "network": "n", "device": "d", "model_arg": model,
                "host": host, "model": "registry abc (frozen)", "update": "none", "seed": 0,
                "trials": 4, "latency_ms": ms, "torch_ms": 2.0, "data_collection_s": 0.0,
                "data_records": 0, "overhead_share": 0.1, "sequences": {"t": [ms]},
                "curve": [{"trials": 4, "wall_s": 1.0, "estimate_ms": ms}]}

    results = tmp_path / "r.jsonl"
    results.write_text("".join(json.dumps(r) + "\n" for r in [
        row("xgb-online", zen, 1.0), row("tcl", zen, 0.5),
        row("xgb-online", xeon, 4.0), row("tcl", xeon, 3.0)]))
    bench.summarize(results)
    out = capsys.readouterr().out
    assert "| n | d | AMD EPYC 26/2 | tcl [registry abc] |" in out
    # tcl / xgb-online: 0.5 on the Zen host, 0.75 on the Xeon; never 3.0 / 1.0 across hosts
    assert "| AMD EPYC 26/2 | tcl [registry abc] | xgb-online | 0.500 (met)" in out
    assert "| Intel(R) Xeon(R) Processor 6/167 | tcl [registry abc] | xgb-online | 0.750 (met)" \
        in out


def test_tuning_benchmark_races_the_reference_at_its_best_search(tmp_path, capsys):
    """tcl is raced against xgb-online's best search setting on that host (here round-robin,
    faster than MetaSchedule's default gradient), and the targets table names that setting."""
    bench = _bench_tuning()

    def row(model, ms, scheduler, seed=0):
        return {"network_arg": "n", "network": "n", "device": "d", "model_arg": model,
                "host": "h", "model": "registry abc (frozen)", "update": "none", "seed": seed,
                "trials": 4, "latency_ms": ms, "torch_ms": 2.0, "data_collection_s": 0.0,
                "data_records": 0, "overhead_share": 0.1, "sequences": {"t": [ms]},
                "search": {"population": 512, "generations": 4, "scheduler": scheduler},
                "curve": [{"trials": 4, "wall_s": 1.0, "estimate_ms": ms}]}

    results = tmp_path / "r.jsonl"
    results.write_text("".join(json.dumps(r) + "\n" for r in [
        row("xgb-online", 2.0, "gradient"), row("xgb-online", 1.0, "round-robin"),
        row("xgb-online", 1.2, "round-robin", seed=1), row("tcl", 1.21, "gradient")]))
    runs, label = bench.best_reference(
        [json.loads(line) for line in results.read_text().splitlines()], "xgb-online")
    assert label == "xgb-online, round-robin" and {r["seed"] for r in runs} == {0, 1}
    bench.summarize(results)
    out = capsys.readouterr().out
    assert "| tcl [registry abc] | xgb-online, round-robin | 1.100 (missed)" in out   # 1.21 / 1.1
    assert bench.best_reference([row("tcl", 1.0, "gradient")], "xgb-online") == ([], "-")


def _user_database(work_dir):
    """A MetaSchedule log of the user's own: one record of a matmul, not of this network."""
    import tvm
    from tvm import s_tir

    from conftest import matmul_task
    from tcl.tvm_compat import meta_schedule

    ms = meta_schedule()
    work_dir.mkdir(parents=True)
    mod = tvm.ir.load_json(matmul_task(32)["workload_json"])
    db = ms.database.JSONDatabase(work_dir=str(work_dir))
    db.commit_tuning_record(ms.database.TuningRecord(
        s_tir.Schedule(mod).trace, db.commit_workload(mod), [1e-3],
        tvm.target.Target("llvm"), ms.arg_info.ArgInfo.from_prim_func(mod["main"])))


def test_an_out_directory_that_is_not_this_devices_run_is_refused_untouched(
        tiny, tmp_path, capsys, monkeypatch):
    """Issue 38: `tcl tune --out DIR` on a user's directory renamed it and imported the
    MetaSchedule log it held as this device's tuning records. A directory without a run file,
    with another device's, or with an interrupted run of this device with other parameters, is
    refused in one line; nothing is moved or imported."""
    import hashlib

    import tcl.tune
    from tcl.cli import main
    from tcl.store.catalog import query

    paths, inst, _ = tiny
    mine = tmp_path / "mine"
    _user_database(mine / "database")
    (mine / "notes.txt").write_text("my own tuning log\n")
    files = lambda: {str(p): hashlib.sha256(p.read_bytes()).hexdigest()  # noqa: E731
                     for p in sorted(tmp_path.rglob("*")) if p.is_file()}
    count = lambda: query(paths, "select count(*) n from records")["n"][0]   # noqa: E731
    before, n = files(), count()
    monkeypatch.setattr(tcl.tune.run, "network_module", lambda *a: 1 / 0)   # never tunes
    argv = ["--data", str(paths.root), "tune", "--network", "tiny", "--device", "cpu-avx2",
            "--layout", "nchw", "--model", "random", "--trials", "8", "--out", str(mine)]
    assert main(argv) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert f"{mine} is a directory that is not a tcl tune run" in line, line
    assert files() == before and count() == n
    (mine / "run.json").write_text(json.dumps({"network": "tiny", "device": "cpu-sse42"}))
    before = files()
    assert main(argv) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert "interrupted tcl tune run for device 'cpu-sse42', not 'cpu-avx2'" in line, line
    assert files() == before and count() == n and sorted(p.name for p in tmp_path.iterdir()) \
        == ["mine"]
    # this device's interrupted run with another budget: neither resumed nor moved aside
    (mine / "run.json").write_text(json.dumps(
        {"network": inst.key, "device": "cpu-avx2", "model": "random", "update": "none",
         "seed": 0, "trials": 200, "population": 512, "generations": 4,
         "scheduler": "gradient"}))
    before = files()
    assert main(argv) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert f"{mine} holds an interrupted tcl tune run of cpu-avx2 with other parameters " \
           "(trials 200 there, 8 here)" in line and "give another --out, or remove it" in line, line
    assert files() == before and count() == n and sorted(p.name for p in tmp_path.iterdir()) \
        == ["mine"]


@pytest.mark.parametrize("kind", ["foo", "rocm", "cuda"])
def test_a_run_whose_database_holds_another_target_kinds_records_is_refused_untouched(
        tiny, tmp_path, capsys, monkeypatch, kind):
    """Issue 54: resuming a run (`tcl tune --out DIR`, its run file this run's) whose database
    holds records of another target kind ended in an internal error (a kind this TVM lacks),
    waited minutes for a GPU (rocm), or passed them over without a word (cuda). One line names
    the record and the kinds; nothing is tuned, moved or imported."""
    import hashlib

    import tcl.tune
    from tcl.cli import main

    paths, inst, _ = tiny
    run = tmp_path / "run"
    _user_database(run / "database")   # one record, made for llvm: now for another kind
    records = run / "database" / "database_tuning_record.json"
    line = json.loads(records.read_text())
    line[1][2] = {"kind": kind}
    records.write_text(json.dumps(line) + "\n")
    (run / "run.json").write_text(json.dumps(
        {"network": inst.key, "device": "cpu-avx2", "model": "random", "update": "none",
         "seed": 0, "trials": 8, "population": 512, "generations": 4,
         "scheduler": "gradient"}))
    files = lambda: {str(p): hashlib.sha256(p.read_bytes()).hexdigest()  # noqa: E731
                     for p in sorted(tmp_path.rglob("*")) if p.is_file()}
    before = files()
    monkeypatch.setattr(tcl.tune.run, "network_module", lambda *a: 1 / 0)   # never tunes
    code = main(["--data", str(paths.root), "tune", "--network", "tiny", "--device",
                 "cpu-avx2", "--layout", "nchw", "--model", "random", "--trials", "8", "--out",
                 str(run)])
    lines = capsys.readouterr().err.splitlines()
    assert code == 2 and len(lines) == 1, lines
    assert f"{records}:1 is a record for target kind {kind!r}, not cpu-avx2's 'llvm'" in \
        lines[0], lines[0]
    assert files() == before


# (a worker's command line, a library it loads while it starts: its imports are under way)
@pytest.mark.parametrize("worker, loading", [("multiprocessing.spawn", "_polars_runtime"),
                                             ("tvm.exec.popen_worker", "libtvm")])
def test_ctrl_c_while_tunes_workers_start_prints_one_line(tmp_path, worker, loading):
    """Issue 38: a terminal's Ctrl-C (SIGINT to the whole process group) that reaches tune's
    worker processes while they start (the builder's pool, spawned; the runner's, MetaSchedule's
    popen workers), before their initializer could quiet them, printed a worker's traceback;
    and the runner's pool, shut down by the garbage collector from its own thread, printed one
    at exit. The workers start with SIGINT held and tune stops its pools itself: the command
    ends with its one line and 130. (Failed before the fix: both cases printed tracebacks.)"""
    import os
    import signal
    import subprocess
    import sys
    import time

    import psutil

    (tmp_path / "tiny_net.py").write_text(NET)
    data = tmp_path / "data"
    data.mkdir()
    (data / "user_networks.json").write_text(json.dumps(
        {"tiny": {"model": f"{tmp_path / 'tiny_net.py'}:build", "inputs": ["1x3x8x8"]}}))
    tcl = Path(sys.executable).parent / "tcl"
    proc = subprocess.Popen([tcl, "--data", str(data), "tune", "--network", "tiny", "--device",
                             "cpu-avx2", "--model", "random", "--trials", "8", "--population",
                             "16", "--generations", "1", "--out", str(tmp_path / "run")],
                            cwd=tmp_path, start_new_session=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    parent = psutil.Process(proc.pid)

    def starting() -> bool:
        for child in parent.children(recursive=True):
            try:
                if worker in " ".join(child.cmdline()) and \
                        loading in Path(f"/proc/{child.pid}/maps").read_text():
                    return True
            except (psutil.Error, OSError):
                pass
        return False

    deadline = time.time() + 600
    while time.time() < deadline and proc.poll() is None and not starting():
        time.sleep(0.01)
    assert proc.poll() is None, proc.communicate()
    os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=300)   # the workers hold stderr open until they end
    assert proc.returncode == 130, err
    assert "Traceback" not in out + err and "KeyboardInterrupt" not in err, err
    assert [line for line in err.splitlines() if line.strip()] == [
        "tcl: interrupted; finished work is stored, run the command again to resume"], err
