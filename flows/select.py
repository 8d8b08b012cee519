"""Select flow: active collection on each of ``select.devices`` (the sampler picks, only the
picks are measured); a transient failure is retried and the run resumes from its stored
selection, so nothing is selected or measured twice."""
from __future__ import annotations

import sys

from flows._common import main, transient  # first: sets Prefect's defaults before it is imported
from prefect import flow, task
from prefect.cache_policies import NO_CACHE

from tcl.pipeline import stages
from tcl.pipeline.inputs import retry_options
from tcl.pipeline.params import Params, load_params


@task(name="select-device", cache_policy=NO_CACHE, retry_condition_fn=transient)
def select_device(params: Params, device: str):
    return stages.run_select(params, device, progress=False)


@flow(name="select", log_prints=True)
def select(params_file: str = "params.yaml") -> dict:
    """Select and measure a budget of each selection device's candidates."""
    params = load_params(params_file)
    retried = select_device.with_options(**retry_options(params))
    return {device: retried(params, device) for device in params.select.devices}


if __name__ == "__main__":
    sys.exit(main(select))
