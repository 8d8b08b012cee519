"""``python -m flows.add_device --device NAME``: the add-device flow
(``tcl.pipeline.deployments``), as ``tcl device add`` runs it when no server listens."""
from __future__ import annotations

import sys

from flows._common import main
from tcl.pipeline.deployments import add_device

__all__ = ["add_device"]

if __name__ == "__main__":
    sys.exit(main(add_device))
