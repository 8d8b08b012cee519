"""What the models learn from and are scored on: a device's measured records, the held-out
tasks, and those rows joined with their cached features as a ``ProgramSet``.

The rules, each once: ``holdout_task_ids`` (never trained on), ``training_records`` (what every
model of a device learns from: the train stage, the continual run, tune's refit, the
benchmarks), ``held_out_program_set`` (what the held-out networks are scored on) and
``program_set`` (rows plus features)."""
from __future__ import annotations

from typing import Iterable, Sequence

import numpy as np
import polars as pl

from .config import Paths, TclError
from .features import load_features
from .metrics import labels as label_fn
from .models.base import ProgramSet
from .store.catalog import records
from .tokens import PER_STORE_WIDTH, TOKEN_WIDTH
from .zoo.extract import load_networks

# Where a measured record came from, for choosing what models learn from (params train.sources):
# collected programs of the reference networks' tasks, of the long-tail families', of the
# user's own networks'; records imported from MetaSchedule logs; records a tuning run measured.
SOURCES = ("reference", "families", "user", "imported", "tuning")


def tune_source(network_key: str) -> str:
    """The ``source`` of the records a ``tcl tune`` run of that network instance measured
    (``tune:resnet18-b1-224``; ``tune`` alone in records from before it was named)."""
    return f"tune:{network_key}"


# What a held-out network is scored on: its tasks' measured records of every source but a tuning
# run's. The search's picks are another distribution than the sampled candidates every device
# measures, and one device may hold tens of thousands of them (zen4-1c's tuning runs of
# resnet18 and BERT-tiny), which would make its scores incomparable with the other devices'.
EVALUATED = tuple(s for s in SOURCES if s != "tuning")


def measured(paths: Paths, device: str, task_ids: Iterable[str] | None = None,
             sources: Sequence[str] | None = None, extra: Sequence[str] = ()) -> pl.DataFrame:
    """program_id, task_id, latency (NaN for error rows) and the ``extra`` record columns of a
    device's records; with ``sources`` (of ``SOURCES``) only the records those sources hold
    (``record_sources``)."""
    columns = tuple(dict.fromkeys(("program_id", "task_id", "latency", *extra)))
    read = columns if sources is None or "source" in columns else columns + ("source",)
    frame = records(paths, device, read, task_ids)
    if sources is not None:
        frame = frame.filter(record_sources(paths, frame).list.set_intersection(
            list(sources)).list.len() > 0).select(columns)
    return frame.with_columns(pl.col("latency").fill_null(float("nan")))


def holdout_task_ids(paths: Paths) -> set[str]:
    """Tasks that any held-out network runs (evaluation only: never trained on), and the tasks
    that tuning a held-out network outside the zoo's layout measured (``tcl tune --layout``:
    records of source ``tune_source(key)``; near copies of the network's own tasks)."""
    held = load_networks(paths).filter(pl.col("holdout"))
    ids = set(held["task_id"].to_list())
    if paths.imported_tasks_file.exists():   # such tasks are imported ones
        from .store.catalog import query   # lazy: DuckDB

        sources = ", ".join(f"'{tune_source(k)}'" for k in held["network_key"].unique())
        if sources:
            ids |= set(query(paths, "select distinct task_id from records where source in "
                                    f"({sources})")["task_id"].to_list())
    return ids


def training_records(paths: Paths, device: str, sources: Sequence[str] | None = None,
                     task_ids: Iterable[str] | None = None, extra: Sequence[str] = (),
                     held: set[str] | None = None) -> pl.DataFrame:
    """``measured``'s rows that a device's models learn from: its records of ``sources``
    (params ``train.sources``; None: every record), of ``task_ids`` when given, never of a
    held-out task (``holdout_task_ids``; ``held`` when the caller has it already)."""
    held = holdout_task_ids(paths) if held is None else held
    frame = measured(paths, device, task_ids, sources=sources, extra=extra)
    return frame.filter(~pl.col("task_id").is_in(sorted(held)))


def evaluation_records(paths: Paths, device: str) -> pl.DataFrame:
    """``measured``'s rows of what the held-out networks are scored on (``EVALUATED``), of every
    task (``held_out_program_set`` keeps the held-out ones)."""
    return measured(paths, device, sources=EVALUATED)


def held_out_program_set(paths: Paths, device: str,
                         task_ids: Iterable[str] | None = None) -> ProgramSet:
    """What a device's models are scored on: its ``evaluation_records`` of the held-out tasks
    (``holdout_task_ids``; ``task_ids`` instead when the caller narrows them, e.g. to some
    networks' tasks), with features."""
    held = holdout_task_ids(paths) if task_ids is None else set(task_ids)
    records = evaluation_records(paths, device)
    ids = sorted(held & set(records["task_id"].to_list()))
    if not ids:
        raise TclError(f"device {device!r} has no measured program of a held-out task: "
                       "run the measure stage first")
    return load_program_set(paths, device, ids, records=records)


def record_sources(paths: Paths, frame: pl.DataFrame) -> pl.Series:
    """Each record's sources (of ``SOURCES``), from its ``source`` column and its task's
    networks: ``tune`` and ``tune:<network>`` are tuning, ``import:...`` imported; a
    collected record belongs to every kind of network that runs its task (reference, families:
    ``NetworkSpec.long_tail``, user: a network tcl does not ship), or to reference when no
    network of the zoo runs it."""
    # lazy: the networks (torch) cost ~3 s at import, and the CLI imports this module
    from .zoo.networks import network_kind

    nets = load_networks(paths).select("task_id", "network").unique()
    kinds = (nets.with_columns(pl.col("network").map_elements(lambda n: network_kind(n)[0],
                                                              return_dtype=pl.Utf8).alias("kind"))
             .group_by("task_id").agg(pl.col("kind").unique()))
    joined = frame.select("task_id", "source").with_row_index("_row").join(
        kinds, on="task_id", how="left").sort("_row")
    collected = pl.when(pl.col("kind").is_null()).then(pl.lit(["reference"])) \
        .otherwise(pl.col("kind"))
    return joined.select(
        pl.when((pl.col("source") == "tune") | pl.col("source").str.starts_with("tune:"))
        .then(pl.lit(["tuning"]))
        .when(pl.col("source").str.starts_with("import:")).then(pl.lit(["imported"]))
        .otherwise(collected).alias("sources"))["sources"]


def program_set(paths: Paths, rows: pl.DataFrame, labels: bool = True) -> ProgramSet:
    """A ProgramSet of ``rows`` (program_id, task_id; latency for ``labels``) joined with their
    cached features, by task then program; a row whose program has no features drops out."""
    feats = load_features(paths, rows["task_id"].unique().sort().to_list())
    frame = rows.join(feats.drop("task_id"), on="program_id", how="inner")
    if not labels:
        frame = frame.drop("latency", strict=False)
    return to_program_set(frame.sort("task_id", "program_id"), with_labels=labels)


def to_program_set(frame: pl.DataFrame, with_labels: bool = True) -> ProgramSet:
    """A ProgramSet from rows holding features (and latency when ``with_labels``)."""
    if frame.is_empty():
        raise TclError("no programs with both features and measurements for this selection: "
                       "collect and `tcl featurize` first")
    task_index = {t: i for i, t in enumerate(dict.fromkeys(frame["task_id"].to_list()))}
    group = np.array([task_index[t] for t in frame["task_id"]], np.int64)
    n_stores = frame["n_stores"].to_numpy().astype(np.int64)
    n_tokens = frame["n_tokens"].to_numpy().astype(np.int64)
    per_store = frame["per_store"].explode().to_numpy().astype(np.float32)
    tokens = frame["tokens"].explode().to_numpy().astype(np.float32)
    latency = frame["latency"].to_numpy().astype(np.float64) if "latency" in frame.columns else None
    return ProgramSet(
        program_ids=frame["program_id"].to_numpy(), group=group,
        per_store=per_store.reshape(-1, PER_STORE_WIDTH),
        store_offsets=np.concatenate([[0], np.cumsum(n_stores)]).astype(np.int64),
        tokens=tokens.reshape(-1, TOKEN_WIDTH),
        token_offsets=np.concatenate([[0], np.cumsum(n_tokens)]).astype(np.int64),
        labels=label_fn(latency, group).astype(np.float32) if with_labels else None,
        task_ids=frame["task_id"].to_numpy(), latency=latency)


def load_program_set(paths: Paths, device: str, task_ids: list[str] | None = None,
                     records: pl.DataFrame | None = None) -> ProgramSet:
    """Measured programs of ``device`` (optionally only ``task_ids``) with features and labels.
    ``records``: ``measured(paths, device)``'s answer when the caller has it already (the query
    reads every record: several seconds on the reference data, once per training fit is enough)."""
    if records is None:
        records = measured(paths, device, task_ids)
    elif task_ids is not None:
        records = records.filter(pl.col("task_id").is_in(list(task_ids)))
    return program_set(paths, records)
