"""Helpers the benchmark scripts share (scripts import it from their own directory)."""
from __future__ import annotations

import math
from typing import Callable

import polars as pl

DEFAULT_SEARCH = (512, 4, "gradient")   # MetaSchedule's population, generations, scheduler


def search_of(row: dict) -> tuple[int, int, str] | None:
    """(population, generations, task scheduler) a row's run searched with; None for a row
    older than the field (rows of one results file share one command's search: docs/results.md
    says which); gradient for a row older than the scheduler's field (tcl tune had no other)."""
    s = row.get("search")
    return (s["population"], s["generations"], s.get("scheduler", "gradient")) if s else None


def run_label(model: str, update: str, description: str,
              search: tuple[int, int, str] | None = None) -> str:
    """A tuning run's name in the tables: the model, its update mode, its search where not
    MetaSchedule's default, and for tcl the model file it used (from ``description``; none
    when it is empty)."""
    name = model + ("" if update == "none" else f" ({update})")
    if search is not None and search[:2] != DEFAULT_SEARCH[:2]:
        name += f" {search[0]}x{search[1]}"   # population x generations
    if search is not None and search[2] != DEFAULT_SEARCH[2]:
        name += f", {search[2]}"
    return name + (f" [{description.split(' (')[0]}]" if model == "tcl" and description else "")


def report_errors(name: str, job: Callable[[], None]) -> int:
    """A script's exit status: 0, or 2 with ``name: error: ...`` when ``job`` raises TclError."""
    import sys

    from tcl.config import TclError

    try:
        job()
    except TclError as e:
        print(f"{name}: error: {e}", file=sys.stderr)
        return 2
    return 0


def parse_value(text: str):
    """A hyperparameter value from the command line: int, float, else YAML (YAML alone reads
    7e-4 as a string)."""
    import yaml

    for parse in (int, float):
        try:
            return parse(text)
        except ValueError:
            continue
    return yaml.safe_load(text)


def mean_std(table: pl.DataFrame, by: list[str], columns: list[str]) -> pl.DataFrame:
    """Per ``by`` group (first-seen order): "mean (std)" of each quality column, 3 decimals."""
    return table.group_by(by, maintain_order=True).agg(
        pl.format("{} ({})", pl.col(c).mean().round(3), pl.col(c).std().round(3)).alias(c)
        for c in columns)


def pipeline_task_ids(root, params_file: str) -> set[str]:
    """The tasks the pipeline's train and evaluate stages use (``params_file``'s networks and
    task caps), looked up in the zoo under ``root``: benchmarks train on what the stages do."""
    from tcl.config import Paths
    from tcl.pipeline.params import load_params
    from tcl.pipeline.inputs import instances
    from tcl.zoo.extract import select_tasks

    params = load_params(params_file)
    frame = select_tasks(Paths(root), [i.key for i in instances(params)],
                         params.sample.max_train_tasks, params.sample.max_holdout_tasks)
    return set(frame["task_id"].to_list())


def host_short(identity: str | None) -> str:
    """A row's host as a table names it: the CPU model name with its family and model, e.g.
    ``Intel(R) Xeon(R) Processor 6/167`` (``tcl.store.devices.host_identity``'s string); "-"
    for a row older than the field."""
    import re

    if not identity:
        return "-"
    name, _, rest = identity.partition(" (")
    ids = re.search(r"family (\w+) model (\w+)", rest)
    return f"{name} {ids[1]}/{ids[2]}" if ids else name


def mean_se(values, digits: int = 3) -> str:
    """Mean ± standard error of a benchmark's repeats (seeds, rounds), NaN and None skipped;
    fewer than 5 repeats say how many (one repeat has no error to show)."""
    from tcl.metrics import standard_error

    v = [float(x) for x in values if x is not None and not math.isnan(x)]
    if not v:
        return ""
    if len(v) == 1:
        return f"{v[0]:.{digits}f} (n=1)"
    return (f"{sum(v) / len(v):.{digits}f} ± {standard_error(v):.{digits}f}"
            + ("" if len(v) >= 5 else f" (n={len(v)})"))
