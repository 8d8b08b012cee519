"""``tcl serve``'s deployments and server (``tcl.pipeline.deployments``), under their old names."""
from __future__ import annotations

from tcl.pipeline.deployments import deployments, local_prefect_server, serve

__all__ = ["deployments", "local_prefect_server", "serve"]
