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
from pathlib import Path

from ..classes import ClassRegistry
from ..config import TclError
from .base import CostModel, ProgramSet

# OpenMP threads that spin while waiting slowed 2-thread training 5-10x whenever anything else
# ran on the two cores; sleeping waiters cost nothing measurable on a quiet machine. Read once,
# when torch (or xgboost) loads its OpenMP runtime, so it is set before any model module loads.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

__all__ = ["CostModel", "ProgramSet", "MODEL_KINDS", "make_model", "load_model", "read_kind"]

_LOCATIONS = {
    "mamba": ("tcl.models.mamba", "MambaModel"),
    "tenset-mlp": ("tcl.models.mlp", "TenSetMLP"),
    "tlp": ("tcl.models.tlp", "TLPModel"),
    "xgb": ("tcl.models.xgb", "XGBModel"),
    "continual": ("tcl.continual.model", "MultiDeviceModel"),
}


MODEL_KINDS: ClassRegistry = ClassRegistry("model kind", _LOCATIONS)


def _model_class(kind: str) -> type[CostModel]:
    return MODEL_KINDS.get_class(kind)


def make_model(kind: str, **params) -> CostModel:
    """A new, untrained model of ``kind`` (one of MODEL_KINDS) built with ``params``."""
    return MODEL_KINDS.make(kind, **params)


def read_kind(path: str | Path) -> str:
    """The kind recorded in a saved model file (JSON or torch checkpoint)."""
    path = Path(path)
    if not path.is_file():
        raise TclError(f"model file {path} does not exist")
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
        from .checkpoint import read_checkpoint

        doc = read_checkpoint(path)
        kind = doc.get("kind") if isinstance(doc, dict) else None
    if not isinstance(kind, str):
        raise TclError(f"{path} is not a tcl model file: no 'kind' recorded in it "
                       f"(expected one written by a model's save())")
    return kind


def load_model(path: str | Path) -> CostModel:
    """Load a saved model, whatever its kind."""
    return _model_class(read_kind(path)).load(path)
