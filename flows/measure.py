"""Measure flow: one task per device; a transient failure is retried and the collection resumes
(every finished batch is stored, and the DuckDB query only asks for what is missing)."""
from __future__ import annotations

import sys

from flows._common import main  # first: sets Prefect's defaults before it is imported
from prefect import flow, task
from prefect.cache_policies import NO_CACHE

from tcl.pipeline import stages as pipeline
from tcl.config import TclError
from tcl.pipeline.params import Params, load_params


def transient(_task, _task_run, state) -> bool:
    """Retry anything but a TclError (bad input or a host that cannot run the device)."""
    try:
        state.result()
    except TclError:
        return False
    except Exception:
        return True
    return False


@task(name="measure-device", cache_policy=NO_CACHE, retry_condition_fn=transient)
def measure_device(params: Params, device: str):
    return pipeline.run_measure(params, device, progress=False)


@flow(name="measure", log_prints=True)
def measure(params_file: str = "params.yaml") -> dict:
    """Measure the selected programs on every device."""
    params = load_params(params_file)
    retried = measure_device.with_options(retries=params.measure.retries,
                                          retry_delay_seconds=params.measure.retry_delay_s)
    return {device: retried(params, device) for device in params.devices}


if __name__ == "__main__":
    sys.exit(main(measure))
