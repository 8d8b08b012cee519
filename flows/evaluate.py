"""Evaluate flow: score the models on the held-out networks, write the report and publish its
tables as a Prefect Markdown artifact (key ``evaluation``)."""
from __future__ import annotations

import sys

from flows._common import main  # first: sets Prefect's defaults before it is imported
from prefect import flow, task
from prefect.artifacts import create_markdown_artifact
from prefect.cache_policies import NO_CACHE

from tcl.pipeline import stages
from tcl.pipeline.params import Params, load_params


@task(name="evaluate-models", cache_policy=NO_CACHE)
def evaluate_models(params: Params) -> dict[str, str]:
    _, files = stages.run_evaluate(params)
    return {name: str(path) for name, path in files.items()}


@flow(name="evaluate", log_prints=True)
def evaluate(params_file: str = "params.yaml") -> dict[str, str]:
    """Evaluate the models and publish the report."""
    files = evaluate_models(load_params(params_file))
    with open(files["markdown"]) as fh:
        create_markdown_artifact(markdown=fh.read(), key="evaluation",
                                 description=f"Cost-model evaluation ({params_file})")
    return files


if __name__ == "__main__":
    sys.exit(main(evaluate))
