"""The library's layers read top to bottom (docs/architecture.md, "Layers"), checked on the
import graph of ``tcl`` as the source states it: every ``import`` and ``from`` of a tcl module,
at module top or inside a function, relative imports resolved; and every module loaded by a
string (``importlib.import_module("tcl...")``, ``__import__``, or a module named in a class
registry such as ``tcl.models.MODEL_KINDS``), which an import statement does not show. Built
with ``ast``: nothing of tcl is imported, so this takes well under a second."""
from __future__ import annotations

import ast
from functools import lru_cache
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "tcl"

# Bottom to top; a room is a top-level module of tcl or a subpackage as a whole. A room imports
# only rooms of its own layer or of layers below it, and rooms import each other in no circle.
BASE = {"tcl.config", "tcl.budget", "tcl.classes", "tcl.metrics", "tcl.tvm_compat"}
STORE = {"tcl.store"}
PIPELINE = {"tcl.pipeline"}
FACES = {"tcl.cli"}   # the CLI package, tcl/cli/
# Everything else is a concept (zoo, sampling, features, models, samplers, measure, continual,
# train, evaluate, tune ...), between the store and the pipeline.

# Imports that run up a layer, each with its reason. None today.
ALLOWED_UPWARD: dict[tuple[str, str], str] = {}

# Rooms left out of the circle checks, each with its reason. None today.
CIRCLE_EXEMPT: set[str] = set()


def _name_of(path: Path) -> tuple[str, bool]:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        return ".".join(parts[:-1]), True
    return ".".join(parts), False


@lru_cache(maxsize=1)
def _files() -> dict[tuple[str, bool], Path]:
    return {_name_of(f): f for f in sorted(PACKAGE.rglob("*.py"))}


def _known(name: str) -> str:
    """The module itself, or the package that defines the name."""
    modules = {m for m, _ in _files()}
    while name not in modules and "." in name:
        name = name.rsplit(".", 1)[0]
    return name


def imported(node: ast.AST, module: str, is_package: bool) -> dict[str, str]:
    """What an import statement of ``module`` binds: name -> the module it comes from (relative
    imports resolved; ``from pkg import sub`` imports the submodule ``pkg.sub``); {} for any
    other node."""
    modules = {name for name, _ in _files()}
    if isinstance(node, ast.Import):
        return {(a.asname or a.name.split(".")[0]): a.name for a in node.names}
    if not isinstance(node, ast.ImportFrom):
        return {}
    if node.level:
        base = module.split(".")[:len(module.split(".")) - node.level + (1 if is_package else 0)]
        source = ".".join(base + ([node.module] if node.module else []))
    else:
        source = node.module or ""
    return {(a.asname or a.name): f"{source}.{a.name}" if f"{source}.{a.name}" in modules
            else source for a in node.names}


@lru_cache(maxsize=1)
def _graph() -> dict[str, set[str]]:
    """Module -> the tcl modules (and ``flows`` modules) it imports."""
    graph: dict[str, set[str]] = {}
    for (module, is_package), path in _files().items():
        out = graph.setdefault(module, set())
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            for name in imported(node, module, is_package).values():
                if name.split(".")[0] == "flows":
                    out.add(name)
                elif name.split(".")[0] == "tcl" and _known(name) != module:
                    out.add(_known(name))
    return graph


def string_loads(source: str) -> set[str]:
    """The tcl modules ``source`` loads by a string: the literal argument of an
    ``import_module``/``__import__`` call, and any string that is a tcl module's full name (a
    class registry's ``(module, class)`` entries; the bare "tcl" is a program's name too)."""
    modules = {m for m, _ in _files()}
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and node.args \
                and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str) \
                and getattr(node.func, "attr", getattr(node.func, "id", None)) \
                in ("import_module", "__import__") \
                and node.args[0].value.split(".")[0] == "tcl":
            found.add(_known(node.args[0].value))
        elif isinstance(node, ast.Constant) and node.value in modules - {"tcl"}:
            found.add(node.value)
    return found


@lru_cache(maxsize=1)
def _loads() -> dict[str, set[str]]:
    """Module -> the tcl modules it loads by a string (``string_loads``), itself left out."""
    return {m: loads - {m} for (m, _), f in _files().items()
            if (loads := string_loads(f.read_text(encoding="utf-8")) - {m})}


def _room(module: str) -> str:
    return ".".join(module.split(".")[:2])


def _layer(room: str) -> int:
    for rank, layer in enumerate((BASE, STORE, None, PIPELINE, FACES)):
        if layer is not None and room in layer:
            return rank
    return 2 if room != "tcl" else 0


def _circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def _tcl_edges(exempt: set[str], loads: bool = False) -> dict[str, set[str]]:
    """Module -> the tcl modules it imports (and, with ``loads``, loads by a string)."""
    extra = _loads() if loads else {}
    return {m: {t for t in ts | extra.get(m, set()) if t.startswith("tcl")
                and _room(t) not in exempt}
            for m, ts in _graph().items() if _room(m) not in exempt}


def test_the_graph_sees_the_library():
    graph = _graph()
    assert {"tcl.config", "tcl.store.catalog", "tcl.pipeline.params", "tcl.pipeline.stages"} \
        <= set(graph)
    assert "tcl.store.records" in graph["tcl.store.catalog"]
    assert "tcl.pipeline.params" in graph["tcl.pipeline.stages"]   # a relative import resolved


def test_the_graph_sees_modules_loaded_by_a_string():
    loads = _loads()
    assert {"tcl.samplers.rdu", "tcl.samplers.random"} <= loads["tcl.samplers"]
    assert "tcl.continual.scratch" in loads["tcl.continual"]     # DISTILLERS
    assert "tcl.continual.model" in loads["tcl.continual"]       # the "continual" model kind
    assert string_loads('import importlib\nimportlib.import_module("tcl.continual.model")\n'
                        '__import__("tcl.registry")\n') == {"tcl.continual.model",
                                                             "tcl.registry"}


def test_no_import_circles_between_modules_or_rooms():
    # modules: imports only (a package's registry loads its own modules, which import it back);
    # rooms: string loads too
    assert _circles(_tcl_edges(CIRCLE_EXEMPT)) == []
    rooms: dict[str, set[str]] = {}
    for m, ts in _tcl_edges(CIRCLE_EXEMPT, loads=True).items():
        rooms.setdefault(_room(m), set()).update(_room(t) for t in ts if _room(t) != _room(m))
    assert _circles(rooms) == []


def test_imports_point_down_the_layers():
    upward = {(m, t) for m, ts in _tcl_edges(set(), loads=True).items() for t in ts
              if _layer(_room(t)) > _layer(_room(m))}
    assert upward == set(ALLOWED_UPWARD), "an import runs up a layer: move the shared thing down"


def test_only_the_pipeline_and_the_cli_read_the_params():
    readers = {m for m, ts in _graph().items() if "tcl.pipeline.params" in ts}
    assert readers and all(_room(m) in PIPELINE | FACES for m in readers), sorted(readers)


def test_nothing_in_tcl_imports_flows_and_flows_never_the_cli():
    """flows/ sits above the library: no module of tcl, the CLI included, imports it or loads it
    by a string (the CLI starts a flow by its name: ``tcl.pipeline.prefect_setup.flow_named``,
    over pyproject.toml's entry points); and flows/ imports no CLI module (the two faces stand
    side by side)."""
    importers = {m for m, ts in _graph().items() if any(t.split(".")[0] == "flows" for t in ts)}
    assert importers == set(), sorted(importers)
    for (module, _), f in _files().items():
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            assert not (isinstance(node, ast.Constant) and isinstance(node.value, str)
                        and (node.value == "flows" or node.value.startswith("flows."))), \
                f"{module} names the module {node.value!r}"
    for f in sorted((PACKAGE.parent / "flows").glob("*.py")):
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            assert not any(n.startswith("tcl.cli") for n in names), f"{f.name}: {names}"
