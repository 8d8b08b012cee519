"""Refresh flow: whatever is new gets its model (``tcl.pipeline.refresh.refresh_all``): every
device whose records, teacher or settings changed is distilled again; with nothing new, nothing
is trained and nothing is registered.

``python -m flows.refresh`` runs it; ``tcl serve`` serves it on ``add_device.refresh_cron``
(``tcl.pipeline.deployments``), finding it by its name (pyproject.toml's ``tcl.flows``)."""
from __future__ import annotations

import sys

from flows._common import main, refuse  # first: sets Prefect's defaults before it is imported
from prefect import flow

from tcl.config import TclError
from tcl.pipeline.events import served_params
from tcl.pipeline.refresh import refresh_all


@flow(name="refresh", log_prints=True)
def refresh(params_file: str = "params.yaml") -> dict:
    """Give whatever is new its model (``tcl.pipeline.refresh.refresh_all``)."""
    try:   # served: only the params file `tcl serve` bound
        params = served_params(params_file)
    except TclError as e:
        return refuse(e)
    return refresh_all(params)


if __name__ == "__main__":
    sys.exit(main(refresh))
