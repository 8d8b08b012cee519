"""``tcl predict``: a trained cost model ranks a user's candidate programs, outside tuning.

The candidates come as a MetaSchedule JSONDatabase (its workloads and the traces of its tuning
records; latencies, if any, are ignored). Features are computed as for the store's programs
(``tcl.features.program_features``) but not cached, and nothing is written to the store. The
model is the device's latest continual model from the registry, a trained kind of
``models/<device>/<kind>.model``, or a model file.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl

from .config import Paths, TclError
from .dataset import to_program_set
from .features import program_features
from .measure import msjson
from .models import MODEL_KINDS, load_model
from .registry import ModelRegistry


def resolve_model(paths: Paths, device: str, model: str | None, any_device: bool = False):
    """``model``: None (the registry's latest model serving ``device``), a kind trained for the
    device, or a model file. Returns (the model ready to score ``device``, a description). A
    model made for another device is refused (``check_model_device``) unless ``any_device``."""
    if model is None or model == "continual":
        entry = ModelRegistry(paths).latest(device)
        if entry is None:
            if model == "continual":
                raise TclError(f"no registered continual model serves device {device!r} "
                               f"(`tcl models list`; make one with `tcl distill --device "
                               f"{device}`)")
            kinds = [k for k in MODEL_KINDS if paths.model_file(device, k).exists()]
            if not kinds:
                raise TclError(f"no model for device {device!r}: no registered continual model "
                               f"and no trained one under {paths.models_dir / device}; train "
                               f"one (`tcl train --device {device} --model tenset-mlp`) or "
                               "pass --model FILE")
            model = kinds[0]
        else:
            return ModelRegistry(paths).load(entry).for_device(device), f"registry {entry.id}"
    path = paths.model_file(device, model) if model in MODEL_KINDS else Path(model)
    if not path.exists():
        raise TclError(f"model {model!r}: {path} does not exist (a kind trained for "
                       f"{device!r}, or a model file)")
    loaded = load_model(path, kind=model if model in MODEL_KINDS else None)
    check_model_device(path, model_devices(paths, path, loaded), device, any_device)
    if hasattr(loaded, "for_device") and device in loaded.devices:   # continual: pick the head
        loaded = loaded.for_device(device)
    # Described relative to the data root when it lies there: summaries and benchmark results
    # are committed, and must not hold a machine's absolute paths.
    root = paths.root.resolve()
    shown = path.resolve()
    if shown.is_relative_to(root):
        return loaded, str(Path(root.name) / shown.relative_to(root))
    return loaded, str(path)


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


def predict_database(paths: Paths, device: str, work_dir: str | Path, model: str | None = None,
                     any_device: bool = False) -> tuple[pl.DataFrame, str, list[str]]:
    """Scores of every distinct program in the JSONDatabase at ``work_dir``: task_id,
    task_name, program_id, score (higher is faster) and rank within its task (1 = predicted
    fastest); the model's description; the skipped lines."""
    scorer, what = resolve_model(paths, device, model, any_device)   # refused before any work
    programs, stats = msjson.read_programs(work_dir)
    skipped = stats.skipped()
    if programs.is_empty():
        raise TclError(f"{work_dir}: no valid tuning record to score ({stats.lines} lines read"
                       + (f"; skipped: {skipped[0]}" if skipped else "") + ")")
    feats = pl.concat([program_features(tid, g["workload_json"][0], g)
                       for (tid,), g in programs.group_by(["task_id"], maintain_order=True)])
    ps = to_program_set(feats, with_labels=False)
    scores = np.asarray(scorer.predict(ps), dtype=np.float64)
    out = pl.DataFrame({"program_id": ps.program_ids.astype(str), "score": scores}) \
        .join(programs.select("task_id", "task_name", "program_id"), on="program_id")
    out = out.with_columns(pl.col("score").rank("ordinal", descending=True).over("task_id")
                           .cast(pl.Int64).alias("rank"))
    return out.select("task_id", "task_name", "program_id", "score", "rank") \
        .sort("task_id", "rank"), what, skipped
