"""A frozen cost model kept as the prior, plus a small online XGBoost on what the search measures
(the adapter's ``update_mode="residual"``): TenSet's transfer trick, made to work for a prior
whose scores rank but are not on the label's scale.

Per task (one MetaSchedule tuning task), the measured candidates get tcl's labels (per-task
normalised throughput, ``tcl.metrics.labels``: best latency measured so far / latency, a failed
run 0). The prior's score ``p`` is mapped to that scale by one affine map per task,
``b_t + s * p``: the slope ``s`` is pooled over every measured task (least squares on the
within-task centred scores and labels, clipped at 0 so a wrong prior is flattened, not
inverted, from a few noisy measurements) and ``b_t`` makes the task's mean right. An XGBoost
regressor ``g`` (a few dozen shallow trees, refit from scratch on all of the run's measurements
after every update: cheap next to one round's builds) learns the residual
``label - (b_t + s * p)`` from the program's per-store feature rows summed (the rows the prior
and MetaSchedule's XGBoost read).

Until the run has ``min_measured`` measurements the prior alone ranks (its raw scores). From then
on every task is scored ``b_t + s * p + g(x)``, measured or not: tcl's tuner gives every task its
first round before any task gets a second, so at 64 trials a task most tasks are searched only
once, and what the residual model learned on the tasks measured before (how the prior is wrong
on this device and network) is the only help it can give them. A task not measured yet gets the
measured tasks' mean intercept: the intercept shifts all of a task's scores alike and so never
changes their order. Scores change scale once, when the residual model is first fitted; they
move at every update, between rounds, as any online model's do: MetaSchedule compares scores
only within one task's round (its evolutionary search's population and heap), so the scores one
round compares come from one state of the model.
"""
from __future__ import annotations

import numpy as np

from ..config import TclError
from ..metrics import labels
from .base import PER_STORE_WIDTH, ProgramSet

ROUNDS = 50      # trees per refit: enough to fit a few hundred measurements, cheap to redo
MAX_DEPTH = 4    # shallow: the residual is fitted on a few measurements per task
ETA = 0.3
MIN_MEASURED = 16   # measurements before the residual model first corrects the prior


def program_sums(programs: ProgramSet) -> np.ndarray:
    """(n, PER_STORE_WIDTH): each program's per-store rows summed (zeros for one without stores)."""
    counts = np.diff(programs.store_offsets)
    out = np.zeros((len(programs), PER_STORE_WIDTH), np.float64)
    np.add.at(out, np.repeat(np.arange(len(programs)), counts), programs.per_store)
    return out


class ResidualPrior:
    """The prior's scores corrected by an online XGBoost on their residual (module docstring).
    ``observe`` a task's measured programs with the prior's scores and latencies (s, NaN when
    the run failed); ``score`` programs of a task with the prior's scores."""

    def __init__(self, rounds: int = ROUNDS, max_depth: int = MAX_DEPTH, eta: float = ETA,
                 min_measured: int = MIN_MEASURED, nthread: int = 1, seed: int = 0):
        for key, value, low, high in (("rounds", rounds, 1, 10_000),
                                      ("min_measured", min_measured, 1, 1_000_000),
                                      ("max_depth", max_depth, 1, 32),
                                      ("nthread", nthread, 1, 1024), ("seed", seed, 0, 2**31)):
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                raise TclError(f"residual {key} must be an integer in [{low}, {high}]; "
                               f"got {value!r}")
        if isinstance(eta, bool) or not isinstance(eta, (int, float)) or not 0 < eta <= 1:
            raise TclError(f"residual eta must be a number in (0, 1]; got {eta!r}")
        self.params = {"objective": "reg:squarederror", "max_depth": max_depth, "eta": eta,
                       "nthread": nthread, "seed": seed, "base_score": 0.0, "verbosity": 0}
        self.rounds = rounds
        self.min_measured = min_measured
        # task key -> [(feature sums, prior scores, latencies)] per update
        self._measured: dict[str, list[tuple[np.ndarray, np.ndarray, np.ndarray]]] = {}
        self.slope = 0.0
        self.intercept: dict[str, float] = {}
        self.booster = None

    @property
    def n_measured(self) -> int:
        return sum(len(lat) for chunks in self._measured.values() for _, _, lat in chunks)

    def observe(self, key: str, programs: ProgramSet, prior: np.ndarray,
                latency: np.ndarray) -> None:
        prior, latency = np.asarray(prior, np.float64), np.asarray(latency, np.float64)
        if not len(programs) == len(prior) == len(latency):
            raise TclError(f"residual update: {len(programs)} programs, {len(prior)} prior "
                           f"scores and {len(latency)} latencies; expected one of each per program")
        if len(latency):
            self._measured.setdefault(key, []).append((program_sums(programs), prior, latency))
            if self.n_measured >= self.min_measured:
                self._fit()

    def score(self, key: str, programs: ProgramSet, prior: np.ndarray) -> np.ndarray:
        """Higher-is-better scores: the raw prior before the residual model's first fit, then
        the calibrated prior plus the residual model's correction (about the label's scale)."""
        prior = np.asarray(prior, np.float64)
        if self.booster is None or not len(prior):
            return prior
        import xgboost as xgb

        intercept = self.intercept.get(key, float(np.mean(list(self.intercept.values()))))
        calibrated = intercept + self.slope * _finite(prior)
        return calibrated + self.booster.predict(xgb.DMatrix(program_sums(programs)))

    def _fit(self) -> None:
        import xgboost as xgb

        tasks = []
        for key, chunks in self._measured.items():
            x = np.concatenate([c[0] for c in chunks])
            p = _finite(np.concatenate([c[1] for c in chunks]))
            lat = np.concatenate([c[2] for c in chunks])
            tasks.append((key, x, p, labels(lat, np.zeros(len(lat), np.int64)).astype(np.float64)))
        # the pooled slope of label on prior score within tasks, never negative
        num = sum(float(np.dot(p - p.mean(), y - y.mean())) for _, _, p, y in tasks)
        den = sum(float(np.dot(p - p.mean(), p - p.mean())) for _, _, p, _ in tasks)
        self.slope = max(0.0, num / den) if den > 0 else 0.0
        self.intercept = {key: float(y.mean() - self.slope * p.mean()) for key, _, p, y in tasks}
        x = np.concatenate([x for _, x, _, _ in tasks])
        residual = np.concatenate([y - (self.intercept[key] + self.slope * p)
                                   for key, _, p, y in tasks])
        self.booster = xgb.train(self.params, xgb.DMatrix(x, label=residual), self.rounds)


def _finite(scores: np.ndarray) -> np.ndarray:
    """A prior's scores with NaN / inf replaced by the lowest / highest finite score (0 if none):
    a NaN score ranks last, as ``search_scores`` ranks it."""
    ok = np.isfinite(scores)
    if ok.all():
        return scores
    low, high = (scores[ok].min(), scores[ok].max()) if ok.any() else (0.0, 0.0)
    return np.where(np.isnan(scores), low, np.clip(scores, low, high))
