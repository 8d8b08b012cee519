"""``tcl status``: per device, records, hosts, the latest model and what is pending."""
from __future__ import annotations

import argparse
import sys

from ..pipeline.status import device_status
from .common import _paths, _print_frame, csv_text, optional_params


def cmd_status(args) -> int:
    paths = _paths(args, only_reads=True)
    # The params file says which tasks the models train on; it speaks for its own data root.
    frame = device_status(paths, optional_params(args.params, paths))
    if args.format == "csv":
        sys.stdout.write(csv_text(frame))
    elif args.format == "json":
        sys.stdout.write(frame.write_ndjson())
    else:
        _print_frame(frame.drop("not_used"))
        for device, model, text in frame.select("device", "model", "not_used").iter_rows():
            if text:  # too long for a table cell
                print(f"{device}: {'newer ' if model else ''}records that no model trains "
                      f"on: {text}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    st = sub.add_parser("status", help="per device: records, hosts, latest model, what is "
                                       "pending")
    st.add_argument("--format", choices=["table", "csv", "json"], default="table")
    st.add_argument("--params",
                    help="which tasks the models train on: its zoo.networks and sample caps "
                         "(default: params.yaml, where it exists and names this data root)")
    st.set_defaults(func=cmd_status)
