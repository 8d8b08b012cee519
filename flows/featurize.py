"""Featurize flow: per-store features and trace tokens of every known program (incremental)."""
from __future__ import annotations

import sys

from flows._common import main, map_over_tasks  # first: sets Prefect's defaults before it is imported
from prefect import flow, task
from prefect.cache_policies import NO_CACHE

from tcl.pipeline import scale_out, stages
from tcl.pipeline.params import Params, load_params


@task(name="featurize-programs", cache_policy=NO_CACHE)
def featurize_programs(params: Params, task_ids: list[str]) -> int:
    return stages.run_featurize(params, progress=False, task_ids=task_ids)


@flow(name="featurize-tasks", log_prints=True)
def featurize_tasks(params: Params) -> int:
    """One Prefect task per chunk of tasks, on the configured task runner."""
    return map_over_tasks(featurize_programs, params, stages.feature_tasks(params))


@flow(name="featurize", log_prints=True)
def featurize(params_file: str = "params.yaml") -> int:
    """Featurize the programs. (scale_out: locally or on a Dask cluster)"""
    params = load_params(params_file)
    return featurize_tasks.with_options(task_runner=scale_out.task_runner(params))(params)


if __name__ == "__main__":
    sys.exit(main(featurize))
