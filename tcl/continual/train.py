"""What every distiller trains with: batch streams, the distillation loss, one training loop.

Distillation matches rankings, not raw scores: ``distill_loss`` compares the student's and the
teacher's scores after standardizing both within each task (per-task z-scores), i.e. it is
2 (1 - Pearson correlation) per task. LambdaRank-trained scores have an arbitrary scale that
keeps growing in training, so matching raw values would fight the ranking loss.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch
from torch import Tensor, nn

from .. import progress
from ..config import TclError
from ..metrics import pairwise_accuracy
from ..models.base import ProgramSet
from ..models.nn import Batch, EarlyStopping, group_batches, lambdarank_loss
from .model import MultiDeviceModel


def _group_stats(x: Tensor, g: Tensor, n: int) -> tuple[Tensor, Tensor, Tensor]:
    count = torch.zeros(n, dtype=x.dtype, device=x.device).index_add_(0, g, torch.ones_like(x))
    mean = torch.zeros(n, dtype=x.dtype, device=x.device).index_add_(0, g, x) / count.clamp(min=1)
    var = torch.zeros(n, dtype=x.dtype, device=x.device).index_add_(
        0, g, (x - mean[g]) ** 2) / count.clamp(min=1)
    return count, mean, var


def distill_loss(student: Tensor, teacher: Tensor, group: Tensor) -> Tensor:
    """Sum over tasks of the mean squared difference of per-task z-scores. Tasks with fewer
    than 2 programs, or where the teacher scores every program alike, carry no ranking and
    contribute 0."""
    _, g = torch.unique(group, return_inverse=True)
    n = int(g.max()) + 1 if len(g) else 0
    if n == 0:
        return student.sum() * 0
    count, t_mean, t_var = _group_stats(teacher, g, n)
    _, s_mean, s_var = _group_stats(student, g, n)
    keep = (count >= 2) & (t_var > 1e-12)
    z_t = (teacher - t_mean[g]) / t_var[g].clamp(min=1e-12).sqrt()
    z_s = (student - s_mean[g]) / (s_var[g] + 1e-6).sqrt()
    per_task = torch.zeros(n, dtype=student.dtype, device=student.device).index_add_(
        0, g, (z_s - z_t) ** 2) / count.clamp(min=1)
    return (per_task * keep).sum()


class BatchCycle:
    """Endless training batches over a program set, groups kept whole (as LambdaRank wants),
    reshuffled every pass. ``targets``: extra per-program arrays (e.g. teacher scores) handed
    out with each batch."""

    def __init__(self, model: MultiDeviceModel, programs: ProgramSet, batch_size: int,
                 rng: np.random.Generator, targets: np.ndarray | None = None) -> None:
        self.model, self.programs, self.size, self.rng = model, programs, batch_size, rng
        self.targets = targets
        self._queue: list[np.ndarray] = []

    @property
    def batches_per_pass(self) -> int:
        return len(group_batches(self.programs.group, self.size))

    def next(self) -> tuple[Batch, Tensor | None]:
        if not self._queue:
            self._queue = group_batches(self.programs.group, self.size, self.rng)[::-1]
        index = self._queue.pop()
        b = self.model.net.batch(self.programs, index)
        t = None if self.targets is None else torch.as_tensor(
            self.targets[index], dtype=torch.float32, device=b.group.device)
        return b, t


@dataclass
class Schedule:
    """How long to train: ``epochs`` of ``steps`` steps, early stopping after ``patience``
    epochs without a better validation score."""

    epochs: int
    steps: int
    patience: int


def train(params: list[nn.Parameter], step: Callable[[], Tensor], schedule: Schedule, *,
          lr: float, weight_decay: float, grad_clip: float,
          validate: Callable[[], float] | None = None, module: nn.Module | None = None) -> int:
    """Adam on ``params``; ``step()`` returns one step's loss. ``validate()`` (higher is
    better) runs after each epoch and the best epoch's state of ``module`` is kept. Returns
    the epochs run."""
    if not params:
        raise TclError("nothing to train: no parameter requires a gradient")
    opt = torch.optim.Adam(params, lr=lr, weight_decay=weight_decay)
    n = 0
    stopping = EarlyStopping(module, schedule.patience) if module is not None else None
    for n in range(1, schedule.epochs + 1):
        if module is not None:
            module.train()
        for _ in range(schedule.steps):
            loss = step()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            nn.utils.clip_grad_norm_(params, grad_clip)
            opt.step()
        progress.step()   # an epoch done, for whoever reports this fit's progress
        if validate is None or stopping is None:
            continue
        module.eval()
        if stopping.step(-validate()):   # validate() is higher-is-better
            break
    if stopping is not None:
        stopping.restore()
        module.eval()
    return n


def rank_loss(scores: Tensor, b: Batch) -> Tensor:
    return lambdarank_loss(scores, b.labels, b.group)


def pairwise_on(model: MultiDeviceModel, device: str, valid: ProgramSet) -> float:
    """Validation score: pairwise accuracy of ``device``'s head on labelled programs."""
    acc = pairwise_accuracy(model.scores(valid, device), valid.labels, valid.group)
    return acc if math.isfinite(acc) else 0.0
