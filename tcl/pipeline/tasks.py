"""The pipeline's tasks: the network instances the params select and their tasks (the one
selection, ``tcl.zoo.extract.select_tasks``), shared by the stages and the add-device run."""
from __future__ import annotations

import polars as pl

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

