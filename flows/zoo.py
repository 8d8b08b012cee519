"""Zoo flow: extract the tuning tasks of the networks in params.yaml (only new instances)."""
from __future__ import annotations

import sys

from flows._common import main  # first: sets Prefect's defaults before it is imported
from prefect import flow, task
from prefect.cache_policies import NO_CACHE

from tcl.pipeline import stages
from tcl.pipeline.params import Params, load_params


@task(name="extract-tasks", cache_policy=NO_CACHE)
def extract_tasks(params: Params) -> int:
    return stages.run_zoo(params)


@flow(name="zoo", log_prints=True)
def zoo(params_file: str = "params.yaml") -> int:
    """Extract the zoo's tasks."""
    return extract_tasks(load_params(params_file))


if __name__ == "__main__":
    sys.exit(main(zoo))
