"""Continual learning across devices: one model for every device, distilled device by device.

``make_distiller(name)`` gives one of ``DISTILLERS`` (each in its own module); ``MultiDeviceModel``
is the model they produce; ``tcl.continual.run`` puts them in the pipeline (the device
sequence, the model registry).
"""
from __future__ import annotations

import importlib

from ..config import TclError
from .base import DeviceData, Distiller, Settings
from .model import BACKBONES, MultiDeviceModel

__all__ = ["DISTILLERS", "BACKBONES", "DeviceData", "Distiller", "MultiDeviceModel", "Settings",
           "make_distiller"]

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
