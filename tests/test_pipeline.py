"""The pipeline: params validation, a real `dvc repro` of the tiny profile in a temporary git
repository (with a fresh clone rebuilding without measuring), and the `pipeline` flow under
Prefect's test harness (a transient failure retried, only the new programs measured)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
import yaml

from tcl.config import TclError
from tcl.pipeline.params import load_params

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "tests" / "tiny_params.yaml"
BIN = Path(sys.executable).parent  # the venv's tcl and dvc


def tiny(changes: dict | None = None, drop: tuple[str, ...] = ()) -> dict:
    """The tiny profile with dotted keys set (``changes``) or removed (``drop``)."""
    raw = yaml.safe_load(TINY.read_text())
    for key, value in (changes or {}).items():
        *parents, last = key.split(".")
        node = raw
        for p in parents:
            node = node[p]
        node[last] = value
    for key in drop:
        *parents, last = key.split(".")
        node = raw
        for p in parents:
            node = node[p]
        del node[last]
    return raw


def write_params(directory: Path, raw: dict) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "params.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


# -- bad input: the message names the key, nothing runs --------------------------------------------
@pytest.mark.parametrize("changes, drop, message", [
    ({"devices": ["cpu-avx2", "gpu-9000"]}, (), "devices[1]: unknown device 'gpu-9000'"),
    ({"train.models": ["xgb", "foo"]}, (),
     "train.models[1]: unknown model kind 'foo' (known: mamba, tenset-mlp, tlp, xgb)"),
    ({"zoo.networks": ["bert_tiny", "resnet-1"]}, (), "zoo.networks[1]: unknown network 'resnet-1'"),
    ({}, ("sample.programs_per_task",), "sample.programs_per_task: missing value"),
    ({}, ("devices",), "devices: missing value"),
    ({}, ("train.hyper.mamba",), "train.hyper.mamba: missing value for train.models[1]"),
    ({"sample.programs_per_task": "many"}, (), "sample.programs_per_task: expected an integer"),
    ({"sample.programs_per_task": 0}, (), "sample.programs_per_task: must be >= 1"),
    ({"zoo.small": "yes"}, (), "zoo.small: expected true or false"),
    ({"zoo.factory_timeout_s": 0}, (), "zoo.factory_timeout_s: must lie in [1.0, 86400.0]"),
    ({"sample.programs_per_tsk": 3}, (), "sample.programs_per_tsk: unknown key"),
    ({"evaluate.top_k": [1, 0]}, (), "evaluate.top_k[1]: must be >= 1"),
    ({"devices": ["cpu-avx2", "cpu-avx2"]}, (), "devices[1]: device 'cpu-avx2' is listed twice"),
    ({"train.hyper.xgb": {"max_dpeth": 3}}, (), "train.hyper.xgb: model kind 'xgb' rejected"),
    ({"train.hyper.xgb": {"seed": 3}}, (), "train.hyper.xgb.seed: set the seed once"),
    ({"train.seeds": 0}, (), "train.seeds: must be >= 1"),
    ({"train.sources": ["reference", "logs"]}, (), "train.sources[1]: unknown source 'logs'"),
    ({}, ("train.seeds",), "train.seeds: missing value"),
])
def test_bad_params_name_the_key(tmp_path, changes, drop, message):
    path = write_params(tmp_path, tiny(changes, drop))
    with pytest.raises(TclError) as err:
        load_params(path)
    assert f"params.yaml: {message}" in str(err.value)


def test_bad_params_fail_before_any_work(tmp_path, capsys):
    from tcl.cli import main

    path = write_params(tmp_path, tiny({"train.models": ["xgb", "foo"]}))
    assert main(["stage", "zoo", "--params", str(path)]) == 2
    err = capsys.readouterr().err
    assert "train.models[1]: unknown model kind 'foo'" in err
    assert not (tmp_path / "data").exists()  # the zoo stage did not start
    with pytest.raises(TclError, match="params file .* does not exist"):
        load_params(tmp_path / "nope.yaml")


def test_project_params_are_valid():
    params = load_params(ROOT / "params.yaml")
    assert params.paths.root == ROOT / "data"
    assert set(params.train.models) == {"mamba", "tenset-mlp", "xgb"}
    assert params.train.seeds >= 3 and "tlp" in params.train.hyper   # tlp: one line away


def _ci_check(root: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(root / ".ci" / "run"), "--check"], cwd=root, text=True,
                          capture_output=True, timeout=60)


def test_ci_and_the_readme_check_params_before_the_main_job(tmp_path):
    """Issue 54: with an alias-bomb params.yaml, `dvc status` was silent for 90 s where `tcl
    params` refuses it in 2 s. The README's main job (what `.ci/run` runs) checks the params
    file first, and `.ci/run` refuses a README whose main job does not; `--check` reads the
    README's commands and runs none."""
    done = _ci_check(ROOT)
    assert done.returncode == 0 and "runs nothing" in done.stdout, done.stderr
    copy = tmp_path / "clone"
    (copy / ".ci").mkdir(parents=True)
    shutil.copy(ROOT / ".ci" / "run", copy / ".ci" / "run")
    unchecked = ROOT.joinpath("README.md").read_text().replace(
        ".venv/bin/tcl params --params params.yaml && ", "")
    assert unchecked != ROOT.joinpath("README.md").read_text()
    (copy / "README.md").write_text(unchecked)
    done = _ci_check(copy)
    assert done.returncode == 2 and done.stdout == "", done.stdout
    assert "does not check the params file first (tcl params --params params.yaml" in \
        done.stderr, done.stderr
    (copy / "README.md").write_text(ROOT.joinpath("README.md").read_text())
    assert _ci_check(copy).returncode == 0


def test_dvc_yaml_has_one_stage_per_device_and_model():
    out = subprocess.run([BIN / "dvc", "stage", "list", "--name-only"], cwd=ROOT, text=True,
                         capture_output=True, env=_env())
    assert out.returncode == 0, out.stderr
    names = out.stdout.split()
    params = load_params(ROOT / "params.yaml", check_models=False)
    expected = ["zoo", "sample", *[f"measure@{d}" for d in params.devices], "featurize",
                *[f"train@{d}-{m}" for d in params.devices for m in params.train.models],
                *[f"select@{d}" for d in params.select.devices], "distill-first",
                *[f"distill@{d}" for d in params.continual.sequence[1:]], "evaluate"]
    assert names == expected


def test_params_sequences_name_measured_devices_and_dvc_dag_builds(tmp_path):
    """params.yaml's continual sequence names devices the pipeline measures (tcl.pipeline.params
    refuses any other, naming it), and DVC builds the stage graph from it."""
    params = load_params(ROOT / "params.yaml", check_models=False)
    assert set(params.continual.sequence) <= set(params.devices) | set(params.select.devices)
    raw = yaml.safe_load((ROOT / "params.yaml").read_text())
    raw["continual"]["then"]["cpu-avx512"] = params.continual.sequence[-1]   # known, unmeasured
    raw["data"] = str(ROOT / raw["data"])   # the project's devices (zen4-1c is not built in)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    with pytest.raises(TclError, match="continual.then.cpu-avx512: device 'cpu-avx512' is not "
                                       "one the pipeline measures"):
        load_params(tmp_path / "params.yaml", check_models=False)
    out = subprocess.run([BIN / "dvc", "dag"], cwd=ROOT, text=True, capture_output=True,
                         env=_env(), timeout=300)
    assert out.returncode == 0, out.stderr
    for d in params.continual.sequence[1:]:
        assert f"distill@{d}" in out.stdout


def test_main_job_benchmark_reprints_a_recorded_run(tmp_path):
    """benchmarks/main_job.py --stages-from: the table of a recorded run (every stage, start-up,
    total, shares of the total); a file it did not record is a one-line error."""
    stages = [{"stage": name, "seconds": secs, "cpu_seconds": secs * 1.5}
              for name, secs in (("featurize", 30.0), ("train", 60.0))]
    run = {"command": "python -m flows.pipeline --params params.yaml", "commit": "0" * 40,
           "started": "s", "ended": "e", "host": "h", "cores": 2, "total_seconds": 100.0,
           "total_cpu_seconds": 160.0, "stages": stages,
           "fits": {"xgb": {"fits": 3, "seconds": 9.0}},
           "load_average": {"min": 1.0, "mean": 1.5, "max": 2.0, "every_s": 15}}
    recorded = tmp_path / "run.json"
    recorded.write_text(json.dumps(run))
    script = ROOT / "benchmarks" / "main_job.py"
    out = subprocess.run([sys.executable, script, "--stages-from", recorded],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    rows = {line.split("  ")[0].strip(): line.split() for line in out.stdout.splitlines()}
    assert rows["featurize"][1:4] == ["30.0", "30.0%", "45.0"]
    assert rows["train"][1:4] == ["60.0", "60.0%", "90.0"]
    assert "10.0" in rows["start-up (imports, Prefect API)"]          # 100 - 30 - 60
    assert rows["total"][1:4] == ["100.0", "100.0%", "160.0"]
    (tmp_path / "bad.json").write_text("{}")
    out = subprocess.run([sys.executable, script, "--stages-from", tmp_path / "bad.json"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and "not a run this script recorded" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1


# -- the tiny profile through DVC -------------------------------------------------------------
def _env() -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TCL_", "DVC_"))}
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env.update(TVM_LOG_LEVEL="WARNING", GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t",
               GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@t")
    return env


def _run(args: list, cwd: Path, timeout: int = 600) -> str:
    out = subprocess.run([str(a) for a in args], cwd=cwd, env=_env(), text=True,
                         capture_output=True, timeout=timeout)
    assert out.returncode == 0, f"{args} failed:\n{out.stdout[-4000:]}\n{out.stderr[-4000:]}"
    return out.stdout + out.stderr


def _records(data: Path) -> pl.DataFrame:
    files = sorted(data.glob("records/device=*/task=*/part-*.parquet"))
    return pl.concat([pl.read_parquet(f, columns=["program_id", "device"]) for f in files])


@pytest.fixture(scope="module")
def tiny_repo(tmp_path_factory) -> tuple[Path, str]:
    """A git repository holding the pipeline and the tiny profile, after one `dvc repro`."""
    repo = tmp_path_factory.mktemp("pipeline") / "repo"
    repo.mkdir()
    for name in ("dvc.yaml", ".dvcignore"):
        shutil.copy(ROOT / name, repo / name)
    # the stages' code dependencies (the installed package runs; this copy is what DVC hashes)
    shutil.copytree(ROOT / "tcl", repo / "tcl", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(TINY, repo / "params.yaml")
    _run(["git", "init", "-q"], repo)
    _run([BIN / "dvc", "init", "-q"], repo)
    _run([BIN / "dvc", "config", "core.analytics", "false"], repo)
    return repo, _run([BIN / "dvc", "repro"], repo)


@pytest.mark.slow
def test_dvc_repro_tiny(tiny_repo):
    repo, log = tiny_repo
    for stage in ("zoo", "sample", "measure@cpu-avx2", "featurize", "train@cpu-avx2-xgb",
                  "train@cpu-avx2-mamba", "evaluate"):
        assert f"Running stage '{stage}'" in log
    data = repo / "data"
    summary = json.loads((data / "reports" / "summary.json").read_text())
    assert set(summary["cpu-avx2"]) == {"xgb", "mamba"}
    assert 0 < summary["cpu-avx2"]["xgb"]["top1"] <= 1
    for name in ("evaluation.md", "evaluation.png", "metrics.json", "scores.csv"):
        assert (data / "reports" / name).stat().st_size > 0
    # train.seeds: 2 models per kind, each figure a mean with its standard error
    assert (data / "models" / "cpu-avx2" / "mamba.seeds" / "s1.model").is_file()
    assert summary["cpu-avx2"]["mamba"]["se_top1"] is not None
    report = (data / "reports" / "evaluation.md").read_text()
    assert " ± " in report and "n_seeds" in report
    records = _records(data)
    assert len(records) == records["program_id"].n_unique() > 0
    # DVC presents the evaluation: one row per device and model, a table a person can read;
    # 4 programs a task: top-5 picks them all, so it is n/a, never a trivial 1.000
    shown = _run([BIN / "dvc", "metrics", "show"], repo).strip().splitlines()
    assert shown[0].split()[0] == "Path" and "top1" in shown[0].split()
    assert any("by-model/cpu-avx2/xgb.json" in line for line in shown)
    assert max(map(len, shown)) <= 110, shown
    row = json.loads((data / "reports" / "by-model" / "cpu-avx2" / "xgb.json").read_text())
    assert row["top5"] is None and 0 < row["top1"] <= 1 and set(row) == {"top1", "top5",
                                                                       "pairwise"}
    _run([BIN / "dvc", "plots", "show", "-o", repo / "plots"], repo)
    page = (repo / "plots" / "index.html").read_text()
    assert "evaluation.png" in page and "scores_csv" in page
    # Measured data, features and models are committed to git: none goes to DVC's cache
    for ignore in data.rglob(".gitignore"):
        listed = ignore.read_text().split()
        assert not {"/features", "/records", "/zoo", "/mamba.model", "/xgb.model"} & set(listed)
    assert not list((repo / ".dvc" / "cache").rglob("*.dir"))
    # Nothing changed: nothing runs, and the measure query finds nothing new.
    again = _run([BIN / "dvc", "repro"], repo)
    assert "Running stage" not in again
    assert "nothing new to measure" in _run(
        [BIN / "tcl", "stage", "measure", "--device", "cpu-avx2", "--quiet"], repo)
    assert len(_records(data)) == len(records)


@pytest.mark.slow
def test_fresh_clone_rebuilds_without_measuring(tiny_repo, tmp_path):
    repo, _ = tiny_repo
    _run(["git", "add", "-A"], repo)
    _run(["git", "commit", "-q", "-m", "tiny pipeline with its measured data"], repo)
    clone = tmp_path / "clone"
    _run(["git", "clone", "-q", repo, clone], tmp_path)
    # features and models come with the clone (issue 53): nothing is computed again
    assert (clone / "data" / "features" / "VERSION.json").is_file()
    assert (clone / "data" / "models" / "cpu-avx2" / "mamba.model").is_file()
    log = _run([BIN / "dvc", "repro"], clone)
    assert "Running stage" not in log, log
    assert len(_records(clone / "data")) == len(_records(repo / "data"))
    assert json.loads((clone / "data" / "reports" / "summary.json").read_text())["cpu-avx2"]
    # a stage run anyway (its code changed, say) reuses every fit: their inputs are the same
    said = _run([BIN / "tcl", "stage", "train", "--device", "cpu-avx2", "--model", "mamba"],
                clone)
    assert "reused" in said and "train_secs" not in said, said
    assert _run(["git", "status", "--porcelain", "data/models", "data/features"],
                clone).strip() == ""


# -- the same pipeline as Prefect flows ------------------------------------------------------------
@pytest.mark.slow
def test_pipeline_flow(tiny_repo, tmp_path, monkeypatch):
    """More programs per task than the repository measured: the flow measures only the new ones,
    after one injected transient failure that Prefect retries; the report is an artifact."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey
    from prefect.testing.utilities import prefect_test_harness

    from flows.pipeline import pipeline
    from tcl.pipeline import stages
    from tcl.sampling import load_candidates

    repo, _ = tiny_repo
    for part in ("zoo", "candidates", "records"):
        shutil.copytree(repo / "data" / part, tmp_path / "data" / part)
    before = _records(tmp_path / "data")
    n_candidates = len(pl.read_parquet(tmp_path / "data" / "candidates" / "*.parquet"))
    params_file = write_params(tmp_path, tiny({"sample.programs_per_task": 5}))

    calls = []
    real_measure = stages.run_measure

    def flaky_measure(params, device, progress=True):
        calls.append(device)
        if len(calls) == 1:
            raise RuntimeError("runner worker died (injected)")
        return real_measure(params, device, progress)

    monkeypatch.setattr(stages, "run_measure", flaky_measure)
    with prefect_test_harness(server_startup_timeout=180):
        files = pipeline(params_file=str(params_file))
        with get_client(sync_client=True) as client:
            artifacts = client.read_artifacts(
                artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=["evaluation"])))
    assert calls == ["cpu-avx2", "cpu-avx2"]
    assert artifacts and "held-out" in artifacts[0].data
    assert Path(files["summary"]).exists() and Path(files["plot"]).exists()
    # each stage's start and end, in order (benchmarks/main_job.py's table); every seed's model
    timing = json.loads((tmp_path / "data" / "reports" / "pipeline-stages.json").read_text())
    assert [s["stage"] for s in timing["stages"]] == ["zoo", "sample", "measure", "featurize",
                                                      "train", "select", "distill", "evaluate"]
    assert all(s["seconds"] >= 0 and s["cpu_seconds"] >= 0 and s["start"] <= s["end"]
               for s in timing["stages"])
    for kind in ("xgb", "mamba"):
        assert (tmp_path / "data" / "models" / "cpu-avx2" / f"{kind}.seeds" / "s1.model").is_file()

    params = load_params(params_file)
    after = _records(tmp_path / "data")
    candidates = pl.concat([load_candidates(params.paths, t)
                            for t in stages.selected_tasks(params)["task_id"]])
    assert len(after) == after["program_id"].n_unique()  # nothing measured twice
    assert set(after["program_id"]) == set(candidates["program_id"])
    assert len(after) - len(before) == len(candidates) - n_candidates  # only the new ones
    # And once more: the query finds nothing left to measure.
    assert real_measure(params, "cpu-avx2", progress=False).measured == 0


@pytest.mark.slow
def test_appending_a_device_reruns_only_its_stages(tmp_path):
    """dvc repro, then a device appended to select.devices and continual.then: only its select
    stage (which measures its picks), its distill stage and the evaluation run; then nothing."""
    repo = tmp_path / "repo"
    repo.mkdir()
    for name in ("dvc.yaml", ".dvcignore"):
        shutil.copy(ROOT / name, repo / name)
    shutil.copytree(ROOT / "tcl", repo / "tcl", ignore=shutil.ignore_patterns("__pycache__"))
    raw = yaml.safe_load(TINY.read_text())
    raw["train"]["models"] = ["tenset-mlp"]
    raw["train"]["hyper"] = {"tenset-mlp": {"hidden": 16, "epochs": 3, "batch_size": 64}}
    raw["continual"].update(first="cpu-avx2", then={}, backbone="tenset-mlp", subset=0.5)
    raw["select"].update(teacher="cpu-avx2/tenset-mlp", budget=0.5)
    (repo / "params.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    _run(["git", "init", "-q"], repo)
    _run([BIN / "dvc", "init", "-q"], repo)
    _run([BIN / "dvc", "config", "core.analytics", "false"], repo)
    _run([BIN / "dvc", "repro"], repo)
    raw["select"]["devices"].append("cpu-avx2-1c")
    raw["continual"]["then"]["cpu-avx2-1c"] = "cpu-avx2"
    (repo / "params.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    log = _run([BIN / "dvc", "repro"], repo)
    for stage in ("select@cpu-avx2-1c", "distill@cpu-avx2-1c", "evaluate"):
        assert f"Running stage '{stage}'" in log
    for stage in ("zoo", "sample", "measure@cpu-avx2", "featurize", "train@cpu-avx2-tenset-mlp",
                  "distill-first"):
        assert f"Running stage '{stage}'" not in log
    reports = repo / "data" / "reports" / "continual"
    first = json.loads((reports / "cpu-avx2.json").read_text())
    added = json.loads((reports / "cpu-avx2-1c.json").read_text())
    assert added["parent"] == first["model"] and added["method"] == "distill"
    assert "Running stage" not in _run([BIN / "dvc", "repro"], repo)   # all up to date now
