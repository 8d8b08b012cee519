"""The params turned into the library's inputs, each in one place: the network instances and
their tasks (the one selection, ``tcl.zoo.extract.select_tasks``), the active collection's
``Selection``, and what every measurement and its retries take. The stages, the add-device run,
the continual run and the flows call these rather than reading the knobs themselves."""
from __future__ import annotations

import polars as pl

from ..measure.active import Selection
from ..measure.devices import create
from ..store.devices import Device
from ..zoo.extract import select_tasks
from .params import Params


def instances(params: Params):
    """The zoo's network instances that the params select."""
    # lazy: the networks (torch) cost ~3 s at import
    from ..zoo.networks import zoo_instances
    from ..zoo.user import user_networks

    return zoo_instances(list(params.zoo.networks), small=params.zoo.small,
                         user=user_networks(params.paths, params.zoo.factory_timeout_s))


def selected_tasks(params: Params) -> pl.DataFrame:
    """The selected networks' tasks, at most ``sample.max_train_tasks`` /
    ``sample.max_holdout_tasks`` of each split (see ``tcl.zoo.extract.select_tasks``)."""
    return select_tasks(params.paths, [i.key for i in instances(params)],
                        params.sample.max_train_tasks, params.sample.max_holdout_tasks)


def selection(params: Params) -> Selection:
    """What the select stage, the add-device run and the continual subset select with."""
    sel = params.select
    return Selection.of(sel.sampler, sel.budget, sel.rounds, per_task=sel.per_task,
                        weights=sel.weights, seed=sel.seed)


def collect_options(params: Params, device: Device) -> dict[str, int | bool]:
    """The keywords every measurement of the pipeline passes to ``tcl.measure.collect.collect``:
    the candidates' sampling seed, the programs built, then run, per batch, and whether the next
    batch builds while this one runs (``measure.pipelined``, where ``device`` leaves a core
    free: a device that uses every core is measured batch after batch)."""
    return {"seed": params.sample.seed, "batch_size": params.measure.batch_size,
            "pipelined": params.measure.pipelined and create(device).can_pipeline()}


def retry_options(params: Params) -> dict[str, float]:
    """Prefect's retries of a measuring step after a transient failure (``Task.with_options``)."""
    return {"retries": params.measure.retries, "retry_delay_seconds": params.measure.retry_delay_s}
