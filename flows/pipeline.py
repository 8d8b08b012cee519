"""The whole pipeline, the same steps as dvc.yaml: zoo -> sample -> measure -> featurize ->
train -> select -> distill -> evaluate. Each step is its own flow (a subflow run here)."""
from __future__ import annotations

import sys

from flows._common import main  # first: sets Prefect's defaults before it is imported
from prefect import flow

from flows.distill import distill
from flows.evaluate import evaluate
from flows.featurize import featurize
from flows.measure import measure
from flows.sample import sample
from flows.select import select
from flows.train import train
from flows.zoo import zoo
from tcl.params import load_params


@flow(name="pipeline", log_prints=True)
def pipeline(params_file: str = "params.yaml") -> dict[str, str]:
    """Run every stage of the pipeline with the knobs of the params file."""
    load_params(params_file)  # the whole file is validated before any work
    zoo(params_file)
    sample(params_file)
    measure(params_file)
    featurize(params_file)
    train(params_file)
    select(params_file)
    distill(params_file)
    return evaluate(params_file)


if __name__ == "__main__":
    sys.exit(main(pipeline))
