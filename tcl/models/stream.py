"""Training batches streamed from Parquet, so memory stays bounded whatever the dataset size.

A stream file has one row per program: ``group`` (int64; or a ``task``/``task_id`` string),
``label`` (float32), ``n_stores``, ``per_store`` (list<float32>, row-major n_stores x 164),
``n_tokens``, ``tokens`` (list<float32>, row-major n_tokens x TOKEN_WIDTH). Rows are sorted by
group when written, so a group's programs are contiguous and a batch can keep whole groups
together (LambdaRank compares programs within a group); a group larger than the batch is split.
"""
from __future__ import annotations

import random
from pathlib import Path
from typing import Iterable, Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ..config import TclError
from ..tokens import TOKEN_WIDTH
from .base import PER_STORE_WIDTH, ProgramSet
from .nn import group_batches

STREAM_SCHEMA = pa.schema([("group", pa.int64()), ("label", pa.float32()),
                           ("n_stores", pa.int32()), ("per_store", pa.list_(pa.float32())),
                           ("n_tokens", pa.int32()), ("tokens", pa.list_(pa.float32()))])
GROUP_COLUMNS = ("group", "task", "task_id")


def to_table(ps: ProgramSet) -> pa.Table:
    """A ProgramSet (with labels) as a stream table, sorted by group."""
    if ps.labels is None:
        raise TclError("stream rows need labels")
    order = np.argsort(ps.group, kind="stable")
    if not np.array_equal(order, np.arange(len(ps))):
        ps = ps.subset(order)

    def lists(rows: np.ndarray, offsets: np.ndarray) -> pa.ListArray:
        if offsets[-1] * rows.shape[1] >= 2**31:
            raise TclError("a stream chunk over 2**31 values: write it in smaller chunks")
        flat = pa.array(rows.reshape(-1), pa.float32())
        return pa.ListArray.from_arrays(pa.array(offsets * rows.shape[1], pa.int32()), flat)
    return pa.Table.from_arrays(
        [pa.array(ps.group, pa.int64()), pa.array(ps.labels, pa.float32()),
         pa.array(np.diff(ps.store_offsets), pa.int32()), lists(ps.per_store, ps.store_offsets),
         pa.array(np.diff(ps.token_offsets), pa.int32()), lists(ps.tokens, ps.token_offsets)],
        schema=STREAM_SCHEMA)


def write_parquet(path: str | Path, chunks: Iterable[ProgramSet], compression: str = "zstd",
                  row_group_size: int = 8192) -> int:
    """Write program sets (each sorted by group on its own; give chunks in group order) to one
    Parquet file. Small row groups keep readers' memory small. Returns the number of rows."""
    rows = 0
    with pq.ParquetWriter(str(path), STREAM_SCHEMA, compression=compression,
                          use_dictionary=["group"]) as writer:
        for ps in chunks:
            writer.write_table(to_table(ps), row_group_size=row_group_size)
            rows += len(ps)
    return rows


def _flat(column: pa.Array, counts: np.ndarray, width: int, name: str) -> np.ndarray:
    values = column.flatten().to_numpy(zero_copy_only=False)   # respects slicing
    if len(values) != int(counts.sum()) * width:
        raise TclError(f"stream column {name} holds {len(values)} values; n_{name.split('_')[-1]} "
                       f"says {int(counts.sum())} rows of {width}")
    return values.reshape(-1, width)


def _concat(sets: Sequence[ProgramSet]) -> ProgramSet:
    if len(sets) == 1:
        return sets[0]

    def offsets(offs: list[np.ndarray]) -> np.ndarray:
        base = np.cumsum([0] + [o[-1] for o in offs[:-1]])
        return np.concatenate([[0]] + [o[1:] + b for o, b in zip(offs, base)]).astype(np.int64)
    cat = np.concatenate
    return ProgramSet(cat([s.program_ids for s in sets]), cat([s.group for s in sets]),
                      cat([s.per_store for s in sets]), offsets([s.store_offsets for s in sets]),
                      cat([s.tokens for s in sets]), offsets([s.token_offsets for s in sets]),
                      cat([s.labels for s in sets]))


class ParquetStream:
    """Re-iterable stream of labelled ``ProgramSet`` batches (about ``batch_size`` programs,
    whole groups) over Parquet files, read ``read_rows`` rows at a time with ``iter_batches``.
    ``shuffle_buffer`` > 0 yields batches in random order from a window of that many."""

    def __init__(self, paths: str | Path | Sequence[str | Path], batch_size: int = 512,
                 read_rows: int = 2048, shuffle_buffer: int = 0, seed: int = 0) -> None:
        self.paths = [Path(p) for p in ([paths] if isinstance(paths, (str, Path)) else paths)]
        missing = [str(p) for p in self.paths if not p.exists()]
        if not self.paths or missing:
            raise TclError(f"stream files not found: {missing or 'none given'}")
        self.batch_size, self.read_rows = batch_size, read_rows
        self.shuffle_buffer, self.rng = shuffle_buffer, random.Random(seed)
        self._task_ids: dict[str, int] = {}

    def __iter__(self) -> Iterator[ProgramSet]:
        if self.shuffle_buffer <= 0:
            yield from self._batches()
            return
        window: list[ProgramSet] = []
        for ps in self._batches():
            window.append(ps)
            if len(window) >= self.shuffle_buffer:
                yield window.pop(self.rng.randrange(len(window)))
        self.rng.shuffle(window)
        yield from window

    def _batches(self) -> Iterator[ProgramSet]:
        pending: list[ProgramSet] = []     # the last, possibly unfinished, group so far
        for path in self.paths:
            for chunk in self._chunks(path):
                ps = _concat(pending + [chunk])
                last = np.flatnonzero(ps.group != ps.group[-1])
                keep = int(last[-1]) + 1 if len(last) else 0
                if keep == 0 and len(ps) < self.batch_size:
                    pending = [ps]         # one group so far: wait for the rest of it
                    continue
                keep = keep or len(ps)
                for index in group_batches(ps.group[:keep], self.batch_size):
                    yield ps.subset(index) if len(index) < len(ps) else ps
                pending = [ps.subset(np.arange(keep, len(ps)))] if keep < len(ps) else []
        if pending:
            tail = _concat(pending)
            for index in group_batches(tail.group, self.batch_size):
                yield tail.subset(index)

    def _chunks(self, path: Path) -> Iterator[ProgramSet]:
        try:
            # pre_buffer=False: with pre-buffering, iter_batches keeps every row group it read
            file = pq.ParquetFile(str(path), pre_buffer=False)
        except (OSError, pa.ArrowInvalid) as e:
            raise TclError(f"stream file {path} is not readable Parquet: {e}") from None
        names = set(file.schema_arrow.names)
        group_col = next((c for c in GROUP_COLUMNS if c in names), None)
        need = {"label", "n_stores", "per_store", "n_tokens", "tokens"}
        if group_col is None or not need <= names:
            raise TclError(f"stream file {path} lacks columns "
                           f"{sorted(need - names) + ([] if group_col else ['group'])}")
        columns = [group_col, *sorted(need)]
        for batch in file.iter_batches(batch_size=self.read_rows, columns=columns):
            col = dict(zip(columns, batch.columns))
            n_stores = col["n_stores"].to_numpy(zero_copy_only=False).astype(np.int64)
            n_tokens = col["n_tokens"].to_numpy(zero_copy_only=False).astype(np.int64)
            group = col[group_col]
            if pa.types.is_integer(group.type):
                group = group.to_numpy(zero_copy_only=False).astype(np.int64)
            else:  # task ids: number them in order of first appearance, stable across epochs
                group = np.array([self._task_ids.setdefault(t, len(self._task_ids))
                                  for t in group.to_pylist()], np.int64)
            zero = np.zeros(1, np.int64)
            yield ProgramSet(np.arange(len(group)), group,
                             _flat(col["per_store"], n_stores, PER_STORE_WIDTH, "per_store"),
                             np.concatenate([zero, np.cumsum(n_stores)]),
                             _flat(col["tokens"], n_tokens, TOKEN_WIDTH, "tokens"),
                             np.concatenate([zero, np.cumsum(n_tokens)]),
                             col["label"].to_numpy(zero_copy_only=False).astype(np.float32))
