"""The `tcl` command as a package (tcl/cli/): every command group is there, one layer order
inside it, and a group whose import breaks fails loudly instead of vanishing from the CLI."""
import argparse
import ast
import importlib
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import tcl.cli

ROOT = Path(__file__).resolve().parent.parent

# `tcl --help` before tcl/cli/ was a package (tcl/cli.py, tcl/cli_pipeline.py): every command,
# and the subcommands of those that have them
COMMANDS = {"device", "zoo", "collect", "featurize", "query", "import", "predict", "score",
            "tune", "export", "retire", "status", "serve", "datacard", "stage", "train",
            "evaluate", "distill", "models", "params"}
SUBCOMMANDS = {"device": {"list", "add"}, "zoo": {"add", "list"}, "models": {"list", "convert"}}


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    return next(a.choices for a in parser._actions
                if isinstance(a, argparse._SubParsersAction))


def test_every_command_group_is_still_there(capsys):
    commands = _subcommands(tcl.cli.build_parser())
    assert set(commands) == COMMANDS
    for name, subs in SUBCOMMANDS.items():
        assert set(_subcommands(commands[name])) == subs, name
    with pytest.raises(SystemExit) as done:
        tcl.cli.main(["--help"])
    listed = capsys.readouterr().out
    assert done.value.code == 0
    assert all(f"\n    {name} " in listed for name in COMMANDS), listed


def test_the_console_script_names_main():
    script = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]["tcl"]
    module, name = script.split(":")
    assert getattr(importlib.import_module(module), name) is tcl.cli.main


def test_layers_inside_the_cli():
    """common at the bottom (it imports no group), each group imports common only, and
    __init__ imports every group at its top: no circle inside tcl/cli/."""
    here = ROOT / "tcl" / "cli"
    groups = {f.stem for f in here.glob("*.py")} - {"__init__", "__main__", "common"}
    assert groups == {g.__name__.rsplit(".", 1)[1] for g in tcl.cli.GROUPS}
    for f in here.glob("*.py"):
        tree = ast.parse(f.read_text())
        inside = set()   # the tcl.cli modules this file imports
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                inside |= {node.module} if node.module else {a.name for a in node.names}
        expected = {"__init__": groups | {"common"}, "common": set(),
                    "__main__": set()}.get(f.stem, {"common"})
        assert inside <= expected, f"tcl/cli/{f.name} imports {sorted(inside - expected)}"
        if f.stem == "__init__":   # at the top, where a failure cannot be caught and dropped
            top = {a.name for node in tree.body if isinstance(node, ast.ImportFrom)
                   and node.level == 1 and not node.module for a in node.names}
            assert top == groups


def test_a_group_that_fails_to_import_stops_the_cli(monkeypatch):
    """A group whose import fails is not left out of the parser: importing tcl.cli fails."""
    monkeypatch.delitem(sys.modules, "tcl.cli")
    monkeypatch.setitem(sys.modules, "tcl.cli.pipeline", None)   # its import now fails
    with pytest.raises(ImportError, match=r"tcl\.cli\.pipeline"):
        importlib.import_module("tcl.cli")


def test_a_broken_library_module_is_reported_not_dropped(tmp_path):
    """`tcl models list` with tcl.registry broken (as by a bad install or a syntax error): the
    command exits non-zero with the traceback naming the module, rather than answering
    'invalid choice' for a command that went missing."""
    code = ("import runpy, sys; sys.modules['tcl.registry'] = None\n"
            "sys.argv = ['tcl', 'models', 'list']\n"
            "runpy.run_module('tcl.cli', run_name='__main__', alter_sys=True)\n")
    env = dict(os.environ, PYTHONPATH=str(ROOT), TCL_DATA=str(tmp_path / "data"))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         cwd=tmp_path, timeout=300)
    assert out.returncode != 0
    assert "Traceback" in out.stderr and "tcl.registry" in out.stderr, out.stderr
    assert "invalid choice" not in out.stderr and not out.stdout
