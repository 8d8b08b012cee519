"""Which sampler chose which program, in which round: ``selections/device=<d>/run=<r>/round=<n>.parquet``.

A selection is written once, before any of it is measured, so an interrupted active collection
measures the same programs when run again instead of selecting anew. The catalog's
``selections`` view joins records on (device, program_id).
"""
from __future__ import annotations

from pathlib import Path

import polars as pl

from ..config import Paths, TclError
from .records import now_utc, safe_component, write_parquet_atomic

SELECTION_SCHEMA: dict[str, pl.DataType] = {
    "device": pl.Utf8, "run": pl.Utf8, "round": pl.Int32, "rank": pl.Int32,
    "program_id": pl.Utf8, "task_id": pl.Utf8, "sampler": pl.Utf8, "model": pl.Utf8,
    "selected_at": pl.Datetime("us", "UTC"),
}


class SelectionStore:
    def __init__(self, paths: Paths):
        self.paths = paths

    @property
    def root(self) -> Path:
        return self.paths.selections_dir

    def file(self, device: str, run: str, round_: int) -> Path:
        return (self.root / f"device={safe_component(device, 'device name')}"
                / f"run={safe_component(run, 'selection run')}" / f"round={int(round_)}.parquet")

    def files(self) -> list[Path]:
        return sorted(self.root.rglob("round=*.parquet")) if self.root.exists() else []

    def of_device(self, device: str) -> pl.DataFrame:
        """program_id, task_id of everything ever selected for ``device`` (every run and
        round), once each."""
        name = f"device={safe_component(device, 'device name')}"
        frames = [self._read(f).select("program_id", "task_id") for f in self.files()
                  if f.parent.parent.name == name]
        empty = pl.DataFrame(schema={"program_id": pl.Utf8, "task_id": pl.Utf8})
        return pl.concat([empty, *frames]).unique(maintain_order=True)

    def read(self, device: str, run: str, round_: int) -> pl.DataFrame | None:
        f = self.file(device, run, round_)
        return self._read(f) if f.exists() else None

    @staticmethod
    def _read(f: Path) -> pl.DataFrame:
        try:
            return pl.read_parquet(f)
        except Exception as e:
            raise TclError(f"selection file {f} is unreadable ({str(e).splitlines()[0]}); "
                           "move it away to select that round again") from None

    def write(self, device: str, run: str, round_: int, program_ids: list[str],
              task_ids: list[str], sampler: str, model: str) -> Path:
        f = self.file(device, run, round_)
        if f.exists():
            raise TclError(f"{f} already holds round {round_} of selection run {run}")
        now = now_utc()
        frame = pl.DataFrame({
            "device": [device] * len(program_ids), "run": [run] * len(program_ids),
            "round": [round_] * len(program_ids), "rank": list(range(len(program_ids))),
            "program_id": program_ids, "task_id": task_ids,
            "sampler": [sampler] * len(program_ids), "model": [model] * len(program_ids),
            "selected_at": [now] * len(program_ids)}, schema=SELECTION_SCHEMA)
        return write_parquet_atomic(frame, f, "selection file")
