"""Train flow: every (device, model kind) fitted on the device's training tasks, all fits (and
their seeds) in one pool of single-threaded processes (``tcl.stages.run_train_all``)."""
from __future__ import annotations

import sys

from flows._common import main  # first: sets Prefect's defaults before it is imported
from prefect import flow, task
from prefect.cache_policies import NO_CACHE

from tcl.pipeline import stages
from tcl.pipeline.params import Params, load_params


@task(name="train-models", cache_policy=NO_CACHE)
def train_models(params: Params) -> list[str]:
    return [str(f) for f in stages.run_train_all(params).values()]


@flow(name="train", log_prints=True)
def train(params_file: str = "params.yaml") -> list[str]:
    """Train every model kind on every device."""
    params = load_params(params_file)
    return train_models(params)


if __name__ == "__main__":
    sys.exit(main(train))
