"""Program features computed from the trace alone (so unmeasured candidates can be featurized):
MetaSchedule's per-store features and the trace tokens (their layout: ``tcl.tokens``).

Cached per task in ``features/task=<task_id>.parquet`` keyed by program id.
"""
from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from contextlib import nullcontext
from pathlib import Path

import numpy as np
import polars as pl

from .config import Paths, TclError, read_text, write_json
from .progress import Progress, stderr_line
from .sampling import SAMPLING_TARGET, tune_context
from .store.catalog import Catalog
from .store.records import read_parquet, write_parquet_atomic
from .tokens import PER_STORE_WIDTH, trace_tokens
from .tvm_compat import meta_schedule

# ---------------------------------------------------------------------------------------------
# Feature views: the per-store rows as stored ("raw"), with their counts made relative to the
# program's size ("size"), or both side by side ("both"); a model's ``features`` option.

FEATURE_VIEWS = ("raw", "size", "both")
LOOP_PRODUCT_COLUMN = 161   # slog of the product of a store's loop extents (group 5)


def _size_columns() -> np.ndarray:
    """Columns of a PerStoreFeature row (TVM 0.27 ``per_store_feature.cc``, all slog-scaled)
    that count work or memory traffic of the whole loop nest, so they grow with the task's size:
    group 1's 16 arithmetic-op counts (0-15); per buffer (5 x 18 from 57) bytes, unique bytes,
    lines, unique lines (+3..+6) and the same four divided by the reuse count (+13..+16);
    group 4's allocation x loop product and outer loop product (158, 159); group 5's loop
    product (161). Left alone: one-hot flags, the vectorize / unroll / parallel extents, reuse
    distances and strides, the allocation's own size (compared with the hardware: vector width,
    cores, caches), the arithmetic-intensity curve (a ratio) and loop counts."""
    per_buffer = [57 + 18 * b + k for b in range(5) for k in (3, 4, 5, 6, 13, 14, 15, 16)]
    return np.asarray(list(range(16)) + per_buffer + [158, 159, LOOP_PRODUCT_COLUMN], np.int64)


SIZE_COLUMNS = _size_columns()


def program_sizes(per_store: np.ndarray, store_offsets: np.ndarray,
                  index: np.ndarray | None = None) -> np.ndarray:
    """float32 (n,): the slog of the largest loop product among each program's stores (of the
    programs at ``index``; all by default), 0 for a program without stores. This is the size
    ``size_normalised`` divides by: the iteration space of the task's main computation (for a
    dense or conv task its multiply-adds, about FLOPs / 2), the same for every program of most
    tasks (docs/results.md, size-normalised features), read from the rows themselves, so any
    caller's programs (tuning candidates too) get it without a task table."""
    offsets = np.asarray(store_offsets, np.int64)
    index = np.arange(len(offsets) - 1) if index is None else np.asarray(index, np.int64)
    starts, counts = offsets[index], offsets[index + 1] - offsets[index]
    out = np.zeros(len(index), np.float32)
    have = counts > 0
    if not have.any():
        return out
    first = np.cumsum(counts) - counts                 # where each program's rows start below
    rows = np.repeat(starts - first, counts) + np.arange(int(counts.sum()))
    column = np.asarray(per_store, np.float32)[rows, LOOP_PRODUCT_COLUMN]
    out[have] = np.maximum.reduceat(column, first[have])
    return out


def view_rows(rows: np.ndarray, sizes: np.ndarray, view: str) -> np.ndarray:
    """Per-store ``rows`` in a feature view, ``sizes`` (``program_sizes``) of each row's
    program: raw (as stored, 164 columns), size (each ``SIZE_COLUMNS`` value minus its
    program's size: log2((1 + x) / (1 + S)) in the slog scale, 164) or both (raw then the
    normalised ``SIZE_COLUMNS``, 223)."""
    if view == "raw":
        return rows
    if view not in FEATURE_VIEWS:
        raise TclError(f"features {view!r} is unknown; expected one of {list(FEATURE_VIEWS)}")
    rows = np.asarray(rows, np.float32)
    counts = rows[:, SIZE_COLUMNS] - np.asarray(sizes, np.float32)[:, None]
    if view == "both":
        return np.hstack([rows, counts])
    out = rows.copy()
    out[:, SIZE_COLUMNS] = counts
    return out


def feature_view(per_store: np.ndarray, store_offsets: np.ndarray, view: str) -> np.ndarray:
    """Every row of a program set (``store_offsets``: row ranges per program) in ``view``."""
    if view == "raw":
        return per_store
    owner = np.repeat(np.arange(len(store_offsets) - 1), np.diff(store_offsets))
    return view_rows(per_store, program_sizes(per_store, store_offsets)[owner], view)


def size_normalised(per_store: np.ndarray, store_offsets: np.ndarray) -> np.ndarray:
    """The "size" view: each count-like value relative to its program's size."""
    return feature_view(per_store, store_offsets, "size")


def view_width(view: str) -> int:
    """Columns per store row of a feature view."""
    return PER_STORE_WIDTH + len(SIZE_COLUMNS) if view == "both" else PER_STORE_WIDTH


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


_FEATURES_FIX = "delete it; `tcl featurize` computes it again"


def _read(f: Path) -> pl.DataFrame:
    """A task's cached features; a corrupt file is named (it is a cache: deleting it is safe).
    Every model kind reads its features through here, so this is where NaN or infinite values
    are refused: XGBoost trained on them without a word, the neural kinds refused them without
    naming the file."""
    frame = read_parquet(f, "features file", _FEATURES_FIX, schema=FEATURE_SCHEMA)
    finite = pl.all_horizontal(
        pl.col(c).list.eval(pl.element().is_finite().fill_null(False)).list.all()
        for c in ("per_store", "tokens"))
    bad = frame.filter(~finite)["program_id"]
    if len(bad):
        raise TclError(f"features file {f} holds NaN or infinite values ({len(bad)} of "
                       f"{len(frame)} programs, e.g. {bad[0]}); {_FEATURES_FIX}")
    return frame


def featurize_task(paths: Paths, task_id: str, workload_json: str,
                   programs: pl.DataFrame) -> int:
    """Cache features of ``programs`` (program_id, trace_json) not yet cached; returns how many."""
    f = paths.features_file(task_id)
    # the ids alone say what is new: most runs find nothing to add, at a column's cost
    ids = read_parquet(f, "features file", _FEATURES_FIX, columns=["program_id"]) \
        if f.exists() else pl.DataFrame(schema={"program_id": pl.Utf8})
    todo = programs.unique("program_id", maintain_order=True).filter(
        ~pl.col("program_id").is_in(ids["program_id"].implode()))
    if todo.is_empty():
        return 0
    have = _read(f) if f.exists() else pl.DataFrame(schema=FEATURE_SCHEMA)
    new = program_features(task_id, workload_json, todo)

    write_parquet_atomic(pl.concat([have, new]), f, "features file")
    return len(new)


# The featurizer's version: bump it whenever what ``program_features`` computes changes (another
# TVM feature extractor, a token layout, a column). tests/test_features.py pins the features of
# fixed programs, so a change without a bump fails there. Cached features of another version or
# TVM release are computed again, never mixed with new ones; those of this version are shipped
# with the records (data/features is committed), so a fresh clone computes none of them.
FEATURES_VERSION = 1


def features_version() -> dict:
    """What computed a features file: ``FEATURES_VERSION`` and the TVM release."""
    import tvm

    return {"features": FEATURES_VERSION, "tvm": tvm.__version__}


def current_features(paths: Paths, say: Callable[[str], None] = lambda _msg: None) -> bool:
    """Make the features cache this featurizer's: cached files of another version (or of an
    unknown one: no version file beside them) are removed, to be computed again. Returns whether
    they were kept."""
    want, f = features_version(), paths.features_version_file
    have = json.loads(read_text(f, "features version file")) if f.exists() else None
    stale = [] if have == want else sorted(paths.features_dir.glob("task=*.parquet"))
    for old in stale:
        old.unlink()
    if stale:
        say(f"featurize: the {len(stale)} cached feature files are of featurizer {have} "
            f"(now {want}): computing them again")
    if have != want:
        write_json(f, want, "features version file")
    return not stale


def featurize(paths: Paths, task_ids: Iterable[str] | None = None, progress: bool = True,
              workers: int = 1, report: Callable[[str], None] | None = None) -> int:
    """Features for every known program (candidates and measured) of the tasks; incremental.
    ``workers`` > 1: the tasks are shared among that many processes (TVM's feature extraction
    runs on one core; each task's cache file is written by one process only)."""
    import concurrent.futures as cf
    import multiprocessing

    from tqdm import tqdm

    current_features(paths, say=report or stderr_line)
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
    # a line every EVERY_S seconds wherever no bar shows (a flow run, a log file, CI)
    lines = Progress("featurize", sum(len(j[2]) for j in jobs), report=report) \
        if report is not None or not progress else nullcontext()
    total = 0
    with bar, lines:
        def done(n_programs: int) -> None:
            bar.update()
            if isinstance(lines, Progress):
                lines.advance(n_programs)

        if workers <= 1 or len(jobs) <= 1:
            for job in jobs:
                total += featurize_task(paths, *job)
                done(len(job[2]))
            return total
        with cf.ProcessPoolExecutor(min(workers, len(jobs)),
                                    mp_context=multiprocessing.get_context("spawn")) as pool:
            for job, n in zip(jobs, pool.map(featurize_task, [paths] * len(jobs), *zip(*jobs),
                                             chunksize=4)):
                total += n
                done(len(job[2]))
    return total


def load_features(paths: Paths, task_ids: Iterable[str]) -> pl.DataFrame:
    files = [paths.features_file(t) for t in task_ids]
    missing = [str(f) for f in files if not f.exists()]
    if missing:
        raise TclError(f"features not computed for {len(missing)} task(s), e.g. {missing[0]}: "
                       "run `tcl featurize` first")
    return pl.concat([_read(f) for f in files]) if files else \
        pl.DataFrame(schema=FEATURE_SCHEMA)
