"""The whole pipeline, the same steps as dvc.yaml: zoo -> sample -> measure -> featurize ->
train -> select -> distill -> evaluate. Each step is its own flow (a subflow run here).

Each stage's start and end go to ``Paths.stages_file`` (``<data>/reports/pipeline-stages.json``)
as the run goes (rewritten after every stage, so a failed run keeps what it reached): what
``benchmarks/main_job.py`` reports per stage."""
from __future__ import annotations

import json
import resource
import sys
import time
from datetime import datetime, timezone

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
from tcl.config import write_text
from tcl.pipeline.params import load_params


def _cpu_seconds() -> float:
    """CPU time of this process and of its children that ended (the stages' process pools are
    joined at each stage's end): what a loaded machine cannot take away from a stage."""
    return sum(r.ru_utime + r.ru_stime for r in (resource.getrusage(resource.RUSAGE_SELF),
                                                  resource.getrusage(resource.RUSAGE_CHILDREN)))


def _utc(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, timezone.utc).isoformat(timespec="seconds")


@flow(name="pipeline", log_prints=True)
def pipeline(params_file: str = "params.yaml") -> dict[str, str]:
    """Run every stage of the pipeline with the knobs of the params file."""
    out = load_params(params_file).paths.stages_file  # the whole file validated before any work
    out.parent.mkdir(parents=True, exist_ok=True)
    stages: list[dict] = []
    for name, step in (("zoo", zoo), ("sample", sample), ("measure", measure),
                       ("featurize", featurize), ("train", train), ("select", select),
                       ("distill", distill), ("evaluate", evaluate)):
        start, cpu = time.time(), _cpu_seconds()
        value = step(params_file)
        end = time.time()
        stages.append({"stage": name, "start": _utc(start), "end": _utc(end),
                       "seconds": round(end - start, 2),
                       "cpu_seconds": round(_cpu_seconds() - cpu, 1)})
        write_text(out, json.dumps({"params": params_file, "stages": stages}, indent=2) + "\n",
                   "stage timings file")
    return value   # the last stage's: evaluate's report files


if __name__ == "__main__":
    sys.exit(main(pipeline))
