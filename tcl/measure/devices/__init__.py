"""Device kinds: how a device builds, runs and times programs, behind one interface
(``base.DeviceKind``), as MetaSchedule keeps ``Builder`` and ``Runner`` and ``create(kind)``.

A ``Device`` (``tcl.store.devices``) is the record: its name, target, measurement settings and
its ``kind``, named where the record is made. ``create(device)`` gives the object of its kind,
which owns the builder, the runner, the cpus its runs leave free, whether it can measure now,
and the timer and timing protocol of a compiled network, with the shared ``DeviceSettings``
(``settings``: the build timeout among them). Callers ask that object; none asks which kind it
is. The kinds:

- ``local`` (``local.LocalCPU``): a CPU of this host, pinned to the profile's first cores;
- ``rpc`` (``rpc.RPCDevice``): a board behind a TVM RPC tracker.

A new kind is one module with a ``DeviceKind`` subclass and one line here (or
``DEVICE_KINDS.add`` from the package that defines it, as the tests' simulated device does).
"""
from __future__ import annotations

from ...classes import ClassRegistry

DEVICE_KINDS = ClassRegistry("device kind", {   # kind -> (module, class)
    "local": ("tcl.measure.devices.local", "LocalCPU"),
    "rpc": ("tcl.measure.devices.rpc", "RPCDevice"),
})


def create(device, settings=None):
    """The ``DeviceKind`` of ``device`` (``Device.kind`` looked up in ``DEVICE_KINDS``) with
    ``settings`` (a ``DeviceSettings``; default ``settings.SETTINGS``)."""
    from .settings import SETTINGS

    return DEVICE_KINDS.get_class(device.kind)(device, settings or SETTINGS)
