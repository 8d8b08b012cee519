"""``python -m flows.refresh``: the refresh flow (``tcl.pipeline.deployments``), as ``tcl serve``
schedules it: whatever is new gets its model."""
from __future__ import annotations

import sys

from flows._common import main
from tcl.pipeline.deployments import refresh

__all__ = ["refresh"]

if __name__ == "__main__":
    sys.exit(main(refresh))
