"""Every whole-file write of tcl/, flows/ and benchmarks/ goes through ``tcl.config.atomic_write``
(issue 56): read from the source with ``ast``, a call that writes a file whole (``write_text``,
``write_bytes``, ``savefig``, ``write_csv``/``write_parquet`` to a path, ``export_library``,
``copyfile``, ``open`` for writing) writes to the temporary path of an ``atomic_write`` block,
or is one of the writers its docstring names as not doing so."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# (a model's ``save`` is its own atomic writer: tcl.models.checkpoint, tcl.models.xgb)
WRITERS = {"write_text", "write_bytes", "savefig", "write_csv", "write_parquet",
           "export_library", "copyfile", "copy2"}
# atomic_write's docstring, "the writers that do not, and why" (appends are no whole-file write)
NOT_ATOMIC = {("tcl/store/catalog.py", "write_text"), ("tcl/measure/builder.py", "write_bytes"),
              ("tcl/models/__init__.py", "copy2"), ("benchmarks/main_job.py", "open")}


def _target(call: ast.Call) -> ast.expr | None:
    """The path a writer call writes: the object of ``path.write_text(...)``, else the first
    argument (``fig.savefig(path)``, ``frame.write_csv(path)``, ``open(path, "w")``)."""
    name = getattr(call.func, "attr", getattr(call.func, "id", None))
    if name in ("write_text", "write_bytes"):
        return call.func.value
    if name == "copyfile" or name == "copy2":
        return call.args[1] if len(call.args) > 1 else None
    return call.args[0] if call.args else None


def _writes(call: ast.Call) -> str | None:
    name = getattr(call.func, "attr", getattr(call.func, "id", None))
    if name == "open":   # open(path, "w") and path.open("w")
        modes = [a.value for a in call.args[1:2] if isinstance(a, ast.Constant)] + \
            [k.value.value for k in call.keywords if k.arg == "mode"
             and isinstance(k.value, ast.Constant)]
        return "open" if any("w" in m for m in modes) else None
    if name not in WRITERS or not isinstance(call.func, ast.Attribute):
        return None   # a bare write_text(...) is tcl.config's
    if name in ("write_csv", "write_parquet") and not call.args:
        return None   # to a string
    return name


def _unsafe_writes(path: Path) -> list[tuple[str, int]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    temporary = {item.optional_vars.id for node in ast.walk(tree) if isinstance(node, ast.With)
                 for item in node.items
                 if isinstance(item.optional_vars, ast.Name)
                 and getattr(item.context_expr, "func", None) is not None
                 and getattr(item.context_expr.func, "id", getattr(item.context_expr.func, "attr",
                                                                   None)) == "atomic_write"}
    for node in ast.walk(tree):   # for f, tmp in ((file, tmp_of_file), ...)
        if isinstance(node, ast.For) and any(isinstance(n, ast.Name) and n.id in temporary
                                             for n in ast.walk(node.iter)):
            temporary |= {n.id for n in ast.walk(node.target) if isinstance(n, ast.Name)}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and (name := _writes(node)):
            target = _target(node)
            inner = target.func if isinstance(target, ast.Call) else target   # str(tmp)
            inner = target.args[0] if isinstance(target, ast.Call) and target.args else inner
            if not (isinstance(inner, ast.Name) and inner.id in temporary):
                found.append((name, node.lineno))
    return found


def test_every_whole_file_write_goes_through_atomic_write():
    unsafe = {}
    for folder in ("tcl", "flows", "benchmarks"):
        for f in sorted((ROOT / folder).rglob("*.py")):
            rel = f.relative_to(ROOT).as_posix()
            if rel == "tcl/config.py":   # atomic_write and its helpers themselves
                continue
            left = [(n, line) for n, line in _unsafe_writes(f) if (rel, n) not in NOT_ATOMIC]
            if left:
                unsafe[rel] = left
    assert unsafe == {}, "write through tcl.config.atomic_write (write_text, save_figure ...)"


def test_the_check_sees_a_plain_write_and_passes_an_atomic_one(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("from pathlib import Path\n"
                 "def a(p, fig, frame):\n"
                 "    p.write_text('x')\n"
                 "    fig.savefig(p, dpi=9)\n"
                 "    with open(p, 'w') as fh:\n        fh.write('x')\n"
                 "    with open(p, 'a') as fh:\n        fh.write('x')\n"
                 "    frame.write_csv()\n"
                 "    with atomic_write(p, 'f') as tmp:\n"
                 "        tmp.write_text('x')\n        frame.write_csv(tmp)\n"
                 "        lib.export_library(str(tmp))\n")
    assert _unsafe_writes(f) == [("write_text", 3), ("savefig", 4), ("open", 5)]
