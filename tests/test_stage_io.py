"""Every stage reads what an earlier stage wrote, and DVC knows the code each stage runs.

The README's main job once failed on a fresh clone: the featurize flow covered the selected
tasks while the train stage learnt from every task of ``train.sources`` (features of 541
long-tail tasks missing; every local run had them cached). These tests derive both sides from
the code and the params, so the next such gap fails here, not on a user's machine:
- the tasks whose features the train, distill and evaluate stages read are among those the
  featurize stage computes, on the committed data and params.yaml;
- the flows map the same tasks as ``tcl stage`` (one rule: ``tcl.pipeline.stages``);
- dvc.yaml's code deps of each stage cover the modules it imports (the import graph of
  tests/test_layers.py), so a change to any of them reruns the stage;
- a failing flow prints one line naming its log file; the traceback is in that file."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
import yaml

from test_layers import _graph

ROOT = Path(__file__).resolve().parents[1]

# The module whose code decides each stage's output (what `tcl stage NAME` calls into). zoo,
# sample and measure write measured data that is only ever added to (persist: true), so their
# code is no dependency by design (dvc.yaml's header).
STAGE_CODE = {
    "featurize": ["tcl.features"],
    "train": ["tcl.train"],
    "select": ["tcl.measure.active"],
    "distill-first": ["tcl.pipeline.continual"],
    "distill": ["tcl.pipeline.continual"],
    "evaluate": ["tcl.train", "tcl.evaluate"],
}


def _imports(entries: list[str]) -> set[str]:
    graph, seen, todo = _graph(), set(), list(entries)
    while todo:
        module = todo.pop()
        if module not in seen:
            seen.add(module)
            todo.extend(t for t in graph.get(module, ()) if t.startswith("tcl"))
    return seen


def _file_of(module: str) -> Path:
    """A module's file; a package is its whole directory (its registry loads its modules by
    name, which no import statement shows)."""
    path = Path(*module.split("."))
    return path if (ROOT / path).is_dir() else path.with_suffix(".py")


def _code_deps(stage: dict) -> list[Path]:
    return [Path(d) for d in stage["deps"] if d.startswith("tcl")]


def test_dvc_code_deps_cover_every_module_a_stage_imports():
    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    assert set(STAGE_CODE) <= set(stages)
    missing = {}
    for name, entries in STAGE_CODE.items():
        stage = stages[name].get("do", stages[name])
        deps = _code_deps(stage)
        assert all((ROOT / d).exists() for d in deps), (name, deps)
        uncovered = sorted(str(_file_of(m)) for m in _imports(entries)
                           if not any(_file_of(m) == d or d in _file_of(m).parents
                                      for d in deps))
        if uncovered:
            missing[name] = uncovered
    assert missing == {}, "add these to the stage's deps in dvc.yaml"


def test_the_import_walk_sees_lazy_and_package_imports():
    seen = _imports(["tcl.train"])
    assert {"tcl.dataset", "tcl.features", "tcl.models", "tcl.store.records"} <= seen
    assert "tcl.zoo.networks" in seen          # imported inside a function of tcl.dataset
    assert _file_of("tcl.models") == Path("tcl/models")


@pytest.fixture(scope="module")
def params():
    from tcl.pipeline.params import load_params

    return load_params(ROOT / "params.yaml")


def test_featurize_covers_every_task_a_later_stage_reads(params):
    """On the committed data: the tasks the train stages learn from (train.sources, held-out
    tasks never), the continual devices' and the evaluated ones all get features."""
    from tcl.dataset import measured
    from tcl.pipeline.stages import feature_tasks, selected_tasks
    from tcl.dataset import holdout_task_ids

    featurized = set(feature_tasks(params))
    held = holdout_task_ids(params.paths)
    # the pipeline's devices, and every other one with records (a user may name it next)
    devices = dict.fromkeys([*params.devices, *params.select.devices, *params.continual.sequence,
                             *(d.name[len("device="):]
                               for d in sorted(params.paths.records_dir.glob("device=*")))])
    for device in devices:
        read = set(measured(params.paths, device, sources=params.train.sources)["task_id"])
        assert read - held <= featurized, (device, len((read - held) - featurized))
    assert any(set(measured(params.paths, d, sources=params.train.sources)["task_id"]) - held
               for d in params.devices)        # the check has something to check
    evaluated = selected_tasks(params).filter(pl.col("holdout"))["task_id"]
    assert set(evaluated) <= featurized


@pytest.mark.parametrize("module, task_fn, stage_tasks", [
    ("flows.featurize", "featurize_tasks", "feature_tasks"),
    ("flows.sample", "sample_tasks", "sample_tasks"),
])
def test_the_flows_map_the_tasks_of_their_stage(params, monkeypatch, module, task_fn,
                                                 stage_tasks):
    import importlib

    from tcl.pipeline import stages

    flow_module = importlib.import_module(module)
    mapped = []
    monkeypatch.setattr(flow_module, "map_over_tasks",
                        lambda fn, p, task_ids: mapped.append(task_ids) or 0)
    getattr(flow_module, task_fn).fn(params)      # the flow's body, without a Prefect run
    assert mapped == [getattr(stages, stage_tasks)(params)]


def test_a_failing_flow_prints_one_line_naming_its_log(tmp_path):
    """A stage whose input is missing (no records: train has nothing to learn from) fails
    with one line that names the log file; Prefect's tracebacks are only in that file."""
    raw = yaml.safe_load((ROOT / "tests" / "tiny_params.yaml").read_text())
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(raw))
    out = subprocess.run([sys.executable, "-m", "flows.train", "--params",
                          str(tmp_path / "params.yaml")], cwd=ROOT, capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 2, out.stderr[-2000:]
    terminal = out.stdout + out.stderr
    assert "Traceback" not in terminal
    log = tmp_path / "data" / ".logs" / "train.log"
    errors = [line for line in out.stderr.splitlines() if line.startswith("train: error: ")]
    assert len(errors) == 1 and errors[0].endswith(f"(log: {log})"), terminal[-2000:]
    assert "Traceback" in log.read_text()
