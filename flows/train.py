"""Train flow: one task per (device, model kind), each fitting on the device's training tasks."""
from __future__ import annotations

import sys

from flows._common import main  # first: sets Prefect's defaults before it is imported
from prefect import flow, task
from prefect.cache_policies import NO_CACHE

from tcl import pipeline
from tcl.params import Params, load_params


@task(name="train-model", cache_policy=NO_CACHE, task_run_name="train-{device}-{kind}")
def train_model(params: Params, device: str, kind: str) -> str:
    return str(pipeline.run_train(params, device, kind))


@flow(name="train", log_prints=True)
def train(params_file: str = "params.yaml") -> list[str]:
    """Train every model kind on every device."""
    params = load_params(params_file)
    return [train_model(params, device, kind)
            for device in params.devices for kind in params.train.models]


if __name__ == "__main__":
    sys.exit(main(train))
