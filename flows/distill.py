"""Distill flow: one model for every device of ``continual.sequence``, device by device (the
first trained on its full data, each later one distilled from the model before it). Devices
whose inputs are unchanged are skipped, so a new device at the end trains only its own model."""
from __future__ import annotations

import sys

from flows._common import main  # first: sets Prefect's defaults before it is imported
from prefect import flow, task
from prefect.cache_policies import NO_CACHE

from tcl.pipeline import stages
from tcl.pipeline.params import Params, load_params


@task(name="distill-device", cache_policy=NO_CACHE)
def distill_device(params: Params, device: str) -> dict:
    """One device (= the DVC stage distill@<device>): its model, registered, and its report."""
    return stages.run_distill(params, device)[device]


@flow(name="distill", log_prints=True)
def distill(params_file: str = "params.yaml") -> dict:
    """Distill each device of the sequence in order (a device's teacher is the one before)."""
    params = load_params(params_file)
    return {device: distill_device(params, device) for device in params.continual.sequence}


if __name__ == "__main__":
    sys.exit(main(distill))
