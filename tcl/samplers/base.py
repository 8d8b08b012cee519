"""The sampler interface: a ``Pool`` of unmeasured candidates, a budget, and ``Sampler.select``.

Like MetaSchedule's search strategies, every sampler is one class behind one small interface;
``select`` does the checks and bookkeeping every sampler shares (budget, ``already``, the
per-task split), so an implementation only ranks candidates.
"""
from __future__ import annotations

import numbers
import warnings
from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import ClassVar, Union

import numpy as np

from ..budget import parse_budget  # noqa: F401  (re-exported: tcl.samplers.parse_budget)
from ..config import TclError
from ..models.base import CostModel, ProgramSet
from .tasks import allocate

# What ``model`` may be: one cost model, an ensemble of them, or nothing.
ModelArg = Union[CostModel, Sequence[CostModel], None]


class SamplerWarning(UserWarning):
    """Something the caller should know about a selection (e.g. the budget was cut to the pool)."""


@dataclass
class Pool:
    """Unmeasured candidates with their features.

    programs: program ids, features (per-store rows, trace tokens) and the task of each program
        (``task_ids`` where set, else ``group``).
    task_weights: zoo weight per task id (how often the networks run it); equal when None.
    scores: optional (n, m) float array of cost-model scores computed elsewhere (m ensemble
        members or passes); uncertainty reads it when ``select`` gets no model.
    first_tasks: task ids served first (deploy-first: the tasks of the networks the device
        will run); in per-task mode the budget is split over them alone, and the other tasks
        share what their candidates cannot take (``tasks.allocate``).
    """

    programs: ProgramSet
    task_weights: Mapping[str, float] | None = None
    scores: np.ndarray | None = None
    first_tasks: Collection[str] | None = None
    program_ids: np.ndarray = field(init=False, repr=False)
    task: np.ndarray = field(init=False, repr=False)        # (n,) task index 0..n_tasks-1
    task_names: np.ndarray = field(init=False, repr=False)  # (n_tasks,) task ids
    weights: np.ndarray = field(init=False, repr=False)     # (n_tasks,) positive floats
    first: np.ndarray | None = field(init=False, repr=False)  # (n_tasks,) bool, or None

    def __post_init__(self) -> None:
        if not isinstance(self.programs, ProgramSet):
            raise TclError(f"a Pool needs a ProgramSet, got {type(self.programs).__name__}")
        n = len(self.programs)
        if n == 0:
            raise TclError("empty pool: no unmeasured candidates to select from "
                           "(sample and featurize candidates first)")
        self.program_ids = np.asarray(self.programs.program_ids).astype(str)
        if len(np.unique(self.program_ids)) != n:
            raise TclError("the pool holds duplicate program ids; expected one row per program")
        keys = self.programs.task_ids if self.programs.task_ids is not None \
            else self.programs.group
        self.task_names, self.task = np.unique(np.asarray(keys).astype(str), return_inverse=True)
        self.weights = self._weights()
        self.first = None
        if self.first_tasks is not None:
            if isinstance(self.first_tasks, str):
                raise TclError("Pool.first_tasks: expected a collection of task ids, not one "
                               "string")
            self.first = np.isin(self.task_names, np.asarray(list(self.first_tasks), str))
        if self.scores is not None:
            s = np.asarray(self.scores, dtype=np.float64)
            self.scores = s[:, None] if s.ndim == 1 else s
            if self.scores.ndim != 2 or len(self.scores) != n or \
                    not np.isfinite(self.scores).all():
                raise TclError(f"Pool.scores must be finite, shaped (n_programs={n}, "
                               f"n_models); got shape {s.shape}")

    def _weights(self) -> np.ndarray:
        if self.task_weights is None:
            return np.ones(len(self.task_names))
        missing = [t for t in self.task_names if t not in self.task_weights]
        if missing:
            raise TclError(f"task_weights lack {len(missing)} of the pool's {len(self.task_names)}"
                           f" tasks (e.g. {missing[0]!r}); expected a weight for every task")
        w = np.array([float(self.task_weights[t]) for t in self.task_names])
        if not (np.isfinite(w).all() and (w > 0).all()):
            raise TclError("task weights must be finite and positive (zoo weights: how often a "
                           "network runs the task)")
        return w

    def __len__(self) -> int:
        return len(self.program_ids)

    @property
    def n_tasks(self) -> int:
        return len(self.task_names)


@dataclass
class Request:
    """One ``select`` call after the shared checks: what an implementation ranks."""

    pool: Pool
    k: int                      # programs to select, <= available
    taken: np.ndarray           # (n,) bool: already measured or selected
    quotas: np.ndarray | None   # (n_tasks,) programs per task (per-task mode), else None
    model: ModelArg
    seed: int


class Sampler(ABC):
    """``select(pool, budget, model, already, seed)`` -> program ids to measure, in order.

    per_task: split the budget over tasks by zoo weight first (at least ``least`` programs for
        every task that gets any: one program teaches a ranking nothing), then select within each
        task; False: one greedy over the whole pool decides the split.
    least: per-task mode's minimum for a task that gets any (more: fewer tasks, more pairs).
    on_note: receives notes about a selection (budget cut to the pool, unknown ``already``
        ids); default: ``warnings.warn(note, SamplerWarning)``.
    """

    name: ClassVar[str]

    def __init__(self, per_task: bool = True,
                 on_note: Callable[[str], None] | None = None, least: int = 2) -> None:
        if isinstance(least, bool) or not isinstance(least, numbers.Integral) or least < 2:
            raise TclError(f"least = {least!r}: expected an int >= 2 (programs per task that "
                           "gets any; one program teaches a ranking nothing)")
        self.per_task, self.least = bool(per_task), int(least)
        self.on_note = on_note or (lambda note: warnings.warn(note, SamplerWarning, 3))

    def select(self, pool: Pool, budget: int | float, model: ModelArg = None,
               already: Iterable[str] | None = None, seed: int = 0) -> list[str]:
        if not isinstance(pool, Pool):
            raise TclError(f"select needs a Pool, got {type(pool).__name__}")
        k = parse_budget(budget, len(pool))
        if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
            raise TclError(f"seed {seed!r}: expected an int >= 0")
        if isinstance(already, str):
            raise TclError("already: expected a collection of program ids, not one string")
        taken = np.zeros(len(pool), bool)
        if already is not None:
            ids = np.unique(np.asarray(list(already)).astype(str))
            taken = np.isin(pool.program_ids, ids)
            if (unknown := len(ids) - int(taken.sum())) > 0:
                self.on_note(f"{unknown} of the {len(ids)} already-measured ids are not in the "
                             "pool: their features are unknown, so diversity cannot count them")
        available = len(pool) - int(taken.sum())
        if k > available:
            self.on_note(f"budget {k} exceeds the {available} selectable candidates (pool "
                         f"{len(pool)}, {len(pool) - available} already taken): selecting all")
            k = available
        if k == 0:
            return []
        quotas = None
        if self.per_task:
            counts = np.bincount(pool.task, minlength=pool.n_tasks)
            have = np.bincount(pool.task[taken], minlength=pool.n_tasks)
            quotas = allocate(k, counts - have, pool.weights, have, seed, pool.first, self.least)
        elif pool.first is not None and pool.first.any():
            raise TclError("deploy-first (Pool.first_tasks) splits the budget per task: use "
                           "the sampler in per-task mode (per_task=True)")
        index = np.asarray(self._select(Request(pool, k, taken, quotas, model, seed)), np.int64)
        if len(index) != k or len(np.unique(index)) != k or taken[index].any():
            raise AssertionError(f"{type(self).__name__} broke the selection contract")
        return pool.program_ids[index].tolist()

    @abstractmethod
    def _select(self, req: Request) -> np.ndarray:
        """Indices into the pool: ``req.k`` distinct, none taken, in selection order; with
        ``req.quotas``, exactly ``quotas[t]`` of task t."""
