"""``tcl score``: how well a trained model ranks a device's measured programs, on any tasks.

``tcl evaluate`` scores the pipeline's models on the zoo's held-out networks; this scores one
model on whatever the device has measured: imported MetaSchedule logs, a user's network, tuning
records. Per task always; per network where weights come from the zoo (``--networks``) or a CSV
file (network, task_id, weight); per operator class where the task is known. A data root with
no zoo is fine: imported tasks carry their own name and class. Every figure is
``tcl.metrics``'s.
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np
import polars as pl

from . import metrics
from .config import Paths, TclError
from .dataset import load_program_set
from .features import featurize
from .resolve import resolve_model
from .store.catalog import Catalog
from .zoo.extract import load_networks


def _records(paths: Paths, device: str, source: str | None,
             task_ids: Sequence[str] | None) -> pl.DataFrame:
    cat = Catalog(paths, in_memory=True)
    try:
        # Which programs and tasks count; their latencies come with the features
        # (dataset.load_program_set), as for training.
        frame = cat.records(device, ("task_id", "program_id", "source"))
        tasks = cat.sql("SELECT DISTINCT ON (task_id) task_id, task_name, op_class FROM tasks")
    finally:
        cat.close()
    if frame.is_empty():
        raise TclError(f"device {device!r} has no measured records in {paths.records_dir} "
                       "(measure with `tcl collect` or bring logs with `tcl import`)")
    if source is not None:
        keep = pl.col("source") == source if source != "import" else \
            pl.col("source").str.starts_with("import")
        frame = frame.filter(keep)
        if frame.is_empty():
            raise TclError(f"device {device!r} has no records from source {source!r}")
    if task_ids is not None:
        unknown = sorted(set(task_ids) - set(frame["task_id"].to_list()))
        if unknown:
            raise TclError(f"device {device!r} has no records of task(s) {', '.join(unknown)}")
        frame = frame.filter(pl.col("task_id").is_in(list(task_ids)))
    return frame.drop("source"), tasks


def network_weights(paths: Paths, networks: Sequence[str] | None,
                    weights_file: str | Path | None) -> pl.DataFrame | None:
    """network_key, task_id, weight: of zoo networks (names or instance keys) or a CSV file."""
    if weights_file is not None:
        f = Path(weights_file)
        if not f.is_file():
            raise TclError(f"--weights {f}: no such file")
        try:
            frame = pl.read_csv(f, schema_overrides={"task_id": pl.Utf8})
        except Exception as e:
            raise TclError(f"--weights {f} is not a CSV file: {e}") from None
        need = {"network", "task_id", "weight"}
        if not need <= set(frame.columns):
            raise TclError(f"--weights {f} needs columns network, task_id, weight; it has "
                           f"{', '.join(frame.columns)}")
        weights = frame.select(pl.col("network").cast(pl.Utf8).alias("network_key"), "task_id",
                               pl.col("weight").cast(pl.Float64, strict=False))
        # a weight counts a task's runs per inference: a number >= 0 (0 leaves a task out)
        bad = weights.with_row_index("row").filter(
            pl.col("weight").is_null() | ~pl.col("weight").is_finite() | (pl.col("weight") < 0))
        if len(bad):
            row = bad.row(0, named=True)
            shown = frame["weight"][row["row"]]
            raise TclError(f"--weights {f}: line {row['row'] + 2} (task {row['task_id']}): weight "
                           f"{shown!r} is not a number >= 0 ({len(bad)} such line(s))")
        return weights
    if not networks:
        return None

    nets = load_networks(paths)
    if nets.is_empty():
        raise TclError(f"--networks needs the zoo, and {paths.zoo_dir} has none: give the "
                       "weights as a file (--weights network,task_id,weight)")
    picked = nets.filter(pl.col("network").is_in(list(networks)) |
                         pl.col("network_key").is_in(list(networks)))
    unknown = sorted(set(networks) - set(picked["network"].to_list())
                     - set(picked["network_key"].to_list()))
    if unknown:
        raise TclError(f"no network {', '.join(map(repr, unknown))} in the zoo "
                       f"(`tcl zoo list` shows the extracted ones)")
    return picked.select("network_key", "task_id", "weight")


def score_records(paths: Paths, device: str, model: str | None = None, *,
                  task_ids: Sequence[str] | None = None, source: str | None = None,
                  networks: Sequence[str] | None = None, weights_file: str | Path | None = None,
                  ks: Sequence[int] = (1, 5), any_device: bool = False) -> dict:
    """{"model": description, "tasks": per task, "networks": per network or None,
    "classes": per operator class} for ``model`` on the device's measured programs."""
    weights = network_weights(paths, networks, weights_file)   # bad weights: before any work
    records, tasks = _records(paths, device, source, task_ids)
    # before featurizing: a model of another device (or an unreadable file) is refused early
    found = resolve_model(paths, device, model, any_device=any_device)
    ids = records["task_id"].unique().sort().to_list()
    if weights is not None:
        ids = sorted(set(ids) & set(weights["task_id"].to_list()))
        if not ids:
            raise TclError(f"device {device!r} has no records of the networks' tasks")
    no_meta = sorted(set(ids) - set(tasks["task_id"].to_list()))
    if no_meta:
        raise TclError(f"{len(no_meta)} task(s) with records have no workload in the zoo or the "
                       f"imported tasks (e.g. {no_meta[0]}); re-import their database")
    featurize(paths, ids, progress=False)       # cached; only what is missing
    programs = load_program_set(paths, device, ids)
    keep = np.isin(programs.program_ids.astype(str), records["program_id"].to_list())
    if not keep.all():                          # --source: only that source's programs
        programs = programs.subset(np.flatnonzero(keep))
    scores = np.asarray(found.model.predict(programs), np.float64)
    per_task = metrics.task_metrics(scores, programs.latency, programs.task_ids.astype(str), ks)
    out_tasks = metrics.task_scores(per_task, ks).join(tasks, on="task_id", how="left") \
        .select("task_id", "task_name", "op_class", "n_programs",
                *[f"top{k}" for k in ks], "pairwise").sort("task_id")
    return {"model": found.what, "tasks": out_tasks,
            "networks": None if weights is None else metrics.network_metrics(per_task, weights, ks),
            "classes": metrics.class_metrics(per_task, tasks, ks)}
