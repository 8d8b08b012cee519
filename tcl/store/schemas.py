"""The schemas of the store's tables that other modules write: candidates (``tcl.sampling``),
tasks and networks (``tcl.zoo.extract``). Here, at the bottom, so that the catalog's views read
them without importing the modules that fill them; and the one check of a Parquet file's schema
(``schema_problem``), which every reader of the store's files goes through."""
from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import polars as pl

# candidates/task=<task_id>.parquet
CANDIDATE_SCHEMA = {"program_id": pl.Utf8, "task_id": pl.Utf8, "trace_json": pl.Utf8,
                    "origin": pl.Utf8, "round": pl.Int32,
                    # the programs-per-task asked for when this round was sampled: a task whose
                    # design space ran out below it is not sampled again for the same ask
                    "requested": pl.Int32}

# zoo/tasks.parquet (and the imported tasks) and zoo/networks.parquet, written together: a
# damaged one is rebuilt with the other
ZOO_FIX = ("move zoo/tasks.parquet and zoo/networks.parquet away and run `tcl zoo` to extract "
           "them again")
IMPORTED_TASKS_FIX = "move it away and import the databases again"
TASK_SCHEMA: dict[str, pl.DataType] = {
    "task_id": pl.Utf8, "task_name": pl.Utf8, "op_class": pl.Utf8,
    "workload_json": pl.Utf8, "flop": pl.Float64,
}
NETWORK_SCHEMA: dict[str, pl.DataType] = {
    "network": pl.Utf8, "batch": pl.Int64, "input_shape": pl.Utf8, "network_key": pl.Utf8,
    "task_id": pl.Utf8, "weight": pl.Int64, "holdout": pl.Boolean,
}


def schema_problem(schema: Mapping[str, pl.DataType], expected: Mapping[str, pl.DataType]
                   ) -> str | None:
    """Why a file of ``schema`` is not one of ``expected``'s (missing or unknown columns, other
    types), in a line; None when it is. Every Parquet reader of the store checks through here."""
    missing = [c for c in expected if c not in schema]
    extra = [c for c in schema if c not in expected]
    wrong = [f"{c} is {schema[c]}, expected {t}" for c, t in expected.items()
             if c in schema and schema[c] != t]
    if not (missing or extra or wrong):
        return None
    short = lambda cols: ", ".join(cols[:4]) + (", ..." if len(cols) > 4 else "")  # noqa: E731
    parts = ([f"missing columns {short(missing)}"] if missing else []) + \
        ([f"unknown columns {short(extra)}"] if extra else []) + wrong
    return "foreign schema: " + "; ".join(parts[:3])


def file_schema_problem(path: Path, expected: Mapping[str, pl.DataType]) -> str | None:
    """``schema_problem`` of the Parquet file ``path`` (read from its footer only), or why its
    footer does not read."""
    try:
        schema = pl.read_parquet_schema(path)
    except Exception as e:  # pyarrow/polars raise several types for a bad footer
        return f"not a readable Parquet file ({_first_line(e)})"
    return schema_problem(schema, expected)


def foreign_file(path: Path, expected: Mapping[str, pl.DataType], what: str) -> str | None:
    """Why the file ``path`` (a ``what``, e.g. "zoo tasks file") is not one of ``expected``'s
    schema, in a line naming it and the expected columns; None when it is."""
    try:
        schema = pl.read_parquet_schema(path)
    except Exception as e:  # pyarrow/polars raise several types for a bad footer
        return f"{what} {path} is not readable Parquet ({_first_line(e)})"
    problem = schema_problem(schema, expected)
    return None if problem is None else (f"{what} {path} is not one tcl wrote: {problem} "
                                         f"(expected the columns {', '.join(expected)})")


def _first_line(e: Exception) -> str:
    text = str(e).strip()
    return text.splitlines()[0][:200] if text else type(e).__name__
