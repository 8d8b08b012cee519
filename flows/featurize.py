"""Featurize flow: per-store features and trace tokens of every known program (incremental)."""
from __future__ import annotations

import sys

from flows._common import main  # first: sets Prefect's defaults before it is imported
from prefect import flow, task
from prefect.cache_policies import NO_CACHE

from tcl import pipeline
from tcl.params import Params, load_params


@task(name="featurize-programs", cache_policy=NO_CACHE)
def featurize_programs(params: Params) -> int:
    return pipeline.run_featurize(params, progress=False)


@flow(name="featurize", log_prints=True)
def featurize(params_file: str = "params.yaml") -> int:
    """Featurize the programs."""
    return featurize_programs(load_params(params_file))


if __name__ == "__main__":
    sys.exit(main(featurize))
