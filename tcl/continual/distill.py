"""(d) Plain distillation: the student starts from the teacher with a new head and learns

- a ranking (LambdaRank) of the new device's measured subset on the new head;
- the teacher's latest head's ranking of the unmeasured candidates, on the new head
  (``kd_new``: what the teacher knows transfers where the subset has no label);
- every earlier head's ranking of the same candidates as the teacher scores them (``kd_old``:
  nothing forgotten, with no old device's measurement).
"""
from __future__ import annotations

from .base import (DeviceData, Distiller, Settings, optim_kwargs, rng_for, schedule_for,
                   student_of, teacher_scores, validator)
from .model import MultiDeviceModel
from .train import BatchCycle, distill_loss, rank_loss, train


class Distill(Distiller):
    name = "distill"

    def _fit(self, teacher: MultiDeviceModel, new: DeviceData, settings: Settings,
             history) -> MultiDeviceModel:
        student = student_of(teacher, new.device)
        size, rng = student.config["batch_size"], rng_for(settings)
        targets = teacher_scores(teacher, new.unlabelled)
        labelled = BatchCycle(student, new.labelled, size, rng)
        pool = BatchCycle(student, new.unlabelled, size, rng, targets)
        latest = teacher.devices.index(teacher.target)

        def step():
            b, _ = labelled.next()
            loss = rank_loss(student.net(b), b)
            bp, t = pool.next()
            s = student.net.scores_all(bp)
            loss = loss + settings.kd_new * distill_loss(s[:, -1], t[:, latest], bp.group)
            if settings.kd_old > 0:
                old = sum(distill_loss(s[:, k], t[:, k], bp.group) for k in range(t.shape[1]))
                loss = loss + settings.kd_old * old / t.shape[1]
            return loss

        train(list(student.net.parameters()), step, schedule_for(new, settings),
              validate=validator(student, new), module=student.net, **optim_kwargs(settings))
        student.lineage = {"method": self.name}
        return student
