"""The rules of the pipeline's own knobs (``tcl.pipeline.params`` declares which knob follows
which), beside the general ones of ``tcl.pipeline.constraints``: the data root, the rules across
knobs (each sits on the later knob and reads the earlier ones from ``known``), and ``Known``,
what the rules look up by name."""
from __future__ import annotations

import importlib.util
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..config import MAX_SEED, Paths, TclError, resolved
from ..continual import BACKBONES, DISTILLERS
from .constraints import Refused, Rule, show


class SeedsFit(Rule):
    """train.seed's run of train.seeds seeds (seed, seed + 1, ...) ends at MAX_SEED at most."""

    def check(self, seeds, key, known):
        last = known["train.seed"] + seeds - 1
        if last > MAX_SEED:
            raise Refused("train.seed", f"must be <= {MAX_SEED - seeds + 1} with train.seeds "
                                        f"{seeds} (its seeds would run to {last}; the largest "
                                        f"seed is {MAX_SEED})")
        return seeds

    def bad(self, valid, known):
        return []   # train.seed's value breaks it (tests/test_bad_inputs.py: every seed's bound)


class Hyper(Rule):
    """Model kind -> its ``make_model`` keyword arguments, plain values; one for each kind of
    train.models. The seed is train.seed, set once."""

    def check(self, value, key, known):
        if not isinstance(value, dict):
            raise Refused(key, f"expected a mapping of model kind to hyperparameters, "
                               f"got {show(value)}")
        kinds = known["model kinds"]
        hyper: dict[str, dict[str, Any]] = {}
        for kind, values in value.items():
            where = f"{key}.{kind}"
            if kind not in kinds:
                raise Refused(where, f"unknown model kind {kind!r} (known: {', '.join(kinds)})")
            values = {} if values is None else values
            if not isinstance(values, dict):
                raise Refused(where, f"expected a mapping of hyperparameters, got {show(values)}")
            for name, v in values.items():
                if name == "seed":
                    raise Refused(f"{where}.seed", "set the seed once, as train.seed")
                if not isinstance(v, (int, float, str, bool, type(None), list)):
                    raise Refused(f"{where}.{name}", f"expected a plain value, got {show(v)}")
            hyper[str(kind)] = dict(values)
        for i, kind in enumerate(known["train.models"]):
            if kind not in hyper:
                raise Refused(f"{key}.{kind}", f"missing value for train.models[{i}] "
                                               f"(write `{kind}: {{}}` for the defaults)")
        return hyper

    def bad(self, valid, known):
        kind = known["train.models"][0]
        return [("x", "expected a mapping of model kind"),
                ({**valid, "no-such-kind": {}}, "unknown model kind 'no-such-kind'"),
                ({**valid, kind: 5}, "expected a mapping of hyperparameters"),
                ({**valid, kind: {"seed": 1}}, "set the seed once"),
                ({**valid, kind: {"depth": {"a": 1}}}, "expected a plain value"),
                ({k: v for k, v in valid.items() if k != kind}, "missing value for train.models")]


class NotMeasuredInFull(Rule):
    """A device of select.devices is measured by selection, so it is not one of devices."""

    def check(self, value, key, known):
        for i, d in enumerate(value):
            if d in known["devices"]:
                raise Refused(f"{key}[{i}]", f"device {d!r} is also in devices (measured in "
                                             "full); a device is one or the other")
        return value

    def bad(self, valid, known):
        return [([known["devices"][0]], "is also in devices")]


class Teacher(Rule):
    """"<device>/<kind>" of a model the pipeline trains: a device of devices, a kind of
    train.models."""

    def check(self, value, key, known):
        dev, _, kind = str(value).partition("/")
        if not isinstance(value, str) or dev not in known["devices"] \
                or kind not in known["train.models"]:
            raise Refused(key, f"expected DEVICE/KIND of a trained model (a device of devices, "
                               f"a kind of train.models), got {show(value)}")
        return value

    def bad(self, valid, known):
        words = "expected DEVICE/KIND of a trained model"
        return [(5, words), ("x", words), (f"no-such-device/{known['train.models'][0]}", words),
                (f"{known['devices'][0]}/no-such-kind", words)]


class FirstDevice(Rule):
    """continual.first: a registered device (its model trains on its full data)."""

    def check(self, value, key, known):
        registered = known["registered devices"]
        if not isinstance(value, str) or value not in registered:
            raise Refused(key, f"expected a device name (known: "
                               f"{', '.join(sorted(registered))}), got {show(value)}")
        return value

    def bad(self, valid, known):
        return [(v, "expected a device name") for v in ("no-such-device", 3, None)]


class LaterDevices(Rule):
    """continual.then: each later device with its teacher, the device just before it (the
    latest model serves every device before it, so skipping one would drop its head). The
    teacher is spelled out because each device is a DVC stage that depends on its teacher's
    stage. Every device of the sequence is one the pipeline measures (devices and
    select.devices), so its distill stage has records to depend on. Gives the later devices."""

    def check(self, then, key, known):
        registered = known["registered devices"]
        if not isinstance(then, dict):
            raise Refused(key, f"expected a mapping of each later device to its teacher "
                               f"(device: teacher; {{}} for none), got {show(then)}")
        order = [known["continual.first"]]
        for device, teacher in then.items():
            where = f"{key}.{device}"
            if device not in registered:
                raise Refused(where, f"unknown device {device!r} "
                                     f"(known: {', '.join(sorted(registered))})")
            if device in order:
                raise Refused(where, f"device {device!r} is already in the sequence")
            if teacher == device:
                raise Refused(where, f"device {device!r} cannot be its own teacher")
            if teacher in then and teacher not in order:
                raise Refused(where, f"device {device!r} comes before its teacher {teacher!r}: "
                                     f"move it after {teacher!r} (a teacher's model must exist "
                                     "first)")
            if teacher != order[-1]:
                raise Refused(where, f"expected the device just before it, {order[-1]!r}, as "
                                     f"{device!r}'s teacher, got {show(teacher)} (the latest "
                                     "model is the one that serves every earlier device)")
            order.append(device)
        measured = known["devices"] + known["select.devices"]
        for i, device in enumerate(order):
            if device not in measured:
                raise Refused("continual.first" if i == 0 else f"{key}.{device}",
                              f"device {device!r} is not one the pipeline measures (devices or "
                              f"select.devices: {', '.join(measured)}); add it there or leave "
                              "it out of the sequence")
        return tuple(order[1:])

    def bad(self, valid, known):
        first = known["continual.first"]
        other = min(set(known["registered devices"]) - {first}
                    - set(known["devices"] + known["select.devices"]))   # registered, unmeasured
        return [("x", "expected a mapping of each later device"),
                ({"no-such-device": first}, "unknown device 'no-such-device'"),
                ({first: first}, "is already in the sequence"),
                ({other: other}, "cannot be its own teacher"),
                ({other: "no-such-device"}, "expected the device just before it"),
                ({other: first}, f"device {other!r} is not one the pipeline measures")]


class Cron(Rule):
    """A cron line of 5 fields that Prefect takes, by Prefect's own rule (its
    ``validate_cron_string``: its croniter, no random or hashed fields), so a line `tcl params`
    passes is one `tcl serve` serves."""

    EXPECTED = "expected a cron line of 5 fields such as '0 3 * * *'"

    def check(self, cron, key, known):
        if not isinstance(cron, str) or len(cron.split()) != 5:
            raise Refused(key, f"{self.EXPECTED}, got {show(cron)}")
        if not _prefect_croniter().is_valid(cron) or \
                any(f.casefold() in ("r", "h") for f in cron.split()):
            raise Refused(key, f"{self.EXPECTED}, got {cron!r}, which Prefect refuses")
        return cron

    def bad(self, valid, known):
        return [(v, self.EXPECTED) for v in (5, "0 3 * *", "99 3 * * *", "H 3 * * *")]


@lru_cache(maxsize=1)
def _prefect_croniter():
    """Prefect's croniter (``prefect._vendor.croniter``), loaded from its file: importing any
    module of prefect would fix Prefect's settings before ``tcl.pipeline.prefect_setup`` has set
    its defaults (and costs ~1 s)."""
    package = importlib.util.find_spec("prefect")   # finds it, imports nothing
    path = Path(package.origin).parent / "_vendor" / "croniter" / "croniter.py"
    spec = importlib.util.spec_from_file_location("tcl_prefect_croniter", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.croniter


class DaskAddress(Rule):
    """scale_out.dask_address: null (a LocalCluster here) or a scheduler's address."""

    def check(self, address, key, known):
        if address is not None and (not isinstance(address, str) or "://" not in address):
            raise Refused(key, f"expected null (a LocalCluster here) or a scheduler address "
                               f"such as tcp://10.0.0.5:8786, got {show(address)}")
        return address

    def bad(self, valid, known):
        return [(v, "expected null (a LocalCluster here) or a scheduler address")
                for v in (5, "10.0.0.5:8786")]


class DataRoot(Rule):
    """The data root: a path, relative to the params file's directory unless absolute, that is
    no file."""

    def check(self, data, key, known):
        if not isinstance(data, str) or not data.strip():
            raise Refused(key, f"expected the data root as a path, got {show(data)}")
        try:
            root = data_paths(known["source"], data).root
        except TclError as e:
            raise Refused(key, str(e)) from None
        if root.exists() and not root.is_dir():
            raise Refused(key, f"{root} is a file; the data root is a directory")
        return data

    def bad(self, valid, known):
        return [(v, "expected the data root as a path") for v in ("", "  ", 5, None)]


def data_paths(source: Path, data: str) -> Paths:
    """The data root ``data``, relative to the params file's directory unless absolute."""
    root = Path(data)
    return Paths(resolved(root if root.is_absolute() else source.resolve().parent / root,
                          "data root"))


class Known(dict):
    """What the rules look up by name: each knob checked so far under its full key
    ("train.models"), the params file ("source"), and the registries, each loaded on first use
    (imports that cost a second; the devices and user networks read the data root)."""

    def __init__(self, source: Path):
        super().__init__(source=source)

    def __missing__(self, name: str) -> Any:
        self[name] = value = getattr(self, "_" + name.replace(" ", "_"))()
        return value

    def _paths(self) -> Paths:
        return data_paths(self["source"], self["data"])

    def _registered_devices(self) -> set[str]:
        from ..store.devices import DeviceRegistry

        try:
            return set(DeviceRegistry(self["paths"]).all())
        except TclError as e:
            raise Refused("devices", str(e)) from None

    def _networks(self) -> set[str]:
        from ..zoo.networks import NETWORKS   # lazy: torch, ~3 s
        from ..zoo.user import user_networks

        try:
            return set(NETWORKS) | set(user_networks(self["paths"]))
        except TclError as e:
            raise Refused("zoo.networks", str(e)) from None

    # lazy, like the rest: the CLI's parser reads tcl.pipeline.params' constants at every start
    # (which imports this module), and with these registries at module top (numpy, polars,
    # pyarrow) that start took ~1.1 s
    def _model_kinds(self):
        from ..models import MODEL_KINDS

        return MODEL_KINDS

    def _trainable_model_kinds(self) -> set[str]:
        return set(self["model kinds"]) - {"continual"}

    def _sources(self) -> set[str]:
        from ..dataset import SOURCES

        return set(SOURCES)

    def _backbones(self) -> tuple[str, ...]:
        return BACKBONES

    def _distillers(self):
        return DISTILLERS

    def _samplers(self):
        from ..samplers import SAMPLERS

        return SAMPLERS

    def _max_programs_per_task(self) -> int:
        from ..sampling import MAX_PROGRAMS_PER_TASK

        return MAX_PROGRAMS_PER_TASK
