"""Refresh flow (scheduled by ``tcl serve``): whatever is new gets its model. Every device of
``continual.sequence`` is re-distilled only when its records, teacher or settings changed, and
every device added later (``tcl device add``) likewise from its own teacher; with nothing new,
nothing is trained and nothing is registered."""
from __future__ import annotations

import sys

from flows._common import main, refuse  # first: sets Prefect's defaults before it is imported
from prefect import flow

from tcl.config import TclError
from tcl.events import served_params


@flow(name="refresh", log_prints=True)
def refresh(params_file: str = "params.yaml") -> dict:
    from tcl.refresh import refresh_all

    try:   # served: only the params file `tcl serve` bound
        params = served_params(params_file)
    except TclError as e:
        return refuse(e)
    return refresh_all(params)


if __name__ == "__main__":
    sys.exit(main(refresh))
