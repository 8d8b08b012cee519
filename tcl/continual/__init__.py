"""Continual learning across devices: one model for every device, distilled device by device.

``make_distiller(name)`` gives one of ``DISTILLERS`` (each in its own module); ``MultiDeviceModel``
is the model they produce; ``tcl.continual.run`` puts them in the pipeline (the device
sequence, the model registry).
"""
from __future__ import annotations

import importlib

from typing import TYPE_CHECKING

from ..config import TclError

if TYPE_CHECKING:
    from .base import DeviceData, Distiller, Settings
    from .model import MultiDeviceModel

__all__ = ["DISTILLERS", "BACKBONES", "DeviceData", "Distiller", "MultiDeviceModel", "Settings",
           "make_distiller"]

# The backbones a continual model can have (tcl.continual.model builds them). Named here, with
# the methods, so that parsing params and the CLI's choices do not import torch (about 2 s).
BACKBONES = ("tenset-mlp", "mamba")

DISTILLERS = {   # name -> (module, class)
    "scratch": ("scratch", "Scratch"),
    "finetune": ("finetune", "FineTune"),
    "multitask": ("multitask", "MultiTask"),
    "distill": ("distill", "Distill"),
    "compress": ("compress", "ProgressCompress"),
}


def make_distiller(name: str) -> Distiller:
    if name not in DISTILLERS:
        raise TclError(f"unknown distillation method {name!r}; known: {', '.join(DISTILLERS)}")
    module, cls = DISTILLERS[name]
    return getattr(importlib.import_module(f"{__name__}.{module}"), cls)()


_LAZY = {"DeviceData": "base", "Distiller": "base", "Settings": "base",
         "MultiDeviceModel": "model"}


def __getattr__(name: str):
    """The torch-backed classes, imported on first use."""
    if name in _LAZY:
        return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
