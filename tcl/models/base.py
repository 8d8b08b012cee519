"""The cost-model interface: fit / predict / save / load over programs.

A ``ProgramSet`` holds what any model may read about a set of programs (features computed from
the trace alone) plus, for training, labels. Predictions are higher-is-better scores that rank
programs within a task (``group``); they are not comparable across tasks.
"""
from __future__ import annotations

import hashlib
import json
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np

from ..config import TclError
from ..tokens import PER_STORE_WIDTH


@dataclass
class ProgramSet:
    """Programs as ragged feature arrays.

    per_store: float32 (total_stores, 164); store_offsets: int64 (n + 1,) row ranges per program.
    tokens:    float32 (total_tokens, TOKEN_WIDTH); token_offsets: int64 (n + 1,).
    group:     int64 (n,) task index: programs are ranked against others of the same group.
    labels:    float32 (n,) in [0, 1] (min latency in task / latency), or None when unmeasured.
    task_ids / latency: the task id and measured mean latency (s, NaN on error) per program, when
               loaded from the store (evaluation reads them; models do not).
    """

    program_ids: np.ndarray
    group: np.ndarray
    per_store: np.ndarray
    store_offsets: np.ndarray
    tokens: np.ndarray
    token_offsets: np.ndarray
    labels: np.ndarray | None = None
    task_ids: np.ndarray | None = None
    latency: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.program_ids)

    def validate(self, token_width: int) -> "ProgramSet":
        n = len(self)
        if n == 0:
            raise TclError("empty program set: nothing to train on or score "
                           "(check the device and networks selected)")
        if self.per_store.ndim != 2 or self.per_store.shape[1] != PER_STORE_WIDTH:
            raise TclError(f"per-store features have shape {self.per_store.shape}; "
                           f"expected (n_stores, {PER_STORE_WIDTH})")
        if self.tokens.ndim != 2 or self.tokens.shape[1] != token_width:
            raise TclError(f"trace tokens have shape {self.tokens.shape}; "
                           f"expected (n_tokens, {token_width})")
        for name, off, rows in (("store_offsets", self.store_offsets, len(self.per_store)),
                                ("token_offsets", self.token_offsets, len(self.tokens))):
            if len(off) != n + 1 or off[0] != 0 or off[-1] != rows:
                raise TclError(f"{name} do not describe {n} programs over {rows} rows")
        if len(self.group) != n or (self.labels is not None and len(self.labels) != n):
            raise TclError("group/labels length differs from the number of programs")
        return self

    def subset(self, index: np.ndarray) -> "ProgramSet":
        """The programs at ``index`` (in that order), with their ragged rows."""
        index = np.asarray(index, dtype=np.int64)

        def take(rows: np.ndarray, off: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            starts = off[index]
            lengths = off[index + 1] - starts
            new_off = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
            # Row ids of each picked program's range, without a per-program Python loop.
            gather = np.repeat(starts - new_off[:-1], lengths) + np.arange(new_off[-1])
            return rows[gather], new_off

        per_store, store_off = take(self.per_store, self.store_offsets)
        tokens, token_off = take(self.tokens, self.token_offsets)
        pick = lambda a: None if a is None else a[index]  # noqa: E731
        return ProgramSet(self.program_ids[index], self.group[index], per_store, store_off,
                          tokens, token_off, pick(self.labels), pick(self.task_ids),
                          pick(self.latency))


class CostModel(ABC):
    """fit / predict / save / load. Subclasses register a ``kind`` in ``tcl.models.MODEL_KINDS``.

    ``made_for``: the device whose records it was trained on (set by ``tcl.train``), recorded
    in the file, so a copy anywhere still says which device it ranks for."""

    kind: ClassVar[str]
    made_for: str | None = None

    @abstractmethod
    def fit(self, train: ProgramSet, valid: ProgramSet | None = None) -> "CostModel": ...

    @abstractmethod
    def predict(self, programs: ProgramSet) -> np.ndarray:
        """Higher-is-better scores, one per program."""

    @abstractmethod
    def save(self, path: str | Path) -> None: ...

    @classmethod
    @abstractmethod
    def load(cls, path: str | Path) -> "CostModel": ...


def content_digest(doc: dict) -> str:
    """sha256 of a model file's contents (plain values and tensors; dict order aside) but its
    own ``content_hash``: recorded by every save and checked by every load, so a file damaged
    or edited since it was written is refused instead of ranking with other weights."""
    h = hashlib.sha256()

    def walk(v) -> None:
        if isinstance(v, dict):
            h.update(b"{")
            for k in sorted(v, key=str):
                walk(str(k))
                walk(v[k])
            h.update(b"}")
        elif isinstance(v, (list, tuple)):
            h.update(b"[")
            for x in v:
                walk(x)
            h.update(b"]")
        elif isinstance(v, (set, frozenset)):
            walk(sorted(v, key=repr))
        elif hasattr(v, "detach"):   # a tensor (torch stays unimported for the xgb kind)
            t = v.detach().cpu().contiguous()
            h.update(f"<{t.dtype} {tuple(t.shape)}>".encode())
            try:
                h.update(t.numpy().tobytes())
            except TypeError:        # bfloat16 and the like: widened exactly to float32
                h.update(t.float().numpy().tobytes())
        else:
            h.update(json.dumps(v).encode())

    walk({k: v for k, v in doc.items() if k != "content_hash"})
    return h.hexdigest()


def check_content(doc: dict, path: Path) -> None:
    """Refuse the model file ``path`` whose contents ``doc`` do not hash to the
    ``content_hash`` recorded in it (a file of an older tcl records none)."""
    recorded = doc.get("content_hash")
    if recorded is None:
        return
    got = content_digest(doc)
    if got != recorded:
        raise TclError(f"model file {path} is damaged or was changed after it was written: its "
                       f"contents hash to {got[:16]}, not the recorded {str(recorded)[:16]}; "
                       "restore it from a backup or train it again")
