"""(b) Fine-tuning: the teacher's weights, a new head (a copy of the teacher's latest), every
parameter trained on the new device's subset. Earlier heads stay, but the trunk under them
moves: what they forget is measured, not prevented."""
from __future__ import annotations

from .base import (DeviceData, Distiller, Settings, optim_kwargs, rng_for, schedule_for,
                   student_of, validator)
from .model import MultiDeviceModel
from .train import BatchCycle, rank_loss, train


class FineTune(Distiller):
    name = "finetune"

    def _fit(self, teacher: MultiDeviceModel, new: DeviceData, settings: Settings,
             history) -> MultiDeviceModel:
        student = student_of(teacher, new.device)
        batches = BatchCycle(student, new.labelled, student.config["batch_size"],
                             rng_for(settings))

        def step():
            b, _ = batches.next()
            return rank_loss(student.net(b), b)

        train(list(student.net.parameters()), step, schedule_for(new, settings),
              validate=validator(student, new), module=student.net, **optim_kwargs(settings))
        student.lineage = {"method": self.name}
        return student
