"""``tcl serve``'s deployments and server (``tcl.deployments``), under their old names."""
from __future__ import annotations

from tcl.deployments import deployments, local_prefect_server, serve

__all__ = ["deployments", "local_prefect_server", "serve"]
