"""(e) Knowledge base + active column + EWC, in the shape of Progress & Compress (Schwarz et al.,
2018).

- Progress: an active column (a copy of the knowledge base's trunk and a new head) learns the
  new device's subset (LambdaRank) and the teacher's latest ranking of the unmeasured
  candidates (``kd_new``), reading the frozen knowledge base through a lateral connection (a
  zero-initialized linear map of the base's pooled state added to its own).
- Compress: the knowledge base (the teacher's weights, a new head) learns the active column's
  ranking of every candidate, its earlier heads keep the teacher's rankings (``kd_old``), and
  online elastic weight consolidation (``ewc``) holds the shared weights that matter to the
  earlier heads in place. The column is then dropped: the model grows by one head per device.

The lateral connection joins at the pooled state, not at every layer as in the paper: one
place that works for both backbones. The Fisher information is estimated on the unlabelled
candidates (no old device's data is kept): the squared gradient of the earlier heads' scores,
with random signs per program (an unbiased estimate of the per-program sum), scaled to mean 1.
"""
from __future__ import annotations

import copy

import numpy as np
import torch
from torch import Tensor, nn

from ..metrics import pairwise_accuracy
from ..models.base import ProgramSet
from ..models.nn import Batch, group_batches
from .base import (DeviceData, Distiller, Settings, optim_kwargs, rng_for, schedule_for,
                   student_of, teacher_scores, validator)
from .model import MultiDeviceModel
from .train import BatchCycle, distill_loss, rank_loss, train


class ActiveColumn(nn.Module):
    def __init__(self, teacher: MultiDeviceModel) -> None:
        super().__init__()
        self._base = (teacher.net.trunk,)   # frozen, read only (a tuple: not a submodule)
        self.trunk = copy.deepcopy(teacher.net.trunk)
        self.head = copy.deepcopy(teacher.net.head_of(teacher.target))
        width = self._width(teacher)
        self.lateral = nn.Linear(width, width)
        nn.init.zeros_(self.lateral.weight)
        nn.init.zeros_(self.lateral.bias)

    @staticmethod
    def _width(teacher: MultiDeviceModel) -> int:
        for p in teacher.net.head_of(teacher.target).parameters():
            return p.shape[-1]   # the head's first weight: (out, width)
        raise ValueError("the teacher's head has no parameters")

    def trainable(self) -> list[nn.Parameter]:
        return [*self.trunk.parameters(), *self.head.parameters(), *self.lateral.parameters()]

    def forward(self, b: Batch) -> Tensor:
        with torch.no_grad():
            kb = self._base[0].embed(b)
        return self.head(self.trunk.embed(b) + self.lateral(kb)).squeeze(-1)

    def predict(self, programs: ProgramSet, batch_size: int, net) -> np.ndarray:
        out = np.empty(len(programs), np.float32)
        self.eval()
        with torch.inference_mode():
            for index in group_batches(programs.group, batch_size):
                out[index] = self(net.batch(programs, index)).float().cpu().numpy()
        return out


def fisher_diagonal(teacher: MultiDeviceModel, programs: ProgramSet, batch_size: int,
                    rng: np.random.Generator) -> list[Tensor]:
    """Per trunk parameter: mean over candidate batches and teacher heads of the squared
    gradient of sum_i r_i s_i (r_i random signs), scaled so the mean entry is 1."""
    net = teacher.net
    params = list(net.trunk.parameters())
    total = [torch.zeros_like(p) for p in params]
    net.eval()
    n = 0
    for index in group_batches(programs.group, batch_size):
        b = net.batch(programs, index)
        scores = net.scores_all(b)
        for k in range(scores.shape[1]):
            signs = torch.as_tensor(rng.choice([-1.0, 1.0], len(index)), dtype=scores.dtype)
            grads = torch.autograd.grad((signs * scores[:, k]).sum(), params,
                                        retain_graph=True, allow_unused=True)
            for t, g in zip(total, grads):
                if g is not None:
                    t += g.detach() ** 2
            n += 1
    flat = torch.cat([t.flatten() for t in total]) / max(n, 1)
    mean = float(flat.mean()) if flat.numel() else 0.0
    return [t / max(n, 1) / mean if mean > 0 else t for t in total]


class ProgressCompress(Distiller):
    name = "compress"

    def _fit(self, teacher: MultiDeviceModel, new: DeviceData, settings: Settings,
             history) -> MultiDeviceModel:
        size = teacher.config["batch_size"]
        rng = rng_for(settings)
        schedule = schedule_for(new, settings)
        targets = teacher_scores(teacher, new.unlabelled)
        latest = teacher.devices.index(teacher.target)

        # progress: the active column on the new device
        column = ActiveColumn(teacher)
        labelled = BatchCycle(teacher, new.labelled, size, rng)
        pool = BatchCycle(teacher, new.unlabelled, size, rng, targets)

        def progress_step():
            b, _ = labelled.next()
            loss = rank_loss(column(b), b)
            bp, t = pool.next()
            return loss + settings.kd_new * distill_loss(column(bp), t[:, latest], bp.group)

        validate = None
        if new.valid is not None:
            validate = lambda: _finite(pairwise_accuracy(  # noqa: E731
                column.predict(new.valid, size, teacher.net), new.valid.labels, new.valid.group))
        train(column.trainable(), progress_step, schedule, validate=validate, module=column,
              **optim_kwargs(settings))

        # compress: the knowledge base learns the column, keeps the earlier heads
        column_scores = column.predict(new.unlabelled, size, teacher.net)
        student = student_of(teacher, new.device)
        fisher = fisher_diagonal(teacher, new.unlabelled, size, rng) if settings.ewc > 0 else []
        anchor = [p.detach().clone() for p in teacher.net.trunk.parameters()]
        shared = list(student.net.trunk.parameters())
        pool = BatchCycle(student, new.unlabelled, size, rng,
                          np.concatenate([targets, column_scores[:, None]], axis=1))

        def compress_step():
            bp, t = pool.next()
            s = student.net.scores_all(bp)
            loss = distill_loss(s[:, -1], t[:, -1], bp.group)
            if settings.kd_old > 0:
                old = sum(distill_loss(s[:, k], t[:, k], bp.group) for k in range(t.shape[1] - 1))
                loss = loss + settings.kd_old * old / (t.shape[1] - 1)
            if fisher:
                loss = loss + settings.ewc * sum((f * (p - a) ** 2).sum()
                                                 for f, p, a in zip(fisher, shared, anchor))
            return loss

        train(list(student.net.parameters()), compress_step, schedule,
              validate=validator(student, new), module=student.net, **optim_kwargs(settings))
        student.lineage = {"method": self.name}
        return student


def _finite(x: float) -> float:
    return x if x == x else 0.0
