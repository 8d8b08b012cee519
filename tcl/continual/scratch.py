"""(a) From scratch: a new model trained on the new device's subset alone (no teacher).

Also how a sequence's first device is learned, on its full data. The model serves only its own
device: there is nothing to forget, and nothing carried over.
"""
from __future__ import annotations

from .base import (DeviceData, Distiller, Settings, optim_kwargs, rng_for, schedule_for,
                   validator)
from .model import MultiDeviceModel
from .train import BatchCycle, rank_loss, train


class Scratch(Distiller):
    name = "scratch"
    needs_teacher = False

    def _fit(self, teacher, new: DeviceData, settings: Settings, history) -> MultiDeviceModel:
        model = MultiDeviceModel(settings.backbone, [new.device], settings.hyper,
                                 seed=settings.seed)
        model.net.fit_scales(new.unlabelled)   # features are free: scales from the whole pool
        model.base._scaled = True
        batches = BatchCycle(model, new.labelled, model.config["batch_size"], rng_for(settings))
        train(list(model.net.parameters()), lambda: _step(model, batches), schedule_for(
            new, settings), validate=validator(model, new), module=model.net,
            **optim_kwargs(settings))
        model.lineage = {"method": self.name}
        return model


def _step(model: MultiDeviceModel, batches: BatchCycle):
    b, _ = batches.next()
    return rank_loss(model.net(b), b)
