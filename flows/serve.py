"""``tcl serve``: the add-device and refresh flows served as deployments bound to one params file
(``tcl.pipeline.deployments``: the deployments, and a Prefect server when none is configured)."""
from __future__ import annotations

from flows.add_device import add_device
from flows.refresh import refresh
from tcl.pipeline import deployments as served

__all__ = ["deployments", "serve"]


def deployments(params_file: str) -> list:
    """The two flows' deployments, bound to ``params_file``."""
    return served.deployments(params_file, add_device, refresh)


def serve(params_file: str = "params.yaml") -> None:
    """Serve them until interrupted."""
    served.serve(params_file, add_device, refresh)
