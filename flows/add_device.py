"""Add-device flow: a newly registered device gets selected, measured, distilled, evaluated and
registered (``tcl.add_device.add_device_run``), and the result is published as a Markdown
artifact (table and plot). Triggered by ``tcl device add`` (directly, or through the
``tcl.device.added`` event and the deployment ``tcl serve`` serves)."""
from __future__ import annotations

import sys

from flows._common import main, refuse  # first: sets Prefect's defaults before it is imported
from prefect import flow
from prefect.artifacts import create_markdown_artifact

from tcl.add_device import add_device_run, check_device
from tcl.config import TclError
from tcl.events import served_params


@flow(name="add-device", log_prints=True)
def add_device(device: str = "", params_file: str = "params.yaml",
               event_params_file: str = "") -> dict:
    """Select, measure, distill, evaluate and register ``device``'s model. Served, it uses only
    the params file ``tcl serve`` bound; ``event_params_file`` (what a ``tcl.device.added``
    event named) is only compared with it (``tcl.events.served_params``)."""
    try:
        params = served_params(params_file, event_params_file)
        check_device(params, device)
    except TclError as e:
        return refuse(e)
    result = add_device_run(params, device)
    plot = params.paths.reports_dir / "add-device" / f"{device}.png"
    text = result.markdown() + _embedded(_plot(result, plot))
    create_markdown_artifact(key=f"add-device-{_key(device)}", markdown=text,
                             description=f"Device {device} added")
    print(result.markdown())
    return {"device": device, "model": result.model, "new_model": result.new_model,
            "selected": result.selected, "measured_now": result.measured_now}


def _key(name: str) -> str:   # artifact keys: lowercase letters, digits and dashes
    return "".join(c if c.isalnum() else "-" for c in name.lower())


def _plot(result, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    devices = list(result.metrics.get("devices", {}))
    top1 = [result.metrics["devices"][d].get("top1", 0) for d in devices]
    forgot = [(result.metrics.get("forgetting", {}).get(d) or {}).get("pairwise", {})
              .get("overall") or 0 for d in devices]
    fig, axes = plt.subplots(1, 2, figsize=(8, 3))
    axes[0].bar(devices, top1, color=["C1" if d == result.device else "C0" for d in devices])
    axes[0].set_ylabel("top-1, held-out networks")
    axes[0].set_ylim(0, 1)
    axes[1].bar(devices, forgot)
    axes[1].set_ylabel("forgetting (pairwise)")
    for ax in axes:
        ax.tick_params(axis="x", labelsize=7, rotation=20)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def _embedded(path) -> str:
    import base64

    data = base64.b64encode(path.read_bytes()).decode()
    return f"\n![scores](data:image/png;base64,{data})\n"


if __name__ == "__main__":
    sys.exit(main(add_device))
