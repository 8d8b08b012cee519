"""Cost models: the registry of kinds, ``make_model`` and ``load_model``.

Model classes are imported on first use, so ``import tcl.models`` needs neither torch nor
xgboost, and a kind whose module is missing fails only when it is asked for.

Every saved model file names its kind: XGBModel writes JSON with a top-level ``"kind"``; the
neural models save a torch checkpoint (a dict) holding ``"kind"``. ``read_kind`` reads either;
a checkpoint only with torch's restricted unpickler (``checkpoint.read_checkpoint``), so loading a
model file never runs code from it.
"""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from ..classes import ClassRegistry
from ..config import TclError
from .base import CostModel, ProgramSet

# OpenMP threads that spin while waiting slowed 2-thread training 5-10x whenever anything else
# ran on the two cores; sleeping waiters cost nothing measurable on a quiet machine. Read once,
# when torch (or xgboost) loads its OpenMP runtime, so it is set before any model module loads.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

__all__ = ["CostModel", "ProgramSet", "MODEL_KINDS", "make_model", "load_model", "read_kind",
           "convert_file"]

_LOCATIONS = {
    "mamba": ("tcl.models.mamba", "MambaModel"),
    "tenset-mlp": ("tcl.models.mlp", "TenSetMLP"),
    "tlp": ("tcl.models.tlp", "TLPModel"),
    "xgb": ("tcl.models.xgb", "XGBModel"),
}

# The kinds defined here; "continual" (the multi-device model) is added by tcl.continual when it
# loads: that package sits above this one, so this one names none of its modules.
MODEL_KINDS: ClassRegistry = ClassRegistry("model kind", _LOCATIONS)


def _model_class(kind: str) -> type[CostModel]:
    return MODEL_KINDS.get_class(kind)


def make_model(kind: str, **params) -> CostModel:
    """A new, untrained model of ``kind`` (one of MODEL_KINDS) built with ``params``."""
    return MODEL_KINDS.make(kind, **params)


def read_kind(path: str | Path) -> str:
    """The kind recorded in a saved model file (JSON or torch checkpoint)."""
    path = existing_file(Path(path))
    with open(path, "rb") as fh:
        head = fh.read(64).lstrip()
    kind = None
    if head.startswith(b"{"):
        try:
            doc = json.loads(path.read_text())
            kind = doc.get("kind") if isinstance(doc, dict) else None
        except (UnicodeDecodeError, json.JSONDecodeError):
            pass
    else:  # a torch checkpoint, read by the safe loader only (checkpoint.py): data, never code
        # lazy: the checkpoint reader imports torch, which costs ~3 s at import
        from .checkpoint import read_checkpoint

        doc = read_checkpoint(path)
        kind = doc.get("kind") if isinstance(doc, dict) else None
    if not isinstance(kind, str):
        raise TclError(f"{path} is not a tcl model file: no 'kind' recorded in it "
                       f"(expected one written by a model's save())")
    return kind


def existing_file(path: Path) -> Path:
    """``path``, a model file that exists; a directory or nothing there is a TclError."""
    if path.is_dir():
        raise TclError(f"model file {path} is a directory; expected a model file")
    if not path.is_file():
        raise TclError(f"model file {path} does not exist")
    return path


def load_model(path: str | Path, kind: str | None = None) -> CostModel:
    """Load a saved model, whatever its kind; with ``kind`` (a command asked for that kind,
    e.g. ``models/<device>/<kind>.model``), a file holding another kind is refused."""
    found = read_kind(path)
    if kind is not None and found != kind:
        raise TclError(f"model file {path} holds a {found!r} model, not the {kind!r} model asked "
                       f"for (a file of another kind under its name); train {kind!r} again or "
                       "give the file as --model FILE")
    return _model_class(found).load(path)


def convert_file(path: str | Path, content_hash: str | None = None) -> str:
    """Rewrite a model file of an older tcl (numpy values where tensors and floats belong),
    which the safe reader refuses, so that it reads back with ``weights_only=True``. It is read
    as data only, those numpy values allowed and nothing else: a file holding other Python
    objects (a crafted one) is refused, and nothing of it runs. The full unpickler is never
    used, so no file is trusted for being named. The original is kept beside it as
    ``<name>.pre-convert``. Returns what was done, in a line.

    ``content_hash``: the registry's record, for a registry file: converted only if its
    contents hash to the record (a shared root's file may have been swapped)."""
    from .checkpoint import OlderModelFile, UnsafeModelFile, read_checkpoint, write_checkpoint

    path = existing_file(Path(path))
    if path.is_symlink():   # the rewrite replaces the link, not the file the reader read
        raise TclError(f"model file {path} is a symbolic link (to {path.resolve()}); convert "
                       "rewrites a file in place, so it takes no link")
    registered = {} if content_hash is None else {"content_hash": content_hash}
    try:
        kind = read_kind(path)      # the safe reader: a file it reads needs no conversion
    except OlderModelFile:
        pass
    except UnsafeModelFile:
        if not registered:
            raise
    else:
        if registered:              # readable, but it must still be the registered model
            _model_class("continual").load(path, **registered)
        return f"{path}: already readable without the full unpickler ({kind}); left as it is"
    # data only; a registry file's refusal says it was replaced
    doc = read_checkpoint(path, registered=bool(registered), older=True)
    kind = doc.get("kind") if isinstance(doc, dict) else None
    if not isinstance(kind, str):
        raise TclError(f"{path} is not a tcl model file: no 'kind' recorded in it")
    cls = _model_class("continual" if registered else kind)
    new = path.with_name(path.name + ".converted")
    try:
        write_checkpoint(doc, new)
        cls.load(new, **registered)                     # it must load as its kind, safely
    except TclError as e:
        new.unlink(missing_ok=True)
        raise TclError(f"model file {path} cannot be converted: {e}") from None
    backup = path.with_name(path.name + ".pre-convert")
    shutil.copy2(path, backup)
    new.replace(path)                                   # atomic: the old file or the new
    return (f"{path}: converted ({kind}), read as data only: the numpy values an older tcl "
            f"wrote are now tensors and plain values, read with weights_only=True (original "
            f"kept as {backup})")
