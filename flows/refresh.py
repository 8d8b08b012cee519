"""Refresh flow (scheduled by ``tcl serve``): whatever is new gets its model. Every device of
``continual.sequence`` is re-distilled only when its records, teacher or settings changed, and
every device added later (``tcl device add``) likewise from its own teacher; with nothing new,
nothing is trained and nothing is registered."""
from __future__ import annotations

import sys

from flows._common import main  # first: sets Prefect's defaults before it is imported
from prefect import flow

from tcl.params import load_params


@flow(name="refresh", log_prints=True)
def refresh(params_file: str = "params.yaml") -> dict:
    from tcl.refresh import refresh_all

    return refresh_all(load_params(params_file))


if __name__ == "__main__":
    sys.exit(main(refresh))
