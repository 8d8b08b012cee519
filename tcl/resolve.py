"""Which model a step uses: ``resolve_model(paths, device, spec)`` is the one rule (collect,
select, distill, add-device, predict, score, tune): a registered model (``tcl.registry``), a
trained kind, or a file, each checked against the device it will score. ``COLD_START`` is the
one default of a device with nothing measured yet: another device's model.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .config import Paths, TclError, check_name
from .continual import BACKBONES
from .models import MODEL_KINDS, load_model
from .registry import Entry, ModelRegistry

LATEST = "latest"
ANY_OTHER = "*"    # in DEVICE/...: another device than the one scored (the first found)
SPEC_HELP = ("a kind trained for the device (mamba, tenset-mlp, xgb, ...), a model file, latest "
             "(the device's newest registered model, else its first trained kind), "
             "DEVICE/latest or DEVICE/KIND (another device's model, on purpose; * for any other "
             "device)")

# Cold start: the model a device with nothing measured yet starts from, another device's by
# design (a sampler's embedding and uncertainty for its first picks; the teacher that the
# add-device run distills): the newest registered continual model made for another device, else
# another device's trained model of a continual backbone (they embed programs), the first found.
COLD_START = (f"{ANY_OTHER}/{LATEST}", *(f"{ANY_OTHER}/{kind}" for kind in BACKBONES))


@dataclass(frozen=True)
class Resolved:
    """The model a step uses: ``model`` (ready to score; None when resolved with ``load``
    False), ``what`` (a line naming it: a registry id, DEVICE/KIND, or its file relative to the
    data root) and ``entry`` (its registry row, for a registered model)."""

    model: Any
    what: str
    entry: Entry | None = None


def resolve_model(paths: Paths, device: str, spec: str | None = LATEST, *,
                  any_device: bool = False, backbone: str | None = None,
                  optional: bool = False, load: bool = True) -> Resolved | None:
    """The one rule for which model a step that scores ``device`` uses; ``spec`` (None: latest):

    - ``latest``: the registry's newest model made for ``device`` (its head for ``device``); with
      none registered, the first kind trained for the device. ``continual``: the same, but the
      registry's model only;
    - a kind (``mamba``, ``tenset-mlp``, ...): ``models/<device>/<kind>.model``;
    - ``DEVICE/latest``: the registry's newest model made for DEVICE; ``DEVICE/KIND``:
      ``models/DEVICE/KIND.model``; either as made (its own head). DEVICE ``*``: any device but
      ``device`` (the newest registered; the first by name with that kind): a teacher;
    - ``none``: no model (None);
    - else a model file.

    ``backbone``: registered models of that backbone only. A model made for another device is
    refused (``check_model_device``) unless ``any_device``, which a step passes that takes
    another device's model by design (a teacher). ``optional``: None where the spec finds no
    model (or is ``none``), else a TclError saying what is missing. ``load`` False: the same
    answer without reading the model (``model`` None; the device check then reads what records
    it outside the file): what a dry run or a plan needs."""
    spec = LATEST if spec is None else spec
    if spec == "none":
        if optional:
            return None
        raise TclError(f"model 'none': this step needs a model ({SPEC_HELP})")
    try:
        return _resolve(paths, device, spec, any_device, backbone, load)
    except _Missing:
        if optional:
            return None
        raise


def cold_start_model(paths: Paths, device: str, *, backbone: str | None = None,
                     registered: bool = False, load: bool = True) -> Resolved | None:
    """The first model of ``COLD_START`` found for ``device`` (``resolve_model``'s answer), or
    None; ``registered``: a registered model only (a teacher to distill is a registry row)."""
    specs = [s for s in COLD_START if not registered or s.endswith(f"/{LATEST}")]
    return next(filter(None, (resolve_model(paths, device, spec, any_device=True,
                                            backbone=backbone, optional=True, load=load)
                              for spec in specs)), None)


class _Missing(TclError):
    """The spec names no existing model (``resolve_model``'s ``optional`` turns it into None)."""


def _resolve(paths: Paths, device: str, spec: str, any_device: bool,
             backbone: str | None, load: bool) -> Resolved:
    registry = ModelRegistry(paths)
    if spec in (LATEST, "continual"):
        entry = registry.latest(device, backbone)
        if entry is not None:
            model = registry.load(entry).for_device(device) if load else None
            return Resolved(model, f"registry {entry.id}", entry)
        if spec == "continual":
            raise _Missing(f"no registered continual model serves device {device!r} (`tcl models "
                           f"list`; make one with `tcl distill --device {device}`)")
        kinds = [k for k in MODEL_KINDS if paths.model_file(device, k).exists()]
        if not kinds:
            raise _Missing(f"no model for device {device!r}: no registered continual model and "
                           f"no trained one under {paths.models_dir / device}; train one (`tcl "
                           f"train --device {device} --model tenset-mlp`) or pass --model FILE")
        spec = kinds[0]
    named = _device_spec(spec)
    if named is not None:
        return _of_device(paths, device, *named, any_device, backbone, load)
    path = _model_file(paths, device, spec)
    loaded = load_model(path, kind=spec if spec in MODEL_KINDS else None) if load else None
    check_model_device(path, model_devices(paths, path, loaded), device, any_device)
    if hasattr(loaded, "for_device") and device in loaded.devices:   # continual: pick the head
        loaded = loaded.for_device(device)
    # Described relative to the data root when it lies there: summaries and benchmark results
    # are committed, and must not hold a machine's absolute paths.
    root = paths.root.resolve()
    shown = path.resolve()
    if shown.is_relative_to(root):
        return Resolved(loaded, str(Path(root.name) / shown.relative_to(root)))
    return Resolved(loaded, str(path))


def _model_file(paths: Paths, device: str, spec: str) -> Path:
    """The file a kind (``models/<device>/<kind>.model``) or a file ``spec`` names, which must
    exist."""
    path = paths.model_file(device, spec) if spec in MODEL_KINDS else Path(spec)
    if not path.exists():
        raise _Missing(f"model {spec!r}: {path} does not exist (a kind trained for {device!r}, "
                       "or a model file)")
    return path


def check_model_spec(paths: Paths, device: str, spec: str) -> None:
    """``resolve_model``'s refusals that need no model trained or loaded (``tcl tune
    --dry-run``): ``none``, and a file that does not exist (a mistyped kind reads as one). A
    spec that training fills (latest, continual, a kind, DEVICE/...) passes: a plan may come
    before the pipeline trains it."""
    if spec == "none":
        resolve_model(paths, device, spec)   # refused before anything is read
    elif spec not in (LATEST, "continual") and spec not in MODEL_KINDS \
            and _device_spec(spec) is None:
        _model_file(paths, device, spec)


def _device_spec(spec: str) -> tuple[str, str] | None:
    """(DEVICE, latest or KIND) of a ``DEVICE/latest`` or ``DEVICE/KIND`` spec, else None (a
    file path)."""
    head, sep, tail = spec.partition("/")
    if not sep or not (tail == LATEST or tail in MODEL_KINDS):
        return None
    if head != ANY_OTHER:
        try:
            check_name(head, "device name")
        except TclError:
            return None
    return head, tail


def _of_device(paths: Paths, device: str, named: str, what: str, any_device: bool,
               backbone: str | None, load: bool) -> Resolved:
    """A device's model named with the device (``DEVICE/latest``, ``DEVICE/KIND``), as it was
    made (its own head)."""
    registry = ModelRegistry(paths)
    if what == LATEST:
        entry = registry.latest_elsewhere(device, backbone) if named == ANY_OTHER else \
            registry.latest(named, backbone)
        if entry is None:
            whose = f"any device but {device!r}" if named == ANY_OTHER else repr(named)
            raise _Missing(f"no registered {backbone or 'continual'} model made for {whose} "
                           "(`tcl models list`)")
        check_model_device(paths.root / entry.path, (entry.devices, "the devices it serves"),
                           device, any_device)
        return Resolved(registry.load(entry) if load else None, f"registry {entry.id}", entry)
    if named == ANY_OTHER:   # the first device by name with that kind trained
        found = sorted(d.name for d in paths.models_dir.glob("*/")
                       if d.name not in (device, paths.registry_dir.name)
                       and paths.model_file(d.name, what).exists())
        if not found:
            raise _Missing(f"no device but {device!r} has a trained {what} model "
                           f"(under {paths.models_dir})")
        named = found[0]
    f = paths.model_file(named, what)
    if not f.exists():
        raise _Missing(f"model {named}/{what}: {f} does not exist (train it: `tcl train --device "
                       f"{named} --model {what}`)")
    loaded = load_model(f, kind=what) if load else None
    check_model_device(f, model_devices(paths, f, loaded), device, any_device)
    return Resolved(loaded, f"{named}/{what}")


def model_devices(paths: Paths, path: Path, loaded=None) -> tuple[list[str], str]:
    """The devices the model file at ``path`` was made for, and where that is recorded: a
    continual model's heads; else the device recorded in the file (``tcl train`` records it, so
    a copy anywhere says it); else the training facts beside it (``<name>.json``); else its
    place, ``models/<device>/...``. ([], "") when nothing says (a file of an older tcl)."""
    if loaded is not None and hasattr(loaded, "devices"):
        return list(loaded.devices), "the devices it serves"
    if loaded is not None and getattr(loaded, "made_for", None):
        return [loaded.made_for], "recorded in the file"
    info = path.with_suffix(".json")
    if info.is_file():
        try:
            doc = json.loads(info.read_text())
        except (UnicodeDecodeError, ValueError):
            doc = None
        if isinstance(doc, dict) and isinstance(doc.get("device"), str):
            return [doc["device"]], str(info)
    try:
        rel = path.resolve().relative_to(paths.models_dir.resolve())
    except ValueError:
        return [], ""
    if len(rel.parts) > 1 and rel.parts[0] != "registry":
        return [rel.parts[0]], f"its place under {paths.models_dir}"
    return [], ""


def check_model_device(path: Path, made_for: tuple[list[str], str], device: str,
                       any_device: bool) -> None:
    """The one rule of every command that takes a model (predict, score, tune): a model made
    for another device ranks by that device's latencies, so it is refused unless the user asks
    for it (--any-device). A model whose device nothing records is accepted."""
    devices, source = made_for
    if any_device or not devices or device in devices:
        return
    names = ", ".join(map(repr, devices))
    raise TclError(f"model {path} was trained on device {names} ({source}), not {device!r}: "
                   f"use it with --device {devices[-1]}, or pass --any-device to use another "
                   "device's model on purpose")
