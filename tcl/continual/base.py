"""The distiller interface: teacher + the new device's data -> a model serving every device.

``Distiller.fit(teacher, new, settings, history)`` returns a new ``MultiDeviceModel`` whose
last head is ``new.device``; the teacher is never modified. ``new`` holds the device's measured
subset (``labelled``, with ``valid`` kept aside for early stopping) and its ``pool``: every
candidate's features, no labels (free to sample and featurize; distillation targets are the
teacher's scores on it). ``history`` (earlier devices' measured data) is read only by methods
that need old data (``needs_old_data``: multi-task); the others never see it.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar, Sequence

import numpy as np

from ..config import TclError
from ..models import MODEL_KINDS
from ..models.base import ProgramSet
from ..models.nn import TRAIN_DEFAULTS, group_batches
from . import DISTILLERS
from .model import MultiDeviceModel, check_compatible
from .train import Schedule, pairwise_on


@dataclass
class DeviceData:
    device: str
    labelled: ProgramSet                 # the measured subset (training part), with labels
    valid: ProgramSet | None = None      # labelled programs of tasks kept aside (early stopping)
    pool: ProgramSet | None = None       # candidates' features (no labels); default: labelled

    def __post_init__(self) -> None:
        if self.labelled is None or len(self.labelled) == 0:
            raise TclError(f"device {self.device!r} has no measured subset to learn from: "
                           "select and measure some of its programs first "
                           "(`tcl collect --device D --select rdu --budget 0.1`)")
        if self.labelled.labels is None:
            raise TclError(f"device {self.device!r}: the measured subset carries no labels")

    @property
    def unlabelled(self) -> ProgramSet:
        return self.pool if self.pool is not None else self.labelled


@dataclass
class Settings:
    """Knobs of every method (``params.yaml``'s ``continual`` section). ``hyper``: the
    backbone's keywords (architecture and training: lr, epochs, patience, batch_size...)."""

    backbone: str = "tenset-mlp"
    hyper: dict[str, Any] = field(default_factory=dict)
    kd_new: float = 1.0     # distillation of the new head towards the teacher's latest head
    kd_old: float = 1.0     # distillation of the earlier heads towards the teacher's (forgetting)
    ewc: float = 10.0       # elastic weight consolidation strength (compress)
    seed: int = 0


class Distiller(ABC):
    name: ClassVar[str]
    needs_teacher: ClassVar[bool] = True
    needs_old_data: ClassVar[bool] = False

    def fit(self, teacher: MultiDeviceModel | None, new: DeviceData, settings: Settings,
            history: Sequence[DeviceData] = ()) -> MultiDeviceModel:
        if self.needs_teacher:
            if teacher is None:
                raise TclError(f"method {self.name!r} needs a teacher model (the latest model "
                               f"of the device before {new.device!r} in the sequence)")
            check_compatible(teacher, settings.backbone)
            if new.device in teacher.devices:
                raise TclError(f"the teacher has learned device {new.device!r} already "
                               f"(it serves {', '.join(teacher.devices)}); a device comes "
                               "after its teacher in the sequence")
        if self.needs_old_data and not history and teacher is not None:
            raise TclError(f"method {self.name!r} trains on every earlier device's data; "
                           "none was given")
        return self._fit(teacher, new, settings, list(history))

    @abstractmethod
    def _fit(self, teacher: MultiDeviceModel | None, new: DeviceData, settings: Settings,
             history: list[DeviceData]) -> MultiDeviceModel: ...


def make_distiller(name: str) -> Distiller:
    """A new distiller of method ``name`` (one of ``DISTILLERS``)."""
    return DISTILLERS.make(name)


def config_of(settings: Settings) -> dict[str, Any]:
    """The backbone's full configuration (defaults + settings.hyper)."""
    cls = MODEL_KINDS[settings.backbone]
    return {**TRAIN_DEFAULTS, **cls.defaults, **settings.hyper}


def schedule_for(new: DeviceData, settings: Settings, at_least: int = 1) -> Schedule:
    """Every method trains for the same steps: one epoch is a pass over the device's whole pool
    in batches (so a 10% subset is not trained for a tenth of the steps), ``epochs`` and
    ``patience`` as the backbone's."""
    cfg = config_of(settings)
    steps = max(len(group_batches(new.unlabelled.group, cfg["batch_size"])), at_least, 1)
    return Schedule(cfg["epochs"], steps, cfg["patience"])


def optim_kwargs(settings: Settings) -> dict[str, float]:
    cfg = config_of(settings)
    return {"lr": cfg["lr"], "weight_decay": cfg["weight_decay"], "grad_clip": cfg["grad_clip"]}


def validator(model: MultiDeviceModel, new: DeviceData):
    return None if new.valid is None else (lambda: pairwise_on(model, new.device, new.valid))


def rng_for(settings: Settings, salt: int = 0) -> np.random.Generator:
    return np.random.default_rng([settings.seed, salt])


def student_of(teacher: MultiDeviceModel, device: str) -> MultiDeviceModel:
    """A copy of the teacher with a head for ``device`` (a copy of the teacher's latest)."""
    student = teacher.copy()
    student.net.add_device(device, like=teacher.target)
    return student


def teacher_scores(teacher: MultiDeviceModel, programs: ProgramSet) -> np.ndarray:
    """(n, devices) float32: every teacher head's score of every program."""
    return np.stack([teacher.scores(programs, d) for d in teacher.devices], axis=1) \
        .astype(np.float32)
