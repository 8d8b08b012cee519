"""Online ranking quality: how well a cost model ranked the candidates its own search measured.

``ScoredCostModel`` wraps the cost model a tuning run searches with (a tcl model through the
adapter, or MetaSchedule's XGBoost or random model) and keeps, per task, what each round
measured (the candidates that built: MetaSchedule's ``UpdateCostModel`` passes on only those;
a failed run counts as invalid, label 0, as offline). Two scorings of those candidates, both
through the wrapped model's own ``predict`` (so on exactly the features the search used):

- ``as_used``: each round's candidates scored, right after they were measured and before the
  model learns from them, by the model that ranked them. For a frozen model that is the model;
  for one that learns online (``--update refit``, ``xgb-online``) candidates of different
  rounds of one task were scored by different fits.
- ``final``: every measured candidate of a task scored by the model as it stands after tuning
  (a frozen model: the same model; a refit one: its last fit).

``quality`` gives both as pairwise accuracy and top-1, per task and weighted like the network
(``tcl.metrics``'s definitions, as ``tcl score`` reports offline).

It also times the model for ``tcl tune``'s time split (``seconds``): featurizing (the tcl
adapter's own count, or MetaSchedule's feature extractor timed), predicting and updating, each
without the featurizing inside it; and counts the search's predict calls and the candidates they
scored (the search scores a generation's population in one call).
"""
from __future__ import annotations

import time

import numpy as np
import polars as pl

from . import metrics
from .store.records import task_id_of
from .tvm_compat import FAILED_RUN_SECS, meta_schedule

ms = meta_schedule()

from tvm.ir.utils import derived_object  # noqa: E402


def run_latency(result) -> float:
    """A runner result's (or a database's tuning record's) latency, the mean of its repeats;
    NaN when it failed: tcl.metrics counts NaN as invalid (label 0)."""
    secs = [float(s) for s in (result.run_secs or [])]
    if getattr(result, "error_msg", None) is not None or not secs or \
            max(secs) >= FAILED_RUN_SECS:
        return float("nan")
    return float(np.mean(secs))


@derived_object
class ScoredCostModel(ms.cost_model.PyCostModel):
    """Delegates to ``inner`` (any MetaSchedule cost model) and records how it ranked what was
    measured (see the module docstring)."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner
        # task id -> [(context, candidates, scores as used, latencies)] per round
        self.rounds: dict[str, list[tuple]] = {}
        self.predict_s = self.update_s = 0.0   # without the featurizing inside them
        self.predict_calls = self.scored = 0   # the search's own calls
        # What counts featurizing seconds: the tcl adapter itself; MetaSchedule's XGBoost
        # through its extractor, timed here; the random model reads no features.
        self._featurizer = inner if hasattr(inner, "featurize_s") else None
        if self._featurizer is None and getattr(inner, "extractor", None) is not None:
            inner.extractor = self._featurizer = _timed_extractor(inner.extractor)

    @property
    def featurize_s(self) -> float:
        return float(getattr(self._featurizer, "featurize_s", 0.0))

    def _timed(self, fn, *args):
        """(fn's result, its seconds without the featurizing inside it)."""
        start, featurized = time.perf_counter(), self.featurize_s
        out = fn(*args)
        return out, time.perf_counter() - start - (self.featurize_s - featurized)

    def load(self, path: str) -> None:
        self.inner.load(path)

    def save(self, path: str) -> None:
        self.inner.save(path)

    def _inner_predict(self, context, candidates):
        try:
            return self.inner.predict(context, candidates)
        except TypeError:
            # MetaSchedule's XGBModel (TVM 0.27) cannot score a batch in which no candidate has
            # a block to featurize (an unfused task that is all copies: `tcl tune --no-fuse`):
            # its pack-sum ids of an empty batch are float64, which np.bincount refuses. To any
            # model such programs are alike: equal scores.
            extractor = getattr(self.inner, "extractor", None)
            if extractor is None or any(f.numpy().shape[0] for f in
                                        extractor.extract_from(context, candidates)):
                raise
            return np.zeros(len(candidates))

    def predict(self, context, candidates) -> np.ndarray:
        scores, secs = self._timed(self._inner_predict, context, candidates)
        self.predict_s += secs
        self.predict_calls += 1
        self.scored += len(candidates)
        return np.asarray(scores, np.float64)

    def update(self, context, candidates, results) -> None:
        if len(candidates):
            scores, secs = self._timed(self._inner_predict, context, candidates)
            self.predict_s += secs
            latency = np.array([run_latency(r) for r in results])
            self.rounds.setdefault(task_id_of(context.mod), []).append(
                (context, list(candidates), np.asarray(scores, np.float64), latency))
        self.update_s += self._timed(self.inner.update, context, candidates, results)[1]

    def seconds(self) -> dict[str, float]:
        """Seconds spent featurizing, predicting and updating so far (disjoint)."""
        return {"featurize": self.featurize_s, "predict": self.predict_s,
                "update": self.update_s}

    def quality(self, weights: dict[str, float]) -> dict:
        """``{"as_used": ..., "final": ...}``, each ``{"pairwise", "top1", "tasks",
        "candidates", "per_task": {task id: {"pairwise", "top1", "n"}}}``; ``weights`` maps
        each task id of the network to its weight."""
        if not self.rounds:
            return {}
        task_ids, latency, used, final = [], [], [], []
        for tid, rounds in self.rounds.items():
            context = rounds[0][0]
            candidates = [c for r in rounds for c in r[1]]
            task_ids += [tid] * len(candidates)
            latency.append(np.concatenate([r[3] for r in rounds]))
            used.append(np.concatenate([r[2] for r in rounds]))
            final.append(np.asarray(self.inner.predict(context, candidates), np.float64))
        task_ids, latency = np.array(task_ids), np.concatenate(latency)
        network = pl.DataFrame({"network_key": "tuned", "task_id": list(weights),
                                "weight": [float(w) for w in weights.values()]})
        return {name: _ranking(np.concatenate(scores), latency, task_ids, network)
                for name, scores in (("as_used", used), ("final", final))}


def _timed_extractor(inner):
    """A MetaSchedule feature extractor that delegates to ``inner`` and counts its seconds in
    ``featurize_s``."""

    @derived_object
    class TimedExtractor(ms.feature_extractor.PyFeatureExtractor):
        def __init__(self):
            super().__init__()
            self.featurize_s = 0.0

        def extract_from(self, context, candidates):
            start = time.perf_counter()
            try:
                return inner.extract_from(context, candidates)
            finally:
                self.featurize_s += time.perf_counter() - start

    return TimedExtractor()


def _ranking(scores, latency, task_ids, network: pl.DataFrame) -> dict:
    per_task = metrics.task_metrics(scores, latency, task_ids, (1,))
    net = metrics.network_metrics(per_task, network, (1,)).row(0, named=True)
    tasks = metrics.task_scores(per_task, (1,))

    def r(x):
        return None if x is None or x != x else round(float(x), 4)

    return {"pairwise": r(net["pairwise"]), "top1": r(net["top1"]), "tasks": net["n_tasks"],
            "candidates": int(len(scores)),
            "per_task": {t["task_id"]: {"pairwise": r(t["pairwise"]), "top1": r(t["top1"]),
                                        "n": int(t["n_programs"])}
                         for t in tasks.iter_rows(named=True)}}
