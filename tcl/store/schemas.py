"""The schemas of the store's tables that other modules write: candidates (``tcl.sampling``),
tasks and networks (``tcl.zoo.extract``). Here, at the bottom, so that the catalog's views read
them without importing the modules that fill them."""
from __future__ import annotations

import polars as pl

# candidates/task=<task_id>.parquet
CANDIDATE_SCHEMA = {"program_id": pl.Utf8, "task_id": pl.Utf8, "trace_json": pl.Utf8,
                    "origin": pl.Utf8, "round": pl.Int32,
                    # the programs-per-task asked for when this round was sampled: a task whose
                    # design space ran out below it is not sampled again for the same ask
                    "requested": pl.Int32}

# zoo/tasks.parquet (and the imported tasks) and zoo/networks.parquet
TASK_SCHEMA: dict[str, pl.DataType] = {
    "task_id": pl.Utf8, "task_name": pl.Utf8, "op_class": pl.Utf8,
    "workload_json": pl.Utf8, "flop": pl.Float64,
}
NETWORK_SCHEMA: dict[str, pl.DataType] = {
    "network": pl.Utf8, "batch": pl.Int64, "input_shape": pl.Utf8, "network_key": pl.Utf8,
    "task_id": pl.Utf8, "weight": pl.Int64, "holdout": pl.Boolean,
}
