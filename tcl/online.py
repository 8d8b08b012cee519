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
"""
from __future__ import annotations

import numpy as np
import polars as pl

from . import metrics
from .store.msjson import FAILED_RUN_SECS
from .store.records import task_id_of
from .tvm_compat import meta_schedule

ms = meta_schedule()

from tvm.ir.utils import derived_object  # noqa: E402


def run_latency(result) -> float:
    """A runner result's latency (mean of its repeats), NaN when it failed: tcl.metrics counts
    NaN as invalid (label 0)."""
    secs = [float(s) for s in (result.run_secs or [])]
    if result.error_msg is not None or not secs or max(secs) >= FAILED_RUN_SECS:
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

    def load(self, path: str) -> None:
        self.inner.load(path)

    def save(self, path: str) -> None:
        self.inner.save(path)

    def predict(self, context, candidates) -> np.ndarray:
        return np.asarray(self.inner.predict(context, candidates), np.float64)

    def update(self, context, candidates, results) -> None:
        if len(candidates):
            scores = np.asarray(self.inner.predict(context, candidates), np.float64)
            latency = np.array([run_latency(r) for r in results])
            self.rounds.setdefault(task_id_of(context.mod), []).append(
                (context, list(candidates), scores, latency))
        self.inner.update(context, candidates, results)

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
