"""XGBoost baseline, as MetaSchedule's ``XGBModel`` (tvm/s_tir/meta_schedule/cost_model/xgb_model.py).

Faithful parts: per-store feature rows (164 each) go to XGBoost; a program's score is the SUM of
its stores' predictions ("pack-sum"); the default objective ("reg") is MetaSchedule's, a squared
error on the summed prediction weighted by the label (gradient and hessian times y, the DMatrix
weight = y), so the best programs of a task matter most; hyperparameters are XGBConfig's
(max_depth 10, gamma 0.001, min_child_weight 0, eta 0.2, seed 43), up to 10000 rounds with early
stopping after 50 rounds without improvement of p-rmse; programs without stores are not trained on.

Departures, on purpose: early stopping watches ``valid`` when given (MetaSchedule watches the
training set: fine for a few hundred tuning records, thousands of rounds on our data); prediction
uses the trees up to the best iteration. MetaSchedule 0.27 has no ranking objective; "rank" is a
pack-sum pairwise logistic loss (RankNet) on pairs sampled within each task, offered as the
ranking variant TenSet/TLP compare against. A failed program (label 0: timeout, run or build
error) has weight 0 under MetaSchedule's label weighting, so nothing teaches the trees that it
fails and an unseen large tile can score high. "reg" gives a failure the target
``FAILED_TARGET`` (-1, a margin below every running program's label in (0, 1]) and the weight
``fail_weight`` (default 1, the best program's weight; 0 is MetaSchedule's), so failures score
below the programs that run. "rank" already counts a failure as the worse member of its pairs.
``features`` picks the view of the per-store rows the trees read (``tcl.features.feature_view``:
raw, size-normalised or both); it is saved with the model, so predict reads the same view.
"""
from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import numpy as np

from ..config import TclError, atomic_write
from ..features import FEATURE_VIEWS, feature_view
from ..metrics import failed
from ..tokens import TOKEN_WIDTH
from .base import CostModel, ProgramSet, check_content, content_digest

FORMAT_VERSION = 1
OBJECTIVES = ("reg", "rank")
FAILED_TARGET = -1.0  # "reg" target of a failed program: a margin below every running one (> 0)
RANK_MIN_DELTA = 1e-3  # pair-loss improvement that counts for early stopping


class _PackSum:
    """Per-store rows of a program set and the row -> program map."""

    def __init__(self, programs: ProgramSet, with_labels: bool, fail_weight: float = 0.0,
                 features: str = "raw"):
        import xgboost as xgb

        counts = np.diff(programs.store_offsets)
        self.n = len(programs)
        self.ids = np.repeat(np.arange(self.n), counts)
        self.group = programs.group
        self.y = self.t = self.w = None
        if with_labels:
            self.y = np.asarray(programs.labels, np.float32)
            fail = failed(self.y)
            # "reg": MetaSchedule's target and weight are the label; a failure (label 0) would
            # weigh 0, so it targets FAILED_TARGET with weight fail_weight instead
            self.t = np.where(fail, np.float32(FAILED_TARGET), self.y)
            self.w = np.where(fail, np.float32(fail_weight), self.y)
        rows = self.t[self.ids] if self.t is not None else None
        rows_in = feature_view(programs.per_store, programs.store_offsets, features)
        self.dmatrix = xgb.DMatrix(np.asarray(rows_in, np.float32), label=rows)
        if rows is not None:
            self.dmatrix.set_weight(self.w[self.ids])

    def program_scores(self, store_pred: np.ndarray) -> np.ndarray:
        return np.bincount(self.ids, weights=store_pred, minlength=self.n)

    # -- reg: MetaSchedule's obj_square_error / rmse ------------------------------------------
    def square_error(self, store_pred: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        ys, ws = self.t[self.ids], self.w[self.ids]
        grad = self.program_scores(store_pred)[self.ids] - ys
        return grad * ws, np.ones_like(grad) * ws

    def rmse(self, store_pred: np.ndarray) -> float:
        err = self.program_scores(store_pred)[self.ids] - self.t[self.ids]
        return float(np.sqrt(np.mean(np.square(err))))

    # -- rank: pairwise logistic loss on sampled same-task pairs ------------------------------
    def sample_pairs(self, per_program: int, seed: int) -> None:
        rng = np.random.default_rng(seed)
        _, inv = np.unique(self.group, return_inverse=True)
        order = np.argsort(inv, kind="stable")
        starts = np.searchsorted(inv[order], np.arange(inv.max() + 1))
        sizes = np.bincount(inv)
        i = np.repeat(np.arange(self.n), per_program)
        j = order[starts[inv[i]] + (rng.random(len(i)) * sizes[inv[i]]).astype(np.int64)]
        better = self.y[i] > self.y[j]
        worse = self.y[i] < self.y[j]
        self.pi = np.concatenate([i[better], j[worse]])
        self.pj = np.concatenate([j[better], i[worse]])

    def _pair_terms(self, store_pred: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        p = self.program_scores(store_pred)
        d = p[self.pi] - p[self.pj]
        return d, 1.0 / (1.0 + np.exp(np.clip(d, -50, 50)))  # sigmoid(-d)

    def pairwise_logistic(self, store_pred: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        _, sig = self._pair_terms(store_pred)
        h = sig * (1.0 - sig)
        grad = np.bincount(self.pj, sig, self.n) - np.bincount(self.pi, sig, self.n)
        hess = np.bincount(self.pi, h, self.n) + np.bincount(self.pj, h, self.n)
        return grad[self.ids], np.maximum(hess[self.ids], 1e-6)

    def pair_loss(self, store_pred: np.ndarray) -> float:
        d, _ = self._pair_terms(store_pred)
        return float(np.mean(np.logaddexp(0.0, -d))) if len(d) else 0.0


class XGBModel(CostModel):
    """Pack-sum XGBoost over per-store features. ``params`` round-trip through save/load."""

    kind = "xgb"

    def __init__(self, objective: str = "reg", max_depth: int = 10, gamma: float = 0.001,
                 min_child_weight: float = 0.0, eta: float = 0.2, seed: int = 43,
                 nthread: int | None = None, tree_method: str = "auto",
                 num_boost_round: int = 10000, early_stopping_rounds: int = 50,
                 rank_pairs: int = 16, fail_weight: float = 1.0, features: str = "raw",
                 verbose: bool = False):
        if objective not in OBJECTIVES:
            raise TclError(f"xgb objective {objective!r} is unknown; expected one of {OBJECTIVES}")
        if features not in FEATURE_VIEWS:
            raise TclError(f"xgb features {features!r} is unknown; expected one of "
                           f"{list(FEATURE_VIEWS)}")
        for key, value, low, high in (
                ("max_depth", max_depth, 1, 64), ("gamma", gamma, 0, None),
                ("min_child_weight", min_child_weight, 0, None), ("eta", eta, 1e-6, 1.0),
                ("fail_weight", fail_weight, 0, None),
                ("num_boost_round", num_boost_round, 1, 1_000_000),
                ("early_stopping_rounds", early_stopping_rounds, 1, 1_000_000),
                ("rank_pairs", rank_pairs, 1, 1024), ("seed", seed, 0, None),
                ("nthread", 1 if nthread is None else nthread, 1, 1024)):
            integer = key not in ("gamma", "min_child_weight", "eta", "fail_weight")
            if isinstance(value, bool) or not isinstance(value, int if integer else (int, float)) \
                    or value < low or (high is not None and value > high):
                raise TclError(f"xgb {key} must be {'an integer' if integer else 'a number'} in "
                               f"[{low}, {high if high is not None else 'inf'}], got {value!r}")
        self.params: dict[str, Any] = dict(
            objective=objective, max_depth=max_depth, gamma=gamma,
            min_child_weight=min_child_weight, eta=eta, seed=seed, nthread=nthread,
            tree_method=tree_method, num_boost_round=num_boost_round,
            early_stopping_rounds=early_stopping_rounds, rank_pairs=rank_pairs,
            fail_weight=fail_weight, features=features, verbose=verbose)
        self.booster = None
        self.best_iteration: int | None = None

    # -- fit / predict -------------------------------------------------------------------------
    def _xgb_params(self) -> dict[str, Any]:
        p = self.params
        out = {k: p[k] for k in ("max_depth", "gamma", "min_child_weight", "eta", "seed",
                                 "tree_method")}
        if p["nthread"] is not None:
            out["nthread"] = p["nthread"]
        out["disable_default_eval_metric"] = 1
        out["verbosity"] = 1 if p["verbose"] else 0
        return out

    @staticmethod
    def _checked(programs: ProgramSet, what: str, need_labels: bool) -> ProgramSet:
        programs.validate(TOKEN_WIDTH)
        if need_labels and programs.labels is None:
            raise TclError(f"{what} programs have no labels; xgb needs measured programs to fit")
        return programs

    def fit(self, train: ProgramSet, valid: ProgramSet | None = None) -> "XGBModel":
        import xgboost as xgb

        self._checked(train, "training", True)
        has_stores = np.diff(train.store_offsets) > 0
        train = train.subset(np.flatnonzero(has_stores))  # as MetaSchedule: no features, no row
        if len(train) == 0:
            raise TclError("no training program has per-store features; nothing to fit")
        fail_weight, features = self.params["fail_weight"], self.params["features"]
        d_train = _PackSum(train, with_labels=True, fail_weight=fail_weight, features=features)
        d_eval = d_train
        if valid is not None and len(valid):
            valid = self._checked(valid, "validation", True)
            valid = valid.subset(np.flatnonzero(np.diff(valid.store_offsets) > 0))
            d_eval = _PackSum(valid, with_labels=True, fail_weight=fail_weight,
                              features=features) if len(valid) \
                else d_train
        rank = self.params["objective"] == "rank"
        if rank:
            for k, d in enumerate({id(d_train): d_train, id(d_eval): d_eval}.values()):
                d.sample_pairs(self.params["rank_pairs"], self.params["seed"] + k)
        packs = {id(d_train.dmatrix): d_train, id(d_eval.dmatrix): d_eval}

        def obj(pred: np.ndarray, _d) -> tuple[np.ndarray, np.ndarray]:
            return d_train.pairwise_logistic(pred) if rank else d_train.square_error(pred)

        def metric(pred: np.ndarray, dmatrix) -> tuple[str, float]:
            pack = packs[id(dmatrix)]
            return ("pair-loss", pack.pair_loss(pred)) if rank else ("p-rmse", pack.rmse(pred))

        # Strict improvement for p-rmse (as MetaSchedule); the pair loss on the training set
        # keeps creeping down for thousands of rounds, so it must improve by RANK_MIN_DELTA.
        stop = xgb.callback.EarlyStopping(
            rounds=self.params["early_stopping_rounds"], data_name="eval",
            metric_name="pair-loss" if rank else "p-rmse", maximize=False,
            min_delta=RANK_MIN_DELTA if rank else 0.0)
        self.booster = xgb.train(
            self._xgb_params(), d_train.dmatrix, num_boost_round=self.params["num_boost_round"],
            evals=[(d_eval.dmatrix, "eval")], obj=obj, custom_metric=metric, callbacks=[stop],
            verbose_eval=25 if self.params["verbose"] else False)
        self.best_iteration = int(self.booster.best_iteration)
        return self

    def predict(self, programs: ProgramSet) -> np.ndarray:
        if self.booster is None:
            raise TclError("xgb model is not fitted: call fit() or load a saved model first")
        self._checked(programs, "scored", False)
        pack = _PackSum(programs, with_labels=False, features=self.params["features"])
        store_pred = self.booster.predict(pack.dmatrix, output_margin=True,
                                          iteration_range=(0, self.best_iteration + 1))
        scores = pack.program_scores(store_pred)
        empty = np.diff(programs.store_offsets) == 0
        if empty.any():  # nothing to score: rank such programs last
            scores[empty] = (scores[~empty].min() if (~empty).any() else 0.0) - 1.0
        return scores

    def n_parameters(self) -> int:
        """Tree nodes (splits + leaves) in the trees used for prediction."""
        if self.booster is None:
            return 0
        trees = self.booster[: self.best_iteration + 1].get_dump()
        return sum(t.count("\n") for t in trees)

    # -- save / load: one JSON file ------------------------------------------------------------
    def save(self, path: str | Path) -> None:
        if self.booster is None:
            raise TclError("xgb model is not fitted; nothing to save")
        doc = {"kind": self.kind, "version": FORMAT_VERSION, "device": self.made_for,
               "params": self.params, "best_iteration": self.best_iteration,
               "booster_ubj": base64.b64encode(bytes(self.booster.save_raw("ubj"))).decode()}
        doc["content_hash"] = content_digest(doc)
        with atomic_write(Path(path), "model file") as tmp:
            tmp.write_text(json.dumps(doc))

    @classmethod
    def load(cls, path: str | Path) -> "XGBModel":
        import xgboost as xgb

        path = Path(path)
        try:
            doc = json.loads(path.read_text())
        except FileNotFoundError:
            raise TclError(f"model file {path} does not exist") from None
        except (UnicodeDecodeError, json.JSONDecodeError):
            raise TclError(f"{path} is not an xgb model file (expected JSON written by "
                           f"XGBModel.save)") from None
        if not isinstance(doc, dict) or doc.get("kind") != cls.kind:
            kind = doc.get("kind") if isinstance(doc, dict) else None
            raise TclError(f"{path} holds a model of kind {kind!r}; expected {cls.kind!r}")
        check_content(doc, path)
        if doc.get("version") != FORMAT_VERSION:
            raise TclError(f"{path} is xgb model format version {doc.get('version')!r}; this "
                           f"tcl reads version {FORMAT_VERSION}: retrain or re-save it")
        params, ubj = doc.get("params"), doc.get("booster_ubj")
        if not isinstance(params, dict) or not isinstance(ubj, str) or \
                not isinstance(doc.get("best_iteration"), int):
            raise TclError(f"{path} is not an xgb model file (expected params, best_iteration "
                           f"and booster_ubj, as XGBModel.save writes)")
        try:
            model = cls(**params)
        except TypeError as e:
            raise TclError(f"{path}: its xgb params do not fit this tcl: {e}") from None
        # The booster is XGBoost's UBJSON model format, parsed by XGBoost's own reader: data,
        # never a pickle (Booster's pickle support is __setstate__, which this never calls).
        model.booster = xgb.Booster()
        try:
            model.booster.load_model(bytearray(base64.b64decode(ubj, validate=True)))
        except (ValueError, xgb.core.XGBoostError) as e:
            raise TclError(f"{path}: its booster is not an XGBoost UBJSON model: "
                           f"{str(e).splitlines()[0]}") from None
        model.best_iteration = doc["best_iteration"]
        model.made_for = doc.get("device")
        return model
