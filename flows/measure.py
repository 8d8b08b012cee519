"""Measure flow: one task per device; a transient failure is retried and the collection resumes
(every finished batch is stored, and the DuckDB query only asks for what is missing)."""
from __future__ import annotations

import sys

from flows._common import main, transient  # first: sets Prefect's defaults before it is imported
from prefect import flow, task
from prefect.cache_policies import NO_CACHE

from tcl.pipeline import stages
from tcl.pipeline.inputs import retry_options
from tcl.pipeline.params import Params, load_params


@task(name="measure-device", cache_policy=NO_CACHE, retry_condition_fn=transient)
def measure_device(params: Params, device: str):
    return stages.run_measure(params, device, progress=False)


@flow(name="measure", log_prints=True)
def measure(params_file: str = "params.yaml") -> dict:
    """Measure the selected programs on every device."""
    params = load_params(params_file)
    retried = measure_device.with_options(**retry_options(params))
    return {device: retried(params, device) for device in params.devices}


if __name__ == "__main__":
    sys.exit(main(measure))
