"""One cost model for every device learned so far: a shared trunk and a small head per device.

The trunk is a backbone cost net (TenSet-MLP or Mamba) without its scoring head; each device
gets its own copy of that head (``n_parameters``: the shared part and the part per device). A
``MultiDeviceModel`` is a ``CostModel`` (kind "continual"): ``predict`` scores with the head of
its ``target`` device, ``for_device(d)`` gives the same weights aimed at another device, so
evaluation, samplers and tuning use it like any model.
"""
from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch
from torch import Tensor, nn

from ..config import TclError
from ..models import make_model
from ..models.base import CostModel, ProgramSet
from ..models.checkpoint import read_checkpoint, write_checkpoint
from ..models.nn import Batch, CostNet, NeuralCostModel
from . import BACKBONES

HEAD_ATTR = {"tenset-mlp": "decoder", "mamba": "head"}   # the backbone net's scoring head


class ContinualNet(CostNet):
    """``trunk.embed`` then the head of the active device. Batching, input scales and sequence
    lengths are the trunk's, so the backbone's scoring and training machinery applies as is."""

    def __init__(self, trunk: CostNet, head: nn.Module, devices: list[str]) -> None:
        super().__init__(trunk.needs, trunk.max_stores, trunk.max_tokens)
        del self.store_scale, self.token_scale      # the trunk's buffers are the ones used
        self.trunk = trunk
        self.heads = nn.ModuleList(copy.deepcopy(head) for _ in devices)
        self.devices = list(devices)
        self.active = len(devices) - 1

    # the trunk's input handling
    def batch(self, ps: ProgramSet, index: np.ndarray) -> Batch:
        return self.trunk.batch(ps, index)

    def fit_scales(self, ps: ProgramSet) -> None:
        self.trunk.fit_scales(ps)

    def seq_lengths(self, ps: ProgramSet) -> np.ndarray:
        return self.trunk.seq_lengths(ps)

    def embed(self, b: Batch) -> Tensor:
        return self.trunk.embed(b)

    def head_of(self, device: str) -> nn.Module:
        return self.heads[self.index(device)]

    def index(self, device: str) -> int:
        if device not in self.devices:
            raise TclError(f"this model has not learned device {device!r}; it serves "
                           f"{', '.join(self.devices)}")
        return self.devices.index(device)

    def forward(self, b: Batch) -> Tensor:
        return self.heads[self.active](self.trunk.embed(b)).squeeze(-1)

    def scores_all(self, b: Batch) -> Tensor:
        """(n, devices): every head's score from one trunk pass."""
        z = self.trunk.embed(b)
        return torch.stack([h(z).squeeze(-1) for h in self.heads], dim=1)

    def add_device(self, device: str, like: str | None = None) -> None:
        """A head for ``device``: a copy of ``like``'s head (warm start), or of the last one."""
        if device in self.devices:
            raise TclError(f"the model already has a head for device {device!r}")
        source = self.heads[self.index(like) if like else len(self.heads) - 1]
        self.heads.append(copy.deepcopy(source))
        self.devices.append(device)
        self.active = len(self.devices) - 1


class MultiDeviceModel(CostModel):
    """The continual cost model. ``backbone``: "tenset-mlp" or "mamba" with its ``hyper``
    (architecture and training keywords, as ``make_model``); ``devices``: heads in the order
    learned; ``target``: the device ``predict`` scores for (default: the last learned).
    ``lineage``: how it was made (method, parent content hash, data snapshot); saved with it."""

    kind: ClassVar[str] = "continual"
    version: ClassVar[int] = 1

    def __init__(self, backbone: str, devices: list[str], hyper: dict[str, Any] | None = None,
                 *, seed: int = 0, device: str = "auto") -> None:
        if backbone not in BACKBONES:
            raise TclError(f"continual backbone must be one of {list(BACKBONES)}, "
                           f"not {backbone!r}")
        if not devices or len(set(devices)) != len(devices):
            raise TclError(f"a continual model needs distinct device names, got {devices!r}")
        self.backbone, self.hyper = backbone, {**(hyper or {}), "seed": seed}
        self.base: NeuralCostModel = make_model(backbone, device=device, **self.hyper)
        trunk = self.base.net
        head = getattr(trunk, HEAD_ATTR[backbone])
        setattr(trunk, HEAD_ATTR[backbone], nn.Identity())   # heads live in ContinualNet
        self.base.net = ContinualNet(trunk, head, list(devices)).to(self.base.device)
        self.lineage: dict[str, Any] = {}

    # -- the model's parts ----------------------------------------------------------------------
    @property
    def net(self) -> ContinualNet:
        return self.base.net

    @property
    def devices(self) -> list[str]:
        return list(self.net.devices)

    @property
    def target(self) -> str:
        return self.net.devices[self.net.active]

    @property
    def config(self) -> dict[str, Any]:
        return self.base.config

    def for_device(self, device: str) -> "MultiDeviceModel":
        """The same weights (shared, not copied) scoring for ``device``."""
        view = copy.copy(self)
        view.base = copy.copy(self.base)
        view.base.net = copy.copy(self.net)
        view.base.net._modules = self.net._modules   # same trunk and heads
        view.base.net.active = self.net.index(device)
        return view

    def n_parameters(self) -> dict[str, int]:
        """{"shared": trunk, "per_device": one head, "total": trunk + every head}."""
        shared = sum(p.numel() for p in self.net.trunk.parameters())
        per = sum(p.numel() for p in self.net.heads[0].parameters())
        return {"shared": shared, "per_device": per, "total": shared + per * len(self.devices)}

    def scaled(self) -> bool:
        return self.base._scaled

    # -- CostModel ------------------------------------------------------------------------------
    def fit(self, train: ProgramSet, valid: ProgramSet | None = None) -> "MultiDeviceModel":
        """Train every part on the target device's programs (what training from scratch does)."""
        self.base.fit(train, valid)
        return self

    def predict(self, programs: ProgramSet) -> np.ndarray:
        return self.base.predict(programs)

    def scores(self, programs: ProgramSet, device: str) -> np.ndarray:
        return self.for_device(device).predict(programs)

    def embed(self, programs: ProgramSet) -> np.ndarray:
        return self.base.embed(programs)

    def content_hash(self) -> str:
        """sha256 of the weights, the heads' devices and the architecture: equal models, equal
        hash (the registry's content id), whatever file they were saved to."""
        return _content_hash(self.kind, self.version, self.backbone, self.hyper, self.devices,
                             self.net.state_dict())

    def save(self, path: str | Path) -> None:
        write_checkpoint({"kind": self.kind, "version": self.version, "backbone": self.backbone,
                          "hyper": self.hyper, "devices": self.devices, "target": self.target,
                          "lineage": json.dumps(self.lineage, default=str),
                          "state_dict": self.net.state_dict()}, path)

    @classmethod
    def load(cls, path: str | Path, device: str = "auto",
             content_hash: str | None = None) -> "MultiDeviceModel":
        """The model saved at ``path``; with ``content_hash`` (the registry's), a file whose
        contents hash otherwise is refused before a model is built from it."""
        path = Path(path)
        blob = read_checkpoint(path, registered=content_hash is not None)
        need = {"kind", "version", "backbone", "hyper", "devices", "state_dict"}
        if not isinstance(blob, dict) or not need <= set(blob):
            raise TclError(f"model file {path} is not a continual model file "
                           f"(expected {sorted(need)})")
        if blob["kind"] != cls.kind or blob["version"] != cls.version:
            raise TclError(f"model file {path} holds a {blob['kind']!r} model of version "
                           f"{blob['version']}; expected {cls.kind!r} version {cls.version}")
        if content_hash is not None:
            try:
                got = _content_hash(blob["kind"], blob["version"], blob["backbone"],
                                    blob["hyper"], blob["devices"], blob["state_dict"])
            except (AttributeError, TypeError) as e:
                raise TclError(f"model file {path} is not a continual model file: {e}") from None
            if got != content_hash:
                raise TclError(f"model file {path} has content hash {got}, not the recorded "
                               f"{content_hash}: it changed after it was saved, so it is not "
                               "loaded")
        hyper = dict(blob["hyper"])
        seed = hyper.pop("seed", 0)
        try:
            model = cls(blob["backbone"], list(blob["devices"]), hyper, seed=seed, device=device)
            model.net.load_state_dict(blob["state_dict"])
        except (RuntimeError, TypeError) as e:
            raise TclError(f"model file {path}: its weights do not fit a {blob['backbone']} "
                           f"continual model: {e}") from None
        model.base._scaled = True
        model.net.active = model.net.index(blob.get("target", model.devices[-1]))
        model.lineage = json.loads(blob.get("lineage") or "{}")
        model.net.eval()
        return model

    def copy(self) -> "MultiDeviceModel":
        """An independent deep copy (students start from their teacher's weights)."""
        return copy.deepcopy(self)


def _content_hash(kind: str, version: int, backbone: str, hyper: dict[str, Any],
                  devices: list[str], state: dict[str, Tensor]) -> str:
    """The content hash of a model or of its saved file's contents (one rule for both)."""
    h = hashlib.sha256(json.dumps([kind, version, backbone, hyper, list(devices)],
                                  sort_keys=True, default=str).encode())
    for name, t in sorted(state.items()):
        h.update(name.encode())
        h.update(t.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()


def check_compatible(teacher: CostModel, backbone: str) -> MultiDeviceModel:
    """The teacher must be a continual model of the same backbone: a student starts from its
    weights, so another architecture (or an older file format) cannot teach it."""
    if not isinstance(teacher, MultiDeviceModel):
        raise TclError(f"teacher is a {getattr(teacher, 'kind', type(teacher).__name__)!r} "
                       f"model; continual distillation needs a 'continual' model (train the "
                       f"sequence's first device with `tcl distill` first)")
    if teacher.backbone != backbone:
        raise TclError(f"teacher's backbone is {teacher.backbone!r} but this run distills a "
                       f"{backbone!r} model; use the same continual.backbone for the sequence")
    return teacher
