"""Sample flow: candidate programs for every selected task, without measuring."""
from __future__ import annotations

import sys

from flows._common import main  # first: sets Prefect's defaults before it is imported
from prefect import flow, task
from prefect.cache_policies import NO_CACHE

from tcl import pipeline
from tcl.params import Params, load_params


@task(name="sample-candidates", cache_policy=NO_CACHE)
def sample_candidates(params: Params) -> int:
    return pipeline.run_sample(params, progress=False)


@flow(name="sample", log_prints=True)
def sample(params_file: str = "params.yaml") -> int:
    """Sample candidate programs."""
    return sample_candidates(load_params(params_file))


if __name__ == "__main__":
    sys.exit(main(sample))
