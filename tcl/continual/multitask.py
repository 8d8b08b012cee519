"""(c) Multi-task learning with a head per device (the MTL-TLP baseline): a new model trained
on every device's measured data seen so far, each batch on one device's head. It needs the old
devices' data, which the distillers do without."""
from __future__ import annotations

import numpy as np

from .base import (DeviceData, Distiller, Settings, optim_kwargs, rng_for, schedule_for,
                   validator)
from .model import MultiDeviceModel
from .train import BatchCycle, rank_loss, train


class MultiTask(Distiller):
    name = "multitask"
    needs_teacher = False
    needs_old_data = True

    def _fit(self, teacher, new: DeviceData, settings: Settings,
             history: list[DeviceData]) -> MultiDeviceModel:
        data = [*history, new]
        model = MultiDeviceModel(settings.backbone, [d.device for d in data], settings.hyper,
                                 seed=settings.seed)
        model.net.fit_scales(data[0].unlabelled)   # as the sequence's first model did
        model.base._scaled = True
        rng = rng_for(settings)
        size = model.config["batch_size"]
        cycles = [BatchCycle(model, d.labelled, size, rng) for d in data]
        # each step trains one device's head; devices in proportion to their batches
        share = np.array([c.batches_per_pass for c in cycles], float)
        steps = max(int(share.sum()), schedule_for(new, settings).steps)
        schedule = schedule_for(new, settings, at_least=steps)

        def step():
            k = int(rng.choice(len(cycles), p=share / share.sum()))
            b, _ = cycles[k].next()
            return rank_loss(model.net.scores_all(b)[:, k], b)

        train(list(model.net.parameters()), step, schedule, validate=validator(model, new),
              module=model.net, **optim_kwargs(settings))
        model.net.active = len(data) - 1
        model.lineage = {"method": self.name}
        return model
