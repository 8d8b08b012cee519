"""``tcl serve``: serve the add-device and refresh deployments until interrupted."""
from __future__ import annotations

import argparse

from .common import _no_data


def cmd_serve(args) -> int:
    # lazy: prefect costs ~6 s at import
    from ..pipeline.deployments import serve
    from ..pipeline.prefect_setup import flow_named

    _no_data(args)
    serve(args.params, flow_named("add-device"), flow_named("refresh"))
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    sv = sub.add_parser("serve", help="serve the add-device (event-triggered) and refresh "
                                      "(scheduled) deployments until interrupted")
    sv.add_argument("--params", default="params.yaml")
    sv.set_defaults(func=cmd_serve)
