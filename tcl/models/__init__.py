"""Cost models: the registry of kinds, ``make_model`` and ``load_model``.

Model classes are imported on first use, so ``import tcl.models`` needs neither torch nor
xgboost, and a kind whose module is missing fails only when it is asked for.

Every saved model file names its kind: XGBModel writes JSON with a top-level ``"kind"``; the
neural models save a torch checkpoint (a dict) holding ``"kind"``. ``read_kind`` reads either.
"""
from __future__ import annotations

import importlib
import json
import os
from collections.abc import Iterator, Mapping
from pathlib import Path

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


class _Registry(Mapping[str, type[CostModel]]):
    """kind -> CostModel class, importing the class's module on first lookup."""

    def __init__(self, locations: dict[str, tuple[str, str]]):
        self._locations = locations
        self._classes: dict[str, type[CostModel]] = {}

    def __getitem__(self, kind: str) -> type[CostModel]:
        if kind not in self._classes:
            module, name = self._locations[kind]  # KeyError for unknown kinds, as a dict
            try:
                cls = getattr(importlib.import_module(module), name)
            except (ImportError, AttributeError) as e:
                raise TclError(f"model kind {kind!r} needs {module}.{name}, which cannot be "
                               f"imported: {e}") from e
            self._classes[kind] = cls
        return self._classes[kind]

    def __contains__(self, kind: object) -> bool:  # without importing the module
        return kind in self._locations

    def __iter__(self) -> Iterator[str]:
        return iter(self._locations)

    def __len__(self) -> int:
        return len(self._locations)


MODEL_KINDS: Mapping[str, type[CostModel]] = _Registry(_LOCATIONS)


def _model_class(kind: str) -> type[CostModel]:
    if kind not in MODEL_KINDS:
        raise TclError(f"unknown model kind {kind!r}; known kinds: {', '.join(MODEL_KINDS)}")
    return MODEL_KINDS[kind]


def make_model(kind: str, **params) -> CostModel:
    """A new, untrained model of ``kind`` (one of MODEL_KINDS) built with ``params``."""
    cls = _model_class(kind)
    try:
        return cls(**params)
    except TypeError as e:  # an unknown or missing keyword: say which model rejected it
        raise TclError(f"model kind {kind!r} rejected parameters {sorted(params)}: {e}") from e


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
    else:
        try:
            import torch

            try:
                doc = torch.load(path, map_location="cpu", weights_only=True)
            except Exception:  # checkpoints holding plain Python objects need the full unpickler
                doc = torch.load(path, map_location="cpu", weights_only=False)
            kind = doc.get("kind") if isinstance(doc, dict) else None
        except Exception:
            pass
    if not isinstance(kind, str):
        raise TclError(f"{path} is not a tcl model file: no 'kind' recorded in it "
                       f"(expected one written by a model's save())")
    return kind


def load_model(path: str | Path) -> CostModel:
    """Load a saved model, whatever its kind."""
    return _model_class(read_kind(path)).load(path)
