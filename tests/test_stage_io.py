"""Every stage reads what an earlier stage wrote, and DVC knows the code each stage runs.

The README's main job once failed on a fresh clone: the featurize flow covered the selected
tasks while the train stage learnt from every task of ``train.sources`` (features of 541
long-tail tasks missing; every local run had them cached). These tests derive both sides from
the code and the params, so the next such gap fails here, not on a user's machine:
- the tasks whose features the train, distill and evaluate stages read are among those the
  featurize stage computes, on the committed data and params.yaml;
- the flows map the same tasks as ``tcl stage`` (one rule: ``tcl.pipeline.stages``);
- dvc.yaml's code deps of each stage cover every module its ``run_<stage>`` function reaches
  (followed from the function, not from a module picked by hand), so a change to any of them
  reruns the stage;
- a failing flow prints one line naming its log file; the traceback is in that file."""
from __future__ import annotations

import ast
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

import polars as pl
import pytest
import yaml

from test_layers import _files, imported, string_loads

ROOT = Path(__file__).resolve().parents[1]

# `tcl stage NAME` (each DVC stage's cmd) calls run_NAME of this module (tcl/cli/pipeline.py).
STAGES = "tcl.pipeline.stages"
# zoo, sample and measure write measured data that is only ever added to (persist: true), so
# their code is no dependency by design (dvc.yaml's header): they list none.
MEASURED_DATA = {"zoo", "sample", "measure"}


def _run_function(stage: dict) -> str:
    cmd = stage["cmd"].split()
    assert cmd[:2] == ["tcl", "stage"], stage["cmd"]
    return f"run_{cmd[2]}"


class _Module:
    """A tcl module as the walk reads it: its top-level definitions (functions and classes), its
    other top-level statements (constants, registries) and the names they bind, and what its
    top-level imports bind (name -> the module and the name in it; None: the module itself)."""

    def __init__(self, module: str):
        (_, is_package), path = next((k, f) for k, f in _files().items() if k[0] == module)
        self.name, self.is_package = module, is_package
        self.source = path.read_text(encoding="utf-8")
        tree = ast.parse(self.source)
        self.defs = {n.name: n for n in tree.body
                     if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
        self.top = [n for n in tree.body if n not in self.defs.values()
                    and not isinstance(n, (ast.Import, ast.ImportFrom))]
        self.top_names = {t.id for n in self.top for t in ast.walk(n)
                          if isinstance(t, ast.Name) and isinstance(t.ctx, ast.Store)}
        self.imports = self.binds(self.top + [n for n in tree.body
                                              if isinstance(n, (ast.Import, ast.ImportFrom))])

    def binds(self, nodes) -> dict[str, tuple[str, str | None]]:
        found = {}
        for node in (n for top in nodes for n in ast.walk(top)):
            targets = imported(node, self.name, self.is_package)
            for a in getattr(node, "names", []) if targets else []:
                bound = a.asname or a.name.split(".")[0]
                module = targets[bound]
                found[bound] = (module, None if isinstance(node, ast.Import)
                                or module.endswith(f".{a.name}") else a.name)
        return found


@lru_cache(maxsize=None)
def _module(name: str) -> _Module:
    return _Module(name)


def _without_annotations(tree: ast.AST):
    """Every node of ``tree`` but those of its type annotations (not run: ``from __future__
    import annotations``; a name used only as a type is no code a stage runs)."""
    todo = [tree]
    while todo:
        node = todo.pop()
        yield node
        for field, value in ast.iter_fields(node):
            if field not in ("annotation", "returns"):
                todo.extend(v for v in (value if isinstance(value, list) else [value])
                            if isinstance(v, ast.AST))


def _reached(function: str) -> set[str]:
    """The tcl modules that ``function`` of the stages module reaches, by the names it uses:
    each name resolved to what it is (a function or class of its module, a constant or registry
    of it, or what an import at the module's top or inside the function binds, the ``# lazy:``
    imports), whose own names are followed in turn, a class with all its methods; and every
    module a reached part loads by a string (a class registry's entries), as a whole. Not a
    precise call graph (a method called on an object is reached through its class), but it
    follows calls rather than imports: a module's other functions, and the stages module's
    imports for other stages, are not this stage's code."""
    modules, seen, todo = set(), set(), [(STAGES, function)]
    while todo:
        module, name = todo.pop()
        if (module, name) in seen or module.split(".")[0] != "tcl" or module == "tcl":
            continue
        seen.add((module, name))
        modules.add(module)
        m = _module(module)
        if name == "*":                              # loaded by a string: all of it
            todo += [(module, n) for n in m.defs] + [(module, "<top>")]
            continue
        if name in m.imports and name not in m.defs:  # a name the module imports (re-exports)
            todo.append((m.imports[name][0], m.imports[name][1] or "<top>"))
            continue
        parts = m.top if name not in m.defs else [m.defs[name]]
        nodes = [n for part in parts for n in _without_annotations(part)]
        local = {**m.imports, **m.binds(parts)}
        for node in nodes:
            if isinstance(node, ast.Name) and node.id in local:
                target, inner = local[node.id]
                todo.append((target, inner or "<top>"))
            elif isinstance(node, ast.Name) and node.id in m.defs:
                todo.append((module, node.id))
            elif isinstance(node, ast.Name) and node.id in m.top_names:
                todo.append((module, "<top>"))
            elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                    and node.value.id in local and local[node.value.id][1] is None:
                todo.append((local[node.value.id][0], node.attr))   # module.function
        todo += [(loaded, "*") for part in parts
                 for loaded in string_loads(ast.unparse(part)) - {module}]
    return modules


def _file_of(module: str) -> Path:
    """A module's file; a package is its whole directory (its registry loads its modules by
    name, which no import statement shows)."""
    path = Path(*module.split("."))
    return path if (ROOT / path).is_dir() else path.with_suffix(".py")


def _code_deps(stage: dict) -> list[Path]:
    return [Path(d) for d in stage.get("deps", []) if d.startswith("tcl")]


def _stages() -> dict[str, dict]:
    return {name: s.get("do", s)
            for name, s in yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"].items()}


def test_dvc_code_deps_cover_every_module_a_stages_run_function_reaches():
    missing = {}
    for name, stage in _stages().items():
        deps = _code_deps(stage)
        assert all((ROOT / d).exists() for d in deps), (name, deps)
        if name in MEASURED_DATA:
            assert deps == [], f"{name}: measured data, no code dependency (dvc.yaml's header)"
            continue
        uncovered = sorted({str(_file_of(m)) for m in _reached(_run_function(stage))
                            if not any(_file_of(m) == d or d in _file_of(m).parents
                                       for d in deps)})
        if uncovered:
            missing[name] = uncovered
    assert missing == {}, "add these to the stage's deps in dvc.yaml"


def test_the_walk_starts_at_the_run_function_and_sees_lazy_and_package_imports():
    stages = _stages()
    assert _run_function(stages["distill-first"]) == "run_distill"
    train = _reached("run_train")
    assert {"tcl.pipeline.stages", "tcl.train", "tcl.dataset", "tcl.features", "tcl.models",
            "tcl.store.records"} <= train
    assert "tcl.zoo.networks" in train            # imported inside a function of tcl.dataset
    assert "tcl.models.xgb" in train              # loaded by a string: MODEL_KINDS
    assert "tcl.pipeline.continual" in _reached("run_distill")   # a lazy import of run_distill
    # what the select stage's deps lacked while the walk started at tcl.measure.active (issue 56)
    assert {"tcl.pipeline.inputs", "tcl.registry"} <= _reached("run_select")
    assert "tcl.pipeline.inputs" in _reached("run_featurize")    # via feature_tasks, a callee
    # the stages module's top imports serve other stages: select's code is not featurize's
    assert "tcl.measure.active" not in _reached("run_featurize")
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
