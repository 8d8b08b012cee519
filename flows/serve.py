"""``tcl serve``: serve the add-device deployment (triggered by the ``tcl.device.added`` event)
and the refresh deployment (on ``add_device.refresh_cron``) until interrupted."""
from __future__ import annotations

from flows._common import prefect_defaults

prefect_defaults()


def deployments(params_file: str) -> list:
    from prefect.events import DeploymentEventTrigger

    from flows.add_device import add_device
    from flows.refresh import refresh
    from tcl.events import DEVICE_ADDED
    from tcl.params import load_params

    params = load_params(params_file)
    trigger = DeploymentEventTrigger(
        expect={DEVICE_ADDED},
        parameters={"device": "{{ event.resource.id }}",
                    "params_file": "{{ event.payload.params_file }}"})
    return [add_device.to_deployment(name="add-device", triggers=[trigger],
                                     parameters={"params_file": params_file}),
            refresh.to_deployment(name="refresh", cron=params.add_device.refresh_cron,
                                  parameters={"params_file": params_file})]


def serve(params_file: str = "params.yaml") -> None:
    from prefect import serve as prefect_serve

    prefect_serve(*deployments(params_file))
