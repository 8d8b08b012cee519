"""Sample flow: candidate programs for every selected task, without measuring."""
from __future__ import annotations

import sys

from flows._common import main, map_over_tasks  # first: sets Prefect's defaults before it is imported
from prefect import flow, task
from prefect.cache_policies import NO_CACHE

from tcl.pipeline import scale_out, stages
from tcl.pipeline.params import Params, load_params


@task(name="sample-candidates", cache_policy=NO_CACHE)
def sample_candidates(params: Params, task_ids: list[str]) -> int:
    return stages.run_sample(params, progress=False, task_ids=task_ids)


@flow(name="sample-tasks", log_prints=True)
def sample_tasks(params: Params) -> int:
    """One Prefect task per chunk of tasks, on the configured task runner."""
    return map_over_tasks(sample_candidates, params, stages.sample_tasks(params))


@flow(name="sample", log_prints=True)
def sample(params_file: str = "params.yaml") -> int:
    """Sample candidate programs. (scale_out: locally or on a Dask cluster)"""
    params = load_params(params_file)
    return sample_tasks.with_options(task_runner=scale_out.task_runner(params))(params)


if __name__ == "__main__":
    sys.exit(main(sample))
