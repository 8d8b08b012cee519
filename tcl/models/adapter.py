"""Any tcl CostModel as a MetaSchedule ``PyCostModel``, so it can drive ``tune_tir``/``tune_relax``.

predict() featurizes the candidates exactly as tcl's feature cache does, from the schedule's
trace alone: PerStoreFeature (per-store rows) and, for models that read them (``reads_tokens``),
``trace_tokens(trace_to_json(sch.trace))``; the candidates form one group (one task) and the
model's higher-is-better scores are returned through ``search_scores``: MetaSchedule's
evolutionary search clamps every score at 0 (``max(0, s)``, as its XGB model predicts normalized
throughput) and samples parents with probability proportional to it, so raw ranking scores
(LambdaRank models score most candidates below 0) would tie at 0 and the search would pick at
random.

update() has two modes:
- "none" (default): the model stays as trained offline (TCL's use: a model distilled for the
  device ranks candidates from the first batch; measured results are not learned during search).
- "refit": measured candidates are labelled per workload (tcl.metrics.labels) and, as
  MetaSchedule's XGBModel does with adaptive training, the model is refit on ``base`` plus
  everything measured whenever the measured set grew by 20% since the last fit, and by at least
  ``refit_min`` candidates (64 by default: a neural fit takes tens of seconds, and refitting
  after every small round would cost more than the search). ``fit`` is the model's own: from
  scratch for XGB; whatever the neural models' fit does for them.

Each candidate is featurized once per run: ``FeatureCache`` keeps its per-store rows and tokens
by program (the task and the trace with its decisions), so a schedule the search scores again
in a later generation or round, and every measured candidate ``update`` sees (it was scored
first), costs a lookup. ``featurize_s`` counts the seconds spent featurizing (misses and
lookups), which ``tcl tune`` reports apart from predicting.
- "residual": the model stays frozen as the prior and a small online XGBoost learns, from every
  measurement of the run, where it is wrong on this network (``tcl.models.residual``): cheap
  enough to redo after every round, unlike "refit". Only the prior is saved.
"""
from __future__ import annotations

import hashlib
import time
from collections import OrderedDict

import numpy as np

from ..config import TclError
from ..metrics import labels
from ..store.traces import trace_to_json
from ..tokens import PER_STORE_WIDTH, TOKEN_WIDTH, trace_tokens
from ..tvm_compat import meta_schedule
from . import load_model
from .base import CostModel, ProgramSet
from .residual import ResidualPrior
from .xgb import XGBModel

ms = meta_schedule()  # before any meta_schedule import: registers tensor intrinsics cheaply

from tvm.ir.utils import derived_object  # noqa: E402

from ..online import run_latency  # noqa: E402

UPDATE_MODES = ("none", "refit", "residual")
_REFIT_GROWTH = 0.2  # MetaSchedule's adaptive training threshold (retrain after +20% data)
_REFIT_MIN = 64      # ... and after at least this many new measurements
# A conv2d candidate's rows and tokens take a few KB: this holds some tens of thousands, far more
# than one network's search scores in a run of a few hundred trials
FEATURE_CACHE_BYTES = 256 << 20


def _offsets(counts) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)


def concat_program_sets(parts: list[ProgramSet]) -> ProgramSet:
    """One ProgramSet from several (groups kept as given; labels required on all or none)."""
    with_labels = all(p.labels is not None for p in parts)
    return ProgramSet(
        np.concatenate([p.program_ids for p in parts]),
        np.concatenate([p.group for p in parts]),
        np.concatenate([p.per_store for p in parts]),
        _offsets(np.concatenate([np.diff(p.store_offsets) for p in parts])),
        np.concatenate([p.tokens for p in parts]),
        _offsets(np.concatenate([np.diff(p.token_offsets) for p in parts])),
        np.concatenate([p.labels for p in parts]) if with_labels else None)


def search_scores(scores) -> np.ndarray:
    """Higher-is-better model scores as MetaSchedule's search needs them: positive and in the
    same order. softplus (log(1 + e^s)) is strictly increasing, positive, ~e^s far below 0 and
    ~s far above (no saturation at the top, where the picks are), and elementwise, so scores of
    different predict calls (the search's heap spans generations) stay comparable. NaN goes
    to 0: last."""
    s = np.asarray(scores, np.float64)
    with np.errstate(invalid="ignore"):   # NaN in, NaN out: mapped to 0 below
        return np.nan_to_num(np.logaddexp(0.0, s), nan=0.0, posinf=np.finfo(np.float64).max)


def task_key(context) -> str:
    """The key that groups a run's measurements by task: the task module's structural hash."""
    import tvm_ffi

    return f"{tvm_ffi.structural_hash(context.mod):016x}"


def reads_tokens(model: CostModel) -> bool:
    """Whether ``model`` reads trace tokens: a neural net says so (``net.needs``), XGB reads
    per-store rows only, an unknown model is given them."""
    if isinstance(model, XGBModel):
        return False
    return "tokens" in getattr(getattr(model, "net", None), "needs", ("tokens",))


def featurize_candidates(context, candidates, extractor=None, group: int = 0,
                         tokens: bool = True) -> ProgramSet:
    """A ProgramSet (one group) of MetaSchedule measure candidates, computed from their traces;
    without ``tokens`` every program has none (a trace's JSON form costs ~5 ms in Python, a
    fifth of featurizing a conv2d candidate, for models that never read it)."""
    extractor = extractor or ms.feature_extractor.PerStoreFeature()
    feats = [np.asarray(f.numpy(), np.float32).reshape(-1, PER_STORE_WIDTH)
             for f in extractor.extract_from(context, candidates)]
    toks = [trace_tokens(trace_to_json(c.sch.trace)) if tokens
            else np.zeros((0, TOKEN_WIDTH), np.float32) for c in candidates]
    n = len(candidates)
    return ProgramSet(
        program_ids=np.arange(n).astype(str), group=np.full(n, group, np.int64),
        per_store=np.concatenate(feats) if feats else np.zeros((0, PER_STORE_WIDTH), np.float32),
        store_offsets=_offsets([len(f) for f in feats]),
        tokens=np.concatenate(toks) if toks else np.zeros((0, TOKEN_WIDTH), np.float32),
        token_offsets=_offsets([len(t) for t in toks]))


class FeatureCache:
    """Featurized candidates by program, least recently used dropped past ``max_bytes``.

    A program is its task (the structural hash of the tuning context's module) and its trace
    printed with every decision (``str(trace)``, about 0.5 ms against ~13 ms of PerStoreFeature
    for a conv2d candidate): one trace replayed on one task gives one scheduled module, so its
    features and tokens are the same. Keys are digests, so a key costs 16 bytes, not the trace."""

    def __init__(self, max_bytes: int = FEATURE_CACHE_BYTES):
        if max_bytes < 0:
            raise TclError(f"feature cache bound must be >= 0 bytes; got {max_bytes}")
        self.max_bytes = max_bytes
        self.bytes = 0
        self.hits = self.misses = self.evicted = 0
        self.miss_s = 0.0   # seconds featurizing the misses: what a hit saves, on average
        self._rows: OrderedDict[bytes, tuple[np.ndarray, np.ndarray]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._rows)

    @staticmethod
    def key(task: str, trace) -> bytes:
        return hashlib.blake2b(f"{task}\n{trace}".encode(), digest_size=16).digest()

    def get(self, key: bytes) -> tuple[np.ndarray, np.ndarray] | None:
        got = self._rows.get(key)
        if got is not None:
            self._rows.move_to_end(key)
        return got

    def put(self, key: bytes, per_store: np.ndarray, tokens: np.ndarray) -> None:
        if key in self._rows:
            return
        self._rows[key] = (per_store, tokens)
        self.bytes += per_store.nbytes + tokens.nbytes
        while self.bytes > self.max_bytes and self._rows:
            _, (p, t) = self._rows.popitem(last=False)
            self.bytes -= p.nbytes + t.nbytes
            self.evicted += 1

    def stats(self) -> dict:
        """Hits, misses, hit rate, the featurizing seconds the hits saved (estimated at the
        misses' mean), entries, bytes held and the bound."""
        looked = self.hits + self.misses
        saved = self.hits * self.miss_s / self.misses if self.misses else 0.0
        return {"hits": self.hits, "misses": self.misses,
                "hit_rate": round(self.hits / looked, 4) if looked else None,
                "saved_s": round(saved, 2), "featurize_misses_s": round(self.miss_s, 2),
                "entries": len(self), "bytes": self.bytes, "max_bytes": self.max_bytes,
                "evicted": self.evicted}


def featurize_cached(context, candidates, cache: FeatureCache, extractor=None,
                     tokens: bool = True) -> ProgramSet:
    """``featurize_candidates`` through ``cache``: only the programs it does not hold are
    featurized (in one batch), and the set is assembled in the candidates' order."""
    task = task_key(context)
    keys = [cache.key(task, c.sch.trace) for c in candidates]
    rows = [cache.get(k) for k in keys]
    todo: dict[bytes, int] = {}   # a program not held -> its first candidate in the batch
    for i, r in enumerate(rows):
        if r is None:
            todo.setdefault(keys[i], i)
    cache.hits += len(keys) - len(todo)   # a repeat within the batch is featurized once too
    cache.misses += len(todo)
    if todo:
        start = time.perf_counter()
        new = featurize_candidates(context, [candidates[i] for i in todo.values()], extractor,
                                   tokens=tokens)
        got = {}
        for j, key in enumerate(todo):
            # copies: a slice would keep the whole batch's array alive in the cache
            got[key] = (new.per_store[new.store_offsets[j]:new.store_offsets[j + 1]].copy(),
                        new.tokens[new.token_offsets[j]:new.token_offsets[j + 1]].copy())
            cache.put(key, *got[key])
        rows = [r if r is not None else got[k] for r, k in zip(rows, keys)]
        cache.miss_s += time.perf_counter() - start
    n = len(candidates)
    return ProgramSet(
        program_ids=np.arange(n).astype(str), group=np.zeros(n, np.int64),
        per_store=np.concatenate([r[0] for r in rows]) if rows else
        np.zeros((0, PER_STORE_WIDTH), np.float32),
        store_offsets=_offsets([len(r[0]) for r in rows]),
        tokens=np.concatenate([r[1] for r in rows]) if rows else
        np.zeros((0, TOKEN_WIDTH), np.float32),
        token_offsets=_offsets([len(r[1]) for r in rows]))


@derived_object
class TclCostModel(ms.cost_model.PyCostModel):
    """Wraps ``model`` (a fitted tcl CostModel) for MetaSchedule search."""

    def __init__(self, model: CostModel, update_mode: str = "none", base: ProgramSet | None = None,
                 refit_min: int = _REFIT_MIN):
        super().__init__()
        if not isinstance(model, CostModel):
            raise TclError(f"TclCostModel needs a tcl CostModel; got {type(model).__name__}")
        if update_mode not in UPDATE_MODES:
            raise TclError(f"update_mode {update_mode!r} is unknown; expected one of {UPDATE_MODES}")
        if base is not None and base.labels is None:
            raise TclError("base programs for refitting need labels")
        if refit_min < 1:
            raise TclError(f"refit_min must be at least 1; got {refit_min}")
        self.model = model
        self.update_mode = update_mode
        self.base = base
        self.refit_min = refit_min
        self.extractor = ms.feature_extractor.PerStoreFeature()
        self.tokens = reads_tokens(model)
        self.cache = FeatureCache()
        self.featurize_s = 0.0   # featurizing, cache lookups included (tcl tune's time split)
        self._measured: dict[str, list[tuple[ProgramSet, np.ndarray]]] = {}
        self._n_measured = 0
        self._n_at_last_fit = 0
        self.residual = ResidualPrior() if update_mode == "residual" else None

    def load(self, path: str) -> None:
        self.model = load_model(path)
        self.tokens = reads_tokens(self.model)
        self.cache = FeatureCache(self.cache.max_bytes)   # held rows may lack the tokens
        if self.residual is not None:   # what it learned corrected the old prior
            self.residual = ResidualPrior()

    def save(self, path: str) -> None:
        self.model.save(path)

    def predict(self, context, candidates) -> np.ndarray:
        if len(candidates) == 0:
            return np.zeros(0, np.float64)
        programs = self._featurize(context, candidates)
        scores = self.model.predict(programs)
        if self.residual is not None:
            scores = self.residual.score(task_key(context), programs, scores)
        return search_scores(scores)

    def update(self, context, candidates, results) -> None:
        if self.update_mode == "none" or len(candidates) == 0:
            return
        programs = self._featurize(context, candidates)
        # a failed run is NaN, label 0, as tcl.online counts it
        latency = np.array([run_latency(r) for r in results])
        if self.residual is not None:
            self.residual.observe(task_key(context), programs, self.model.predict(programs),
                                  latency)
            return
        self._measured.setdefault(task_key(context), []).append((programs, latency))
        self._n_measured += len(candidates)
        grown = self._n_measured - self._n_at_last_fit
        if grown < max(_REFIT_GROWTH * self._n_at_last_fit, self.refit_min):
            return
        self._n_at_last_fit = self._n_measured
        self.model.fit(self._training_set())

    def _featurize(self, context, candidates) -> ProgramSet:
        start = time.perf_counter()
        try:
            return featurize_cached(context, candidates, self.cache, self.extractor,
                                    tokens=self.tokens)
        finally:
            self.featurize_s += time.perf_counter() - start

    def _training_set(self) -> ProgramSet:
        parts = [] if self.base is None else [self.base]
        next_group = 0 if self.base is None else int(self.base.group.max()) + 1
        for g, chunks in enumerate(self._measured.values(), start=next_group):
            ps = concat_program_sets([p for p, _ in chunks])
            secs = np.concatenate([s for _, s in chunks])
            ps.group = np.full(len(ps), g, np.int64)
            ps.labels = labels(secs, ps.group)
            parts.append(ps)
        return concat_program_sets(parts)
