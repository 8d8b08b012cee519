"""The data card: what the reference dataset holds, how noisy it is, how devices differ.

Every figure comes from DuckDB queries over the record store; the re-measured sample is a real
second measurement of 1% of the ok records, kept apart from the store (``data/remeasure``).
"""
from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import polars as pl

from .config import Paths, save_figure
from .evaluate import markdown_table
from .measure.collect import collect
from .metrics import spearman
from .store.catalog import Catalog
from .store.devices import DeviceRegistry
from .store.records import RecordStore, write_parquet_atomic
from .store.schemas import CANDIDATE_SCHEMA


def device_summary(cat: Catalog) -> pl.DataFrame:
    return cat.sql("""
        SELECT r.device, any_value(r.host_cpu) AS host_cpu, any_value(r.target) AS target,
               count(DISTINCT r.task_id) AS tasks, count(*) AS programs,
               count(*) FILTER (WHERE status <> 'ok') AS errors,
               count(*) FILTER (WHERE status = 'build_error') AS build_errors,
               count(*) FILTER (WHERE status = 'timeout') AS timeouts,
               count(*) FILTER (WHERE status = 'run_error') AS run_errors,
               min(measured_at) AS first, max(measured_at) AS last
        FROM records r GROUP BY r.device ORDER BY r.device""")


def busy_hours(cat: Catalog) -> dict[str, float]:
    """Collection time per device: the sum of gaps under 10 minutes between its records
    (records arrive a batch at a time, a minute or more apart)."""
    frame = cat.sql("""
        SELECT device, sum(gap) / 3600 AS hours FROM (
          SELECT device, epoch(measured_at) - epoch(lag(measured_at) OVER
                 (PARTITION BY device ORDER BY measured_at)) AS gap FROM records)
        WHERE gap < 600 GROUP BY device""")
    return dict(frame.iter_rows())


def repeat_noise(cat: Catalog) -> pl.DataFrame:
    """Coefficient of variation across the repeats of each ok record, summarised per device."""
    return cat.sql("""
        SELECT device, count(*) AS records,
               median(cv) AS median_cv, quantile_cont(cv, 0.9) AS p90_cv
        FROM (SELECT device, list_stddev_samp(latencies) / list_avg(latencies) AS cv
              FROM records WHERE status = 'ok' AND len(latencies) > 1)
        GROUP BY device ORDER BY device""")


def device_pairs(cat: Catalog, min_programs: int = 8) -> pl.DataFrame:
    """One row per task and pair of devices that measured at least ``min_programs`` of its
    programs both ok: the Spearman correlation of their latencies and the best-program
    transfer (the other device's best latency over the latency there of this device's best
    program; 1: the same program wins on both), averaged over both directions."""
    frame = cat.sql("""
        SELECT a.device AS device_a, b.device AS device_b, a.task_id, any_value(t.op_class)
                 AS op_class,
               list(a.latency ORDER BY a.program_id) AS la,
               list(b.latency ORDER BY a.program_id) AS lb
        FROM records a JOIN records b
          ON a.program_id = b.program_id AND a.device < b.device
        LEFT JOIN (SELECT DISTINCT ON (task_id) task_id, op_class FROM tasks) t
          ON t.task_id = a.task_id
        WHERE a.latency IS NOT NULL AND b.latency IS NOT NULL
        GROUP BY a.device, b.device, a.task_id""")
    rows = []
    for r in frame.iter_rows(named=True):
        if len(r["la"]) >= min_programs:
            la, lb = np.array(r.pop("la")), np.array(r.pop("lb"))
            transfer = (lb.min() / lb[la.argmin()] + la.min() / la[lb.argmin()]) / 2
            rows.append(r | {"spearman": spearman(la, lb), "transfer": transfer})
    schema = {"device_a": pl.Utf8, "device_b": pl.Utf8, "task_id": pl.Utf8, "op_class": pl.Utf8,
              "spearman": pl.Float64, "transfer": pl.Float64}
    return pl.DataFrame(rows, schema=schema).drop_nans("spearman")


def device_rank_correlation(pairs: pl.DataFrame, by: tuple[str, ...] = ()) -> pl.DataFrame:
    """``device_pairs`` summarised per pair of devices (and per ``by`` column, e.g.
    ``("op_class",)``): tasks, median / p10 / p90 Spearman, mean best-program transfer."""
    keys = ["device_a", "device_b", *by]
    return (pairs.group_by(keys)
            .agg(pl.len().cast(pl.Int64).alias("tasks"),
                 pl.col("spearman").median().alias("median"),
                 pl.col("spearman").quantile(0.1).alias("p10"),
                 pl.col("spearman").quantile(0.9).alias("p90"),
                 pl.col("transfer").mean().alias("best_transfer"))
            .sort(keys))


def remeasure_sample(paths: Paths, device_name: str, fraction: float = 0.01,
                     seed: int = 0, min_programs: int = 8) -> pl.DataFrame:
    """Measure ``fraction`` of the device's ok records again, as whole tasks of at least
    ``min_programs`` ok programs (a rank correlation over 2 or 3 programs says little); the
    caller summarises. Returns program_id, task_id, first and second latency."""
    import shutil

    cat = Catalog(paths, in_memory=True)
    try:
        ok = cat.records(device_name, ("program_id", "task_id", "trace_json", "latency")) \
            .filter(pl.col("latency").is_not_null()).join(cat.sql(
                "SELECT DISTINCT ON (task_id) task_id, task_name, op_class, workload_json "
                "FROM tasks"), on="task_id")
    finally:
        cat.close()
    sizes = dict(ok.group_by("task_id").len().iter_rows())
    tasks = sorted(t for t, size in sizes.items() if size >= min_programs)
    random.Random(seed).shuffle(tasks)
    chosen, n = [], 0
    for t in tasks:
        if n >= fraction * len(ok):
            break
        chosen.append(t)
        n += sizes[t]
    sample = ok.filter(pl.col("task_id").is_in(chosen))
    if sample.is_empty():
        return sample.select("program_id", "task_id", "latency").with_columns(
            latency2=pl.lit(None, pl.Float64))
    again = paths.remeasure_root(device_name)
    shutil.rmtree(again.root, ignore_errors=True)  # a fresh second run, not an earlier one
    for t, group in sample.group_by("task_id"):
        rows = group.select("program_id", "task_id", "trace_json").with_columns(
            origin=pl.lit("remeasure"), round=pl.lit(0, pl.Int32),
            requested=pl.lit(len(group), pl.Int32)).cast(CANDIDATE_SCHEMA)
        write_parquet_atomic(rows, again.candidates_file(t[0]))
    task_frame = sample.select("task_id", "task_name", "op_class", "workload_json").unique("task_id")
    device = DeviceRegistry(paths).get(device_name)
    collect(again, device, task_frame, int(sample.group_by("task_id").len()["len"].max()),
            progress=False)
    second = RecordStore(again).read(device_name).with_columns(
        latency2=pl.col("latencies").list.mean()).select("program_id", "latency2")
    return sample.select("program_id", "task_id", "latency").join(second, on="program_id")


def remeasure_correlation(pairs: pl.DataFrame) -> dict:
    """Per-task Spearman of the two runs (median, min) and the median relative change of a
    program's latency."""
    both = pairs.drop_nulls()
    per_task = [spearman(g["latency"].to_numpy(), g["latency2"].to_numpy())
                for _, g in both.group_by("task_id") if len(g) >= 3]
    per_task = [c for c in per_task if c == c]
    change = ((both["latency2"] - both["latency"]).abs() / both["latency"]).to_numpy()
    ratio = (both["latency"] / both["latency2"]).to_numpy()
    return {"programs": len(pairs), "tasks": len(per_task),
            "median_spearman": round(float(np.median(per_task)), 3) if per_task else None,
            "min_spearman": round(float(np.min(per_task)), 3) if per_task else None,
            "median_relative_change": round(float(np.median(change)), 4) if len(change) else None,
            "median_first_over_second": round(float(np.median(ratio)), 3) if len(ratio) else None}


def retired_comparison(cat: Catalog) -> dict:
    """Per device, retired records (``tcl retire``) against the current records of the same
    programs, summarised like the re-measured sample (the retired run is the first)."""
    pairs = cat.sql("""
        SELECT o.device, o.program_id, o.task_id, o.latency, n.latency AS latency2
        FROM retired o JOIN records n USING (record_id)
        WHERE o.latency IS NOT NULL AND n.latency IS NOT NULL""")
    return {dev: remeasure_correlation(g.drop("device"))
            for (dev,), g in pairs.group_by(["device"], maintain_order=True)}


def latency_plot(cat: Catalog, out: Path) -> Path:
    """Histogram of log10 latency (ok records) per device."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    frame = cat.sql("SELECT device, log10(latency) AS l FROM records WHERE latency > 0")
    fig, ax = plt.subplots(figsize=(7, 4))
    for (dev,), g in frame.group_by(["device"], maintain_order=True):
        ax.hist(g["l"].to_numpy(), bins=60, histtype="step", label=dev)
    ax.set_xlabel("log10(latency / s)")
    ax.set_ylabel("programs")
    ax.legend()
    ax.set_title("Measured latency per device (ok records)")
    fig.tight_layout()
    save_figure(fig, out, "data card plot", dpi=110)
    plt.close(fig)
    return out


def build(paths: Paths, out_dir: Path, remeasure: dict | None = None,
          min_programs: int = 8) -> dict:
    """Every table of the card as frames/JSON, plus the latency plot under ``out_dir``;
    device landscapes over tasks with at least ``min_programs`` programs ok on both devices."""
    cat = Catalog(paths, in_memory=True)
    try:
        summary = device_summary(cat)
        hours = busy_hours(cat)
        summary = summary.with_columns(
            pl.col("device").replace_strict(hours, default=None).alias("collect_hours"))
        pairs = device_pairs(cat, min_programs)
        card = {"summary": summary, "noise": repeat_noise(cat),
                "devices": device_rank_correlation(pairs),
                "devices_by_class": device_rank_correlation(pairs, ("op_class",)),
                "retired": retired_comparison(cat),
                "plot": latency_plot(cat, out_dir / "latency-distribution.png")}
    finally:
        cat.close()
    if remeasure:
        card["remeasure"] = remeasure
    return card


def render(card: dict) -> str:
    parts = ["### Per device", markdown_table(card["summary"]),
             "### Measurement noise (coefficient of variation across repeats)",
             markdown_table(card["noise"]),
             "### Device landscapes (per-task Spearman rank correlation of the same programs)",
             markdown_table(card["devices"]),
             "### Device landscapes per operator class", markdown_table(card["devices_by_class"])]
    if "remeasure" in card:
        table = pl.DataFrame([{"device": d, **v} for d, v in card["remeasure"].items()])
        parts += ["### Re-measured sample (a second run of whole tasks, per-task Spearman)",
                  markdown_table(table)]
    if card.get("retired"):
        table = pl.DataFrame([{"device": d, **v} for d, v in card["retired"].items()])
        parts += ["### Retired records against their re-measurement (first: the retired run)",
                  markdown_table(table)]
    return "\n\n".join(parts) + "\n"
