"""Every `--dry-run` on a fresh clone of the committed project: it writes nothing that git
tracks (caches only under data/.cache, which git ignores), answers within a generous bound and
prints the estimate it promises."""
from __future__ import annotations

import hashlib
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# Generous: the target is 15 s on a quiet host. The bound holds the command's CPU seconds
# (user + system), which a shared, loaded test host does not inflate as it does the wall time.
BOUND_S = 60

# (arguments, return code, what the output must say)
DRY_RUNS = [
    (["collect", "--device", "cpu-avx2", "--dry-run"], 0, "to measure, about"),
    (["collect", "--device", "cpu-avx2", "--select", "rdu", "--budget", "0.1", "--dry-run"], 0,
     "min of measurement"),
    # more candidates per task than are stored: counted as still to sample, none sampled
    (["collect", "--device", "cpu-sse42", "--select", "random", "--budget", "50",
      "--programs-per-task", "64", "--networks", "bert_tiny", "--deploy", "resnet18",
      "--dry-run"], 0, "still to sample"),
    # not extracted (small inputs): named, not extracted, so nothing is left to plan
    (["collect", "--device", "cpu-avx2", "--networks", "resnet18", "--small", "--dry-run"], 2,
     "not extracted yet"),
    (["stage", "measure", "--device", "cpu-avx2", "--dry-run"], 0, "programs to measure on"),
    (["retire", "--device", "cpu-avx2", "--before", "2030-01-01T00:00Z", "--reason", "test",
      "--dry-run"], 0, "would retire"),
    # tasks, trials per task and the estimate with what it rests on; nothing tuned
    (["tune", "--network", "resnet18", "--device", "cpu-avx2", "--trials", "352",
      "--population", "64", "--generations", "1", "--dry-run"], 0,
     "352 trials over 22 tasks\ntrials per task: 16 each in the first round"),
    (["tune", "--network", "resnet18", "--device", "cpu-avx2", "--dry-run"], 0,
     "records/s, measured from cpu-avx2's "),
    (["tune", "--network", "resnet18", "--device", "cpu-avx2", "--trials", "8", "--dry-run"], 2,
     "fewer than the 22 tasks"),
    # the compile choices made for the user, each with its reason (tcl.tune.choices)
    (["tune", "--network", "resnet18", "--device", "cpu-avx2", "--dry-run"], 0,
     "chosen for you: nchwc: the network has convolutions"),
    (["tune", "--network", "bert_tiny", "--device", "cpu-avx2", "--dry-run"], 0,
     "chosen for you: nchw: the network has no convolution"),
    (["tune", "--network", "resnet18", "--device", "cpu-avx2", "--layout", "nchw", "--conv",
      "winograd-4", "--dry-run"], 0, "conv winograd-4: stride-1 3x3 convolutions are Winograd"),
]


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                          text=True).stdout


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _tracked_hashes(clone: Path) -> dict[str, str]:
    files = _git(clone, "ls-files", "-z").split("\0")
    return {f: hashlib.sha256((clone / f).read_bytes()).hexdigest() for f in files if f}


@pytest.fixture(scope="module")
def clone(tmp_path_factory) -> Path:
    """The committed state of this checkout, as a fresh clone has it (no features, no caches)."""
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    dest = tmp_path_factory.mktemp("fresh") / "tcl"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(dest)], check=True)
    return dest


@pytest.mark.parametrize("args,code,says", DRY_RUNS, ids=[" ".join(a[:2]) + f"-{i}"
                                                          for i, (a, _, _) in
                                                          enumerate(DRY_RUNS)])
def test_dry_runs_write_nothing_tracked_and_answer_in_time(clone, args, code, says):
    before = _tracked_hashes(clone)
    # The code under test is this checkout's; the clone is only the data (and params.yaml).
    env = {k: v for k, v in os.environ.items() if k != "TCL_DATA"}
    env.update(PYTHONPATH=str(ROOT), PYTHONDONTWRITEBYTECODE="1")
    start, used = time.perf_counter(), _children_cpu()
    out = subprocess.run([sys.executable, "-P", "-c", "import sys; from tcl.cli import main; "
                          "sys.exit(main())", *args], cwd=clone, env=env, capture_output=True,
                         text=True, timeout=10 * BOUND_S)
    wall, cpu = time.perf_counter() - start, _children_cpu() - used
    print(f"tcl {' '.join(args)}: {cpu:.1f} s CPU, {wall:.1f} s wall")
    assert out.returncode == code, out.stderr
    assert says in out.stdout + out.stderr
    assert cpu < BOUND_S
    assert _tracked_hashes(clone) == before
    changed = _git(clone, "status", "--porcelain", "--ignored", "--untracked-files=all")
    assert all(line[3:].startswith("data/.cache/") for line in changed.splitlines()), changed


# ---- a dry run refuses what the run refuses (issue 54 item 11) ------------------------------

def _one_line_refusal(capsys, argv: list[str]) -> str:
    from tcl.cli import main

    code = main(argv)
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1, (argv, code, err)
    return lines[0]


def test_a_dry_run_of_a_device_this_host_cannot_run_is_refused(tmp_path, capsys, monkeypatch):
    """`tune --device cpu-avx512 --dry-run` on a host without AVX-512, and a device whose code
    the host cannot run (bdver2: FMA4, XOP), refused by the run's own check."""
    import tcl.store.devices as devices
    from tcl.config import Paths
    from tcl.measure.devices import create

    data = tmp_path / "data"
    devices.DeviceRegistry(Paths(data)).add("bulldozer", {"kind": "llvm", "mcpu": "bdver2"})
    monkeypatch.setattr(devices, "host_cpu_flags", lambda: frozenset({"sse4_2", "avx", "avx2"}))
    for name in ("cpu-avx512", "bulldozer"):
        with pytest.raises(devices.TclError) as run:
            create(devices.DeviceRegistry(Paths(data)).get(name)).check_runnable()
        line = _one_line_refusal(capsys, ["--data", str(data), "tune", "--network", "resnet18",
                                          "--device", name, "--dry-run"])
        assert line == f"tcl: error: {run.value}", line


def test_a_pipelined_collection_dry_run_on_one_cpu_is_refused_as_the_run_is(tmp_path, capsys,
                                                                            monkeypatch):
    """`collect --pipelined --dry-run` on one CPU planned a run that is refused; both say the
    same line now, before anything is extracted or measured."""
    import os

    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: {0})
    data = tmp_path / "data"
    argv = ["--data", str(data), "collect", "--device", "cpu-avx2-1c", "--pipelined"]
    dry = _one_line_refusal(capsys, argv + ["--dry-run"])
    assert "a pipelined collection builds on cores cpu-avx2-1c does not use" in dry, dry
    assert _one_line_refusal(capsys, argv) == dry
    assert not (data / "zoo").exists()


def test_a_dry_run_of_a_model_that_names_nothing_is_refused(tmp_path, capsys):
    """`tune --model nosuchkind --dry-run` planned a run that says the model does not exist;
    the dry run says so now (a model training makes, latest or a kind, is still planned)."""
    data = tmp_path / "data"
    line = _one_line_refusal(capsys, ["--data", str(data), "tune", "--network", "resnet18",
                                      "--device", "cpu-avx2", "--model", "nosuchkind",
                                      "--dry-run"])
    assert line == ("tcl: error: model 'nosuchkind': nosuchkind does not exist (a kind trained "
                    "for 'cpu-avx2', or a model file)"), line
    line = _one_line_refusal(capsys, ["--data", str(data), "tune", "--network", "resnet18",
                                      "--device", "cpu-avx2", "--model", "none", "--dry-run"])
    assert "model 'none': this step needs a model" in line, line
