"""Continual learning across devices: one model for every device, distilled device by device.

``make_distiller(name)`` gives one of ``DISTILLERS`` (each in its own module); ``MultiDeviceModel``
is the model they produce; ``tcl.pipeline.continual`` puts them in the pipeline (the device
sequence, the model registry).
"""
from __future__ import annotations

import importlib

from ..classes import ClassRegistry
from ..models import MODEL_KINDS

__all__ = ["DISTILLERS", "BACKBONES", "DeviceData", "Distiller", "MultiDeviceModel", "Settings",
           "make_distiller"]

# The backbones a continual model can have (tcl.continual.model builds them). Named here, with
# the methods, so that parsing params and the CLI's choices do not import torch (about 2 s).
BACKBONES = ("tenset-mlp", "mamba")

DISTILLERS = ClassRegistry("distillation method", {   # name -> (module, class)
    "scratch": ("tcl.continual.scratch", "Scratch"),
    "finetune": ("tcl.continual.finetune", "FineTune"),
    "multitask": ("tcl.continual.multitask", "MultiTask"),
    "distill": ("tcl.continual.distill", "Distill"),
    "compress": ("tcl.continual.compress", "ProgressCompress"),
})


# The continual model is a model kind like the others (``load_model`` reads its files): added to
# tcl.models' kinds here, where it is defined, since tcl.models lies below this package.
MODEL_KINDS.add("continual", "tcl.continual.model", "MultiDeviceModel")

# The torch-backed names, from the modules that define them (which import this one for the
# names above, so this one imports them only when asked).
_LAZY = {"DeviceData": "base", "Distiller": "base", "Settings": "base", "make_distiller": "base",
         "MultiDeviceModel": "model"}


def __getattr__(name: str):
    """The torch-backed classes, imported on first use."""
    if name in _LAZY:
        return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
