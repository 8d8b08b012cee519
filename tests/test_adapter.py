"""The model registry, the XGBoost baseline and the MetaSchedule adapter (one real tune_tir run)."""
import json

import numpy as np
import pytest

from tcl.config import TclError
from tcl.evaluate import synthetic_data
from tcl.models import MODEL_KINDS, load_model, make_model, read_kind
from tcl.models.base import CostModel, ProgramSet
from tcl.models.xgb import XGBModel

FAST = {"num_boost_round": 15, "nthread": 1}


@pytest.fixture(scope="module")
def programs() -> ProgramSet:
    return synthetic_data(n_tasks=4, programs_per_task=20, seed=1)[0]


def test_registry_kinds_and_unknown_kind():
    import tcl.continual  # noqa: F401  (registers "continual"; alone, this file imported none)

    assert set(MODEL_KINDS) == {"mamba", "tenset-mlp", "tlp", "xgb", "continual"}
    assert MODEL_KINDS["xgb"] is XGBModel
    with pytest.raises(TclError, match="unknown model kind 'svm'; known: mamba, tenset-mlp, "
                                       "tlp, xgb, continual"):
        make_model("svm")
    with pytest.raises(TclError, match="model kind 'xgb' rejected parameters"):
        make_model("xgb", depth=3)


def test_one_name_to_class_helper_for_models_samplers_and_distillers():
    """tcl.classes.ClassRegistry behind all three: lazy, the same errors, names as the classes
    call themselves."""
    from tcl.classes import ClassRegistry
    from tcl.continual import DISTILLERS, make_distiller
    from tcl.samplers import SAMPLERS, make_sampler

    for registry in (MODEL_KINDS, SAMPLERS, DISTILLERS):
        assert isinstance(registry, ClassRegistry)
    assert all(SAMPLERS[n].name == n for n in SAMPLERS)
    assert all(MODEL_KINDS[k].kind == k for k in MODEL_KINDS)
    with pytest.raises(TclError, match="unknown sampler 'x'; known: random, kcenter"):
        make_sampler("x")
    with pytest.raises(TclError, match="unknown distillation method 'x'; known: scratch"):
        make_distiller("x")
    broken = ClassRegistry("thing", {"gone": ("tcl.no_such_module", "Gone")})
    assert "gone" in broken and "other" not in broken   # no import to answer that
    with pytest.raises(TclError, match="thing 'gone' needs tcl.no_such_module.Gone"):
        broken.get_class("gone")


@pytest.mark.parametrize("objective", ["reg", "rank"])
def test_xgb_fit_predict_save_load(tmp_path, programs, objective):
    model = make_model("xgb", objective=objective, **FAST).fit(programs)
    scores = model.predict(programs)
    assert scores.shape == (len(programs),) and np.isfinite(scores).all()
    assert model.n_parameters() > 0
    path = tmp_path / "m.model"
    model.save(path)
    assert read_kind(path) == "xgb"
    again = load_model(path)
    np.testing.assert_allclose(again.predict(programs), scores)
    assert again.params == model.params


def test_xgb_reg_matches_metaschedule_xgbmodel(programs):
    """Same trees as MetaSchedule's own XGBModel._train up to our best iteration, with its
    weighting of failed programs (weight 0; ``programs`` has some)."""
    from tcl.tvm_compat import meta_schedule

    meta_schedule()
    from tvm.s_tir.meta_schedule.cost_model.xgb_model import PackSum, XGBConfig
    from tvm.s_tir.meta_schedule.cost_model.xgb_model import XGBModel as MSXGBModel

    xs = [programs.per_store[a:b] for a, b in zip(programs.store_offsets[:-1],
                                                  programs.store_offsets[1:])]
    theirs = MSXGBModel(config=XGBConfig(nthread=1))
    theirs._train(xs, programs.labels.astype(np.float32))
    ours = XGBModel(nthread=1, fail_weight=0.0).fit(programs)
    pack = PackSum(xs, None)
    expect = pack.predict_with_score(theirs.booster.predict(
        pack.dmatrix, iteration_range=(0, ours.best_iteration + 1)))
    np.testing.assert_allclose(ours.predict(programs), expect, rtol=1e-6, atol=1e-6)


def test_xgb_program_without_stores_ranks_last(programs):
    model = XGBModel(**FAST).fit(programs)
    p = programs.subset(np.arange(3))
    counts = np.diff(p.store_offsets)
    keep = np.arange(counts[0], p.store_offsets[-1])  # drop program 0's stores
    empty = ProgramSet(p.program_ids, p.group, p.per_store[keep],
                       np.concatenate([[0], np.cumsum([0, *counts[1:]])]).astype(np.int64),
                       p.tokens, p.token_offsets)
    scores = model.predict(empty)
    assert scores[0] < scores[1:].min()


def test_xgb_errors_name_the_file(tmp_path, programs):
    with pytest.raises(TclError, match="not fitted"):
        XGBModel().predict(programs)
    unlabelled = ProgramSet(programs.program_ids, programs.group, programs.per_store,
                            programs.store_offsets, programs.tokens, programs.token_offsets)
    with pytest.raises(TclError, match="no labels"):
        XGBModel(**FAST).fit(unlabelled)
    with pytest.raises(TclError, match="objective"):
        XGBModel(objective="lambdamart")
    other = tmp_path / "other.model"
    other.write_text(json.dumps({"kind": "mamba", "version": 1}))
    with pytest.raises(TclError, match=f"{other}.*kind 'mamba'"):
        XGBModel.load(other)
    old = tmp_path / "old.model"
    old.write_text(json.dumps({"kind": "xgb", "version": 0}))
    with pytest.raises(TclError, match=f"{old}.*version 0"):
        XGBModel.load(old)
    junk = tmp_path / "junk.model"
    junk.write_bytes(b"\x00\x01 not a model")
    with pytest.raises(TclError, match=f"{junk}"):
        load_model(junk)
    with pytest.raises(TclError, match="does not exist"):
        load_model(tmp_path / "missing.model")


def test_read_kind_of_torch_checkpoint(tmp_path):
    torch = pytest.importorskip("torch")
    path = tmp_path / "net.model"
    torch.save({"kind": "tlp", "state_dict": {"w": torch.zeros(2)}}, path)
    assert read_kind(path) == "tlp"


class _Counting(CostModel):
    """Delegates to a fitted model and records the sets it scored."""

    kind = "counting"

    def __init__(self, inner: CostModel):
        self.inner, self.seen = inner, []

    def fit(self, train, valid=None):
        self.inner.fit(train, valid)
        self.seen.append(("fit", len(train)))
        return self

    def predict(self, programs):
        self.seen.append(("predict", len(programs), programs.tokens.shape[0] > 0))
        return self.inner.predict(programs)

    def save(self, path):
        self.inner.save(path)

    @classmethod
    def load(cls, path):
        raise NotImplementedError


@pytest.mark.slow
def test_tune_tir_with_tcl_model(tmp_path, programs):
    """A real (tiny) MetaSchedule search ranked by a tcl XGBModel through the adapter."""
    from tcl.tvm_compat import meta_schedule, reset_meta_schedule_logging

    ms = meta_schedule()
    from tvm import te
    from tvm.s_tir.meta_schedule.testing import te_workload
    from tvm.target import Target

    from tcl.measure.builder import local_builder
    from tcl.models.adapter import TclCostModel

    with pytest.raises(TclError, match="update_mode"):
        TclCostModel(XGBModel(), update_mode="sometimes")
    with pytest.raises(TclError, match="refit_min"):
        TclCostModel(XGBModel(), update_mode="refit", refit_min=0)
    model = _Counting(XGBModel(**FAST).fit(programs))
    cost_model = TclCostModel(model, update_mode="refit", base=programs, refit_min=8)
    work_dir = tmp_path / "tune"
    reset_meta_schedule_logging()   # an earlier run in this worker: see the test below
    database = ms.tune_tir(
        te.create_prim_func(te_workload.matmul(64, 64, 64)),
        Target({"kind": "llvm", "num-cores": 1}), work_dir=str(work_dir),
        max_trials_global=16, num_trials_per_iter=8,
        builder=local_builder(max_workers=1),
        runner=ms.runner.LocalRunner(evaluator_config=ms.runner.EvaluatorConfig(
            number=1, repeat=1, min_repeat_ms=0)),
        cost_model=cost_model,
        strategy=ms.search_strategy.EvolutionarySearch(
            population_size=32, init_min_unmeasured=16, genetic_num_iters=1),
        num_tuning_cores=1, seed=0)
    records = database.get_all_tuning_records()
    assert len(records) >= 8
    assert any(r.run_secs and float(r.run_secs[0]) > 0 for r in records)
    assert (work_dir / "database_tuning_record.json").exists()
    predicted = [s for s in model.seen if s[0] == "predict"]
    assert predicted and all(n > 0 and has_tokens for _, n, has_tokens in predicted)
    fits = [n for kind, n, *_ in model.seen if kind == "fit"]
    assert fits and fits[0] > len(programs)  # refit on base + measured candidates
    cost_model.save(str(tmp_path / "after.model"))
    assert read_kind(tmp_path / "after.model") == "xgb"


def _tune_tiny(work_dir) -> None:
    from tcl.tvm_compat import meta_schedule, reset_meta_schedule_logging

    ms = meta_schedule()
    from tvm import te
    from tvm.s_tir.meta_schedule.testing import te_workload
    from tvm.target import Target

    reset_meta_schedule_logging()
    ms.tune_tir(te.create_prim_func(te_workload.matmul(16, 16, 16)),
                Target({"kind": "llvm", "num-cores": 1}), work_dir=str(work_dir),
                max_trials_global=2, num_trials_per_iter=2, num_tuning_cores=1, seed=0)


@pytest.fixture
def tuned_once(tmp_path):
    """A first MetaSchedule run in this process, in the test's setup phase."""
    _tune_tiny(tmp_path / "first")


@pytest.mark.slow
def test_a_second_tuning_run_in_a_process_tunes_under_pytest(tmp_path, tuned_once):
    """MetaSchedule's logging config lists its logger's handlers by name. After a first run that
    logger no longer propagates, so pytest (9.2) attaches its unnamed capture handler to it at
    the start of every later test phase, and the next ``tune_tir`` failed ('NoneType' object has
    no attribute 'format') unless the handlers were reset first, as ``tcl tune`` does."""
    import logging

    assert not logging.getLogger("tvm.s_tir.meta_schedule").propagate
    _tune_tiny(tmp_path / "second")
    assert (tmp_path / "second" / "database_tuning_record.json").exists()


PARITY_DEVICE = "cpu-sse42"
PARITY_CLASSES = ("conv", "dense", "injective")
PARITY_PROGRAMS = 6   # per task at most (injective tasks have fewer)


@pytest.fixture(scope="module")
def parity_store(tmp_path_factory):
    """A data root with the committed zoo and, for one task of each class in PARITY_CLASSES
    (the one with the most programs measured on the device), the device's committed records."""
    import shutil
    from pathlib import Path

    import polars as pl

    from tcl.config import Paths

    data = Path(__file__).resolve().parents[1] / "data"
    paths = Paths(tmp_path_factory.mktemp("parity") / "data")
    shutil.copytree(data / "zoo", paths.zoo_dir)
    records = data / "records" / f"device={PARITY_DEVICE}"
    measured = sorted(p.name.removeprefix("task=") for p in records.glob("task=*"))
    tasks = pl.read_parquet(paths.tasks_file).filter(pl.col("task_id").is_in(measured))

    counts = pl.read_parquet(records / "*" / "*.parquet", columns=["task_id", "program_id"]) \
        .group_by("task_id").agg(pl.col("program_id").n_unique().alias("programs"))
    tasks = tasks.join(counts, on="task_id").sort("programs", "task_id",
                                                  descending=[True, False])
    picked = [tasks.filter(pl.col("op_class") == c).row(0, named=True) for c in PARITY_CLASSES]
    for t in picked:
        name = f"device={PARITY_DEVICE}/task={t['task_id']}"
        shutil.copytree(data / "records" / name, paths.records_dir / name)
    return paths, picked



def _replayed(task: dict, target, traces) -> tuple:
    """A TuneContext of a stored task and its stored traces replayed as the tuner's candidates."""
    from tvm import s_tir

    from tcl.zoo.extract import task_module
    from tcl.tvm_compat import meta_schedule

    ms = meta_schedule()
    mod = task_module(task["workload_json"])
    context = ms.TuneContext(mod=mod, target=target, task_name=task["task_name"])
    candidates = []
    for trace in traces:
        sch = s_tir.Schedule(mod)
        s_tir.schedule.Trace.apply_json_to_schedule(json.loads(trace), sch)
        candidates.append(ms.MeasureCandidate(
            sch, ms.arg_info.ArgInfo.from_entry_func(sch.mod, remove_preproc=True)))
    return context, candidates

def test_tuner_features_match_the_feature_cache(parity_store):
    """Stored programs replayed as the tuner sees them (a schedule of the task's module, a
    MeasureCandidate with the entry function's arguments, a TuneContext for the device's
    target) featurize through the adapter to exactly the feature cache's per-store rows and
    trace tokens: a model ranks tuning candidates on the features it was trained on."""
    import polars as pl

    from tcl.store.devices import DeviceRegistry
    from tcl.features import featurize, load_features
    from tcl.models.adapter import featurize_candidates

    paths, picked = parity_store
    featurize(paths, [t["task_id"] for t in picked], progress=False)
    target = DeviceRegistry(paths).get(PARITY_DEVICE).tvm_target()
    for t in picked:
        cached = load_features(paths, [t["task_id"]]).sort("program_id").head(PARITY_PROGRAMS)
        traces = pl.read_parquet(paths.records_dir / f"device={PARITY_DEVICE}" /
                                 f"task={t['task_id']}").unique("program_id") \
            .join(cached.select("program_id"), on="program_id").sort("program_id")
        assert len(traces) == len(cached) == min(PARITY_PROGRAMS, t["programs"]) > 1, \
            t["task_name"]
        context, candidates = _replayed(t, target, traces["trace_json"])
        got = featurize_candidates(context, candidates)
        for i, row in enumerate(cached.iter_rows(named=True)):
            what = f"{t['op_class']} task {t['task_name']}, program {row['program_id']}"
            stores = got.per_store[got.store_offsets[i]:got.store_offsets[i + 1]]
            tokens = got.tokens[got.token_offsets[i]:got.token_offsets[i + 1]]
            assert stores.shape[0] == row["n_stores"] > 0, what
            np.testing.assert_array_equal(stores.ravel(), np.asarray(row["per_store"]),
                                          err_msg=what)
            assert tokens.shape[0] == row["n_tokens"] > 0, what
            np.testing.assert_array_equal(tokens.ravel(), np.asarray(row["tokens"]), err_msg=what)
        # for a model that reads no tokens: the same per-store rows, no tokens
        bare = featurize_candidates(context, candidates, tokens=False)
        np.testing.assert_array_equal(bare.per_store, got.per_store)
        np.testing.assert_array_equal(bare.store_offsets, got.store_offsets)
        assert bare.tokens.shape == (0, got.tokens.shape[1]) and not bare.token_offsets.any()


def test_the_adapter_computes_tokens_only_for_models_that_read_them():
    from tcl.models.adapter import reads_tokens

    assert not reads_tokens(XGBModel()) and not reads_tokens(make_model("tenset-mlp"))
    assert reads_tokens(make_model("tlp")) and reads_tokens(_Counting(XGBModel()))


def test_search_scores_are_positive_ordered_and_per_candidate():
    """MetaSchedule clamps scores at 0 and samples parents in proportion to them: the adapter
    hands it positive scores in the model's order, each independent of its batch."""
    from tcl.models.adapter import search_scores

    raw = np.array([-800.0, -30.0, -15.4, -0.33, 0.0, 0.12, 5.4, 40.0, 1e6, np.nan, np.inf])
    got = search_scores(raw)
    assert np.all(got[:-2] >= 0) and np.all(got[1:-2] > 0)
    assert np.all(np.diff(got[:-2]) >= 0) and np.all(np.diff(got[1:-2]) > 0)  # strict order
    assert got[-2] == 0.0 and np.isfinite(got[-1]) and got[-1] >= got[-3]     # NaN last, inf top
    np.testing.assert_array_equal(search_scores(raw[3:6]), got[3:6])          # batch-free


def _matmul_candidates(n: int):
    """A TuneContext over a small matmul and ``n`` random post-processed candidates of it."""
    from tcl.sampling import tune_context
    from tcl.tvm_compat import meta_schedule

    meta_schedule()
    from tvm import te
    from tvm.s_tir.meta_schedule.testing import te_workload

    ctx = tune_context(te.create_prim_func(te_workload.matmul(64, 64, 64)))
    ctx.pre_tuning(max_trials=n, num_trials_per_iter=n, design_spaces=ctx.generate_design_space(),
                   database=None, cost_model=None)
    candidates = list(ctx.search_strategy.generate_measure_candidates())
    ctx.post_tuning()
    return ctx, candidates


def _same_programs(a: ProgramSet, b: ProgramSet) -> None:
    for field in ("per_store", "store_offsets", "tokens", "token_offsets"):
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field), err_msg=field)


def test_the_feature_cache_featurizes_each_program_once_and_keeps_its_bound():
    """A candidate seen before is looked up, not featurized again, and gives exactly the
    features featurizing gives; a cache over its byte bound drops the least recently used
    programs and still answers right; the adapter scores the same with the cache as without."""
    from tcl.models.adapter import FeatureCache, TclCostModel, featurize_cached, \
        featurize_candidates, search_scores

    ctx, cands = _matmul_candidates(12)
    assert len(cands) >= 8
    fresh = featurize_candidates(ctx, cands)
    cache = FeatureCache()
    _same_programs(featurize_cached(ctx, cands[:4], cache), featurize_candidates(ctx, cands[:4]))
    assert (cache.hits, cache.misses, len(cache)) == (0, 4, 4)
    # a batch of old and new programs, in a new order: old ones hit, the set keeps the order
    order = cands[2:][::-1] + cands[:2]
    _same_programs(featurize_cached(ctx, order, cache), featurize_candidates(ctx, order))
    assert (cache.hits, cache.misses) == (4, len(cands))
    _same_programs(featurize_cached(ctx, cands, cache), fresh)
    stats = cache.stats()
    assert stats["hits"] == 4 + len(cands) and stats["saved_s"] > 0
    assert stats["hit_rate"] == round(stats["hits"] / (stats["hits"] + stats["misses"]), 4)
    # another task's identical trace is another program
    assert FeatureCache.key("a", cands[0].sch.trace) != FeatureCache.key("b", cands[0].sch.trace)

    one = fresh.per_store[:fresh.store_offsets[1]].nbytes + \
        fresh.tokens[:fresh.token_offsets[1]].nbytes
    small = FeatureCache(max_bytes=3 * one)
    for _ in range(2):
        _same_programs(featurize_cached(ctx, cands, small), fresh)
        assert small.bytes <= small.max_bytes and len(small) <= 3 + 1
    assert small.evicted > 0 and small.misses > len(cands)   # evicted programs featurized again
    # a program twice in one batch is featurized once
    twice = FeatureCache()
    _same_programs(featurize_cached(ctx, [cands[0], cands[1], cands[0]], twice),
                   featurize_candidates(ctx, [cands[0], cands[1], cands[0]]))
    assert (twice.hits, twice.misses, len(twice)) == (1, 2, 2)
    with pytest.raises(TclError, match="feature cache bound"):
        FeatureCache(max_bytes=-1)

    model = XGBModel(**FAST).fit(synthetic_data(n_tasks=4, programs_per_task=20, seed=1)[0])
    adapter = TclCostModel(model)
    first = adapter.predict(ctx, cands)
    np.testing.assert_array_equal(adapter.predict(ctx, cands), first)
    assert adapter.cache.hits == len(cands) and adapter.featurize_s > 0
    np.testing.assert_array_equal(first, search_scores(model.predict(
        featurize_candidates(ctx, cands, tokens=False))))


def test_the_tuning_wrapper_times_featurizing_apart_for_every_model():
    """tcl.online's wrapper counts predict calls and scored candidates, and featurizing apart
    from predicting: the tcl adapter's own count, MetaSchedule's XGBoost through a timed
    extractor, none for the random model."""
    from tcl.models.adapter import TclCostModel
    from tcl.online import ScoredCostModel
    from tcl.tvm_compat import meta_schedule

    ms = meta_schedule()
    ctx, cands = _matmul_candidates(8)
    model = XGBModel(**FAST).fit(synthetic_data(n_tasks=4, programs_per_task=20, seed=1)[0])
    results = [ms.runner.RunnerResult(run_secs=[1e-3 * (i + 1)], error_msg=None)
               for i in range(len(cands))]
    for inner, featurizes in ((TclCostModel(model), True),
                              (ms.cost_model.CostModel.create("xgb", num_tuning_cores=1), True),
                              (ms.cost_model.CostModel.create("random"), False)):
        scored = ScoredCostModel(inner)
        assert len(scored.predict(ctx, cands)) == len(cands)
        # MetaSchedule's XGBoost featurizes what it learns from (it predicts at random until
        # it has learnt from enough)
        scored.update(ctx, cands, results)
        assert (scored.predict_calls, scored.scored) == (1, len(cands))
        seconds = scored.seconds()
        assert (seconds["featurize"] > 0) == featurizes, inner
        assert seconds["predict"] >= 0 and seconds["update"] >= 0


def test_the_tuning_wrapper_scores_a_batch_with_no_block_alike_where_metaschedule_fails():
    """MetaSchedule's XGBoost (TVM 0.27) raises a TypeError when no candidate of a batch has a
    block to featurize (its pack-sum ids of an empty batch are float64: np.bincount refuses
    them), which an unfused network's copy-only tasks give (`tcl tune --no-fuse`). The wrapper
    scores such a batch alike instead; a batch with features still reaches the model."""
    import tvm
    import xgboost as xgb
    from tvm.ir.utils import derived_object

    from tcl.online import ScoredCostModel
    from tcl.tvm_compat import meta_schedule

    ms = meta_schedule()
    ctx, cands = _matmul_candidates(4)

    @derived_object
    class Blockless(ms.feature_extractor.PyFeatureExtractor):
        def extract_from(self, context, candidates):
            return [tvm.runtime.tensor(np.zeros((0, 164), "float32")) for _ in candidates]

    inner = ms.cost_model.XGBModel(extractor=Blockless(), num_warmup_samples=0)
    rng = np.random.default_rng(0)
    inner.booster = xgb.train({}, xgb.DMatrix(rng.random((8, 164)), label=rng.random(8)), 2)
    with pytest.raises(TypeError):
        inner.predict(ctx, cands)
    np.testing.assert_array_equal(ScoredCostModel(inner).predict(ctx, cands), np.zeros(4))
    real = ms.cost_model.XGBModel(num_warmup_samples=0)
    real.booster = inner.booster
    scores = ScoredCostModel(real).predict(ctx, cands)   # featurized, then scored
    assert scores.shape == (4,) and np.all(np.isfinite(scores)) and np.any(scores != 0)


class _Reversed(CostModel):
    """A deliberately wrong prior: ``inner``'s scores negated."""

    kind = "reversed"

    def __init__(self, inner: CostModel):
        self.inner = inner

    def fit(self, train, valid=None):
        raise NotImplementedError

    def predict(self, programs):
        return -self.inner.predict(programs)

    def save(self, path):
        self.inner.save(path)

    @classmethod
    def load(cls, path):
        raise NotImplementedError


def test_residual_mode_learns_what_a_wrong_prior_ranks_badly(parity_store):
    """``update_mode="residual"``: the prior alone scores until the run has measured a few
    candidates; fed the measured candidates of real tasks (replayed from the store, one failed
    run among them), the online residual model ranks them far better than the frozen prior does
    when the prior is reversed, each update is cheap, and the scores stay positive. A task not
    measured yet is scored by the same model, shifted by a constant."""
    import time

    import polars as pl

    from tcl.store.devices import DeviceRegistry
    from tcl.metrics import labels, pairwise_accuracy
    from tcl.models.adapter import TclCostModel, concat_program_sets, featurize_candidates
    from tcl.models.residual import ResidualPrior
    from tcl.tvm_compat import meta_schedule

    ms = meta_schedule()
    paths, picked = parity_store
    target = DeviceRegistry(paths).get(PARITY_DEVICE).tvm_target()
    tasks = []   # (context, candidates, latency s: NaN for the failed run)
    for t in picked:
        rows = pl.read_parquet(paths.records_dir / f"device={PARITY_DEVICE}" /
                               f"task={t['task_id']}").filter(pl.col("status") == "ok") \
            .unique("program_id").sort("program_id")
        if len(rows) < 8:
            continue
        context, candidates = _replayed(t, target, rows["trace_json"])
        latency = np.array([np.mean(x) for x in rows["latencies"].to_list()], np.float64)
        latency[int(np.argmin(latency))] = np.nan   # the best program's run failed
        tasks.append((context, candidates, latency))
    assert len(tasks) >= 2

    # the prior: an XGB fitted to the true labels of these very programs, reversed
    sets = []
    for g, (context, candidates, latency) in enumerate(tasks):
        ps = featurize_candidates(context, candidates, group=g, tokens=False)
        ps.labels = labels(np.where(np.isnan(latency), np.nanmax(latency) * 2, latency), ps.group)
        sets.append(ps)
    prior = _Reversed(XGBModel(**FAST).fit(concat_program_sets(sets)))
    frozen = TclCostModel(prior)
    residual = TclCostModel(prior, update_mode="residual")

    def ranking(cost_model) -> tuple[float, np.ndarray]:
        scores = [cost_model.predict(c, cands) for c, cands, _ in tasks]
        lat = np.concatenate([lat for *_, lat in tasks])
        group = np.concatenate([np.full(len(s), g) for g, s in enumerate(scores)])
        return pairwise_accuracy(np.concatenate(scores), labels(lat, group), group), \
            np.concatenate(scores)

    before, scores = ranking(residual)
    np.testing.assert_array_equal(scores, ranking(frozen)[1])   # unmeasured: the prior alone
    slowest = 0.0
    for half in (slice(0, None, 2), slice(1, None, 2)):   # two rounds per task
        for context, candidates, latency in tasks:
            results = [ms.runner.RunnerResult(None, "RuntimeError: failed") if np.isnan(s)
                       else ms.runner.RunnerResult([float(s)], None) for s in latency[half]]
            start = time.perf_counter()
            residual.update(context, candidates[half], results)
            slowest = max(slowest, time.perf_counter() - start)
            if residual.residual.n_measured < residual.residual.min_measured:
                np.testing.assert_array_equal(ranking(residual)[1], scores)  # the prior alone
    frozen_pairwise = ranking(frozen)[0]
    after, scores = ranking(residual)
    assert before == frozen_pairwise < 0.3
    assert after > 0.8 and after > frozen_pairwise + 0.5, (before, after)
    assert np.all(scores > 0) and np.all(np.isfinite(scores))
    assert residual.residual.n_measured == sum(len(lat) for *_, lat in tasks)
    assert residual.residual.slope == 0.0   # a reversed prior is flattened, not inverted
    assert slowest < 10.0, slowest          # generous: featurizing and a 50-tree fit
    learner, known = residual.residual, next(iter(residual.residual.intercept))
    p = prior.predict(sets[0])
    shift = learner.score("not measured", sets[0], p) - learner.score(known, sets[0], p)
    np.testing.assert_allclose(shift, shift[0])
    with pytest.raises(TclError, match="residual rounds"):
        ResidualPrior(rounds=0)
    with pytest.raises(TclError, match="residual eta"):
        ResidualPrior(eta=2.0)


def test_tune_and_adapter_offer_the_same_update_modes():
    from tcl import tune
    from tcl.models import adapter

    assert tune.UPDATE_MODES == adapter.UPDATE_MODES
