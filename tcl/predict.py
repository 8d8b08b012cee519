"""``tcl predict``: a trained cost model ranks a user's candidate programs, outside tuning.

The candidates come as a MetaSchedule JSONDatabase (its workloads and the traces of its tuning
records; latencies, if any, are ignored). Features are computed as for the store's programs
(``tcl.features.program_features``) but not cached, and nothing is written to the store. The
model is whatever ``tcl.resolve.resolve_model`` resolves (default: the device's latest).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl

from .config import Paths, TclError
from .dataset import to_program_set
from .features import program_features
from .measure import msjson
from .resolve import resolve_model


def predict_database(paths: Paths, device: str, work_dir: str | Path, model: str | None = None,
                     any_device: bool = False) -> tuple[pl.DataFrame, str, list[str]]:
    """Scores of every distinct program in the JSONDatabase at ``work_dir``: task_id,
    task_name, program_id, score (higher is faster) and rank within its task (1 = predicted
    fastest); the model's description; the skipped lines."""
    found = resolve_model(paths, device, model, any_device=any_device)   # before any work
    programs, stats = msjson.read_programs(work_dir)
    skipped = stats.skipped()
    if programs.is_empty():
        raise TclError(f"{work_dir}: no valid tuning record to score ({stats.lines} lines read"
                       + (f"; skipped: {skipped[0]}" if skipped else "") + ")")
    feats = pl.concat([program_features(tid, g["workload_json"][0], g)
                       for (tid,), g in programs.group_by(["task_id"], maintain_order=True)])
    ps = to_program_set(feats, with_labels=False)
    scores = np.asarray(found.model.predict(ps), dtype=np.float64)
    out = pl.DataFrame({"program_id": ps.program_ids.astype(str), "score": scores}) \
        .join(programs.select("task_id", "task_name", "program_id"), on="program_id")
    out = out.with_columns(pl.col("score").rank("ordinal", descending=True).over("task_id")
                           .cast(pl.Int64).alias("rank"))
    return out.select("task_id", "task_name", "program_id", "score", "rank") \
        .sort("task_id", "rank"), found.what, skipped
