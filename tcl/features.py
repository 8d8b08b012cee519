"""Program features computed from the trace alone (so unmeasured candidates can be featurized):
MetaSchedule's per-store features and the trace tokens (their layout: ``tcl.tokens``).

Cached per task in ``features/task=<task_id>.parquet`` keyed by program id.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Iterable

import numpy as np
import polars as pl

from .config import Paths, TclError
from .sampling import SAMPLING_TARGET, tune_context
from .store.catalog import Catalog
from .store.records import read_parquet, write_parquet_atomic
from .tokens import PER_STORE_WIDTH, trace_tokens
from .tvm_compat import meta_schedule

FEATURE_SCHEMA = {"program_id": pl.Utf8, "task_id": pl.Utf8, "n_stores": pl.Int32,
                  "per_store": pl.List(pl.Float32), "n_tokens": pl.Int32,
                  "tokens": pl.List(pl.Float32)}



def per_store_features(mod, trace_jsons: list[str]) -> list[np.ndarray]:
    """PerStoreFeature matrices (n_stores, 164) of programs given by their traces."""
    from tvm import s_tir

    ms = meta_schedule()
    ctx = tune_context(mod, SAMPLING_TARGET)
    args = ms.arg_info.ArgInfo.from_prim_func(mod["main"])
    cands = []
    for t in trace_jsons:
        sch = s_tir.Schedule(mod)
        s_tir.schedule.Trace.apply_json_to_schedule(json.loads(t), sch)
        cands.append(ms.MeasureCandidate(sch, args))
    feats = ms.feature_extractor.PerStoreFeature().extract_from(ctx, cands)
    out = [f.numpy().astype(np.float32) for f in feats]
    for f in out:
        if f.ndim != 2 or f.shape[1] != PER_STORE_WIDTH:
            raise TclError(f"PerStoreFeature gave shape {f.shape}; expected (n, {PER_STORE_WIDTH})")
    return out


def program_features(task_id: str, workload_json: str, programs: pl.DataFrame) -> pl.DataFrame:
    """FEATURE_SCHEMA rows of ``programs`` (program_id, trace_json) of one task, uncached."""
    import tvm

    mod = tvm.ir.load_json(workload_json)
    stores = per_store_features(mod, programs["trace_json"].to_list())
    tokens = [trace_tokens(t) for t in programs["trace_json"]]
    return pl.DataFrame({
        "program_id": programs["program_id"], "task_id": [task_id] * len(programs),
        "n_stores": [len(s) for s in stores], "per_store": [s.ravel() for s in stores],
        "n_tokens": [len(t) for t in tokens], "tokens": [t.ravel() for t in tokens],
    }, schema=FEATURE_SCHEMA)


def _read(f: Path) -> pl.DataFrame:
    """A task's cached features; a corrupt file is named (it is a cache: deleting it is safe)."""
    return read_parquet(f, "features file", "delete it; `tcl featurize` computes it again")


def featurize_task(paths: Paths, task_id: str, workload_json: str,
                   programs: pl.DataFrame) -> int:
    """Cache features of ``programs`` (program_id, trace_json) not yet cached; returns how many."""
    f = paths.features_file(task_id)
    have = _read(f) if f.exists() else pl.DataFrame(schema=FEATURE_SCHEMA)
    todo = programs.unique("program_id", maintain_order=True).filter(
        ~pl.col("program_id").is_in(have["program_id"].implode()))
    if todo.is_empty():
        return 0
    new = program_features(task_id, workload_json, todo)

    write_parquet_atomic(pl.concat([have, new]), f)
    return len(new)


def featurize(paths: Paths, task_ids: Iterable[str] | None = None, progress: bool = True,
              workers: int = 1) -> int:
    """Features for every known program (candidates and measured) of the tasks; incremental.
    ``workers`` > 1: the tasks are shared among that many processes (TVM's feature extraction
    runs on one core; each task's cache file is written by one process only)."""
    import concurrent.futures as cf
    import multiprocessing

    from tqdm import tqdm

    cat = Catalog(paths, in_memory=True)
    try:
        frame = cat.sql("""
            SELECT p.task_id, t.workload_json, p.program_id, p.trace_json FROM (
              SELECT task_id, program_id, trace_json FROM programs
              UNION SELECT task_id, program_id, trace_json FROM records) p
            JOIN tasks t USING (task_id) ORDER BY p.task_id""")
    finally:
        cat.close()
    if task_ids is not None:
        frame = frame.filter(pl.col("task_id").is_in(list(task_ids)))
    jobs = [(task_id, group["workload_json"][0], group.select("program_id", "trace_json"))
            for (task_id,), group in frame.group_by(["task_id"], maintain_order=True)]
    bar = tqdm(total=len(jobs), desc="featurize", unit="task", disable=not progress)
    total = 0
    with bar:
        if workers <= 1 or len(jobs) <= 1:
            for job in jobs:
                total += featurize_task(paths, *job)
                bar.update()
            return total
        with cf.ProcessPoolExecutor(min(workers, len(jobs)),
                                    mp_context=multiprocessing.get_context("spawn")) as pool:
            for n in pool.map(featurize_task, [paths] * len(jobs), *zip(*jobs), chunksize=4):
                total += n
                bar.update()
    return total


def load_features(paths: Paths, task_ids: Iterable[str]) -> pl.DataFrame:
    files = [paths.features_file(t) for t in task_ids]
    missing = [str(f) for f in files if not f.exists()]
    if missing:
        raise TclError(f"features not computed for {len(missing)} task(s), e.g. {missing[0]}: "
                       "run `tcl featurize` first")
    return pl.concat([_read(f) for f in files]) if files else \
        pl.DataFrame(schema=FEATURE_SCHEMA)
