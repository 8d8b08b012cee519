"""Samplers: the shared contract (unique pool ids, exactly the budget, same seed same
selection), budget checks, ``already``, per-task quotas, and the model-given paths."""
import re
from dataclasses import replace

import numpy as np
import pytest
import torch

from tcl.config import TclError
from tcl.models import make_model
from tcl.models.nn import synthetic_programs
from tcl.samplers import SAMPLERS, Pool, SamplerWarning, make_sampler, parse_budget
from tcl.samplers.disagreement import disagreement
from tcl.samplers.embedding import embed, feature_summary
from tcl.samplers.tasks import allocate, proportional, within_task_percentile

torch.set_num_threads(1)
SMALL = dict(stores=(1, 5), tokens=(4, 12))


def programs(n_groups=6, per_group=30, seed=0):
    ps = synthetic_programs(n_groups, per_group, seed=seed, **SMALL)
    return replace(ps, program_ids=np.char.add("p", ps.program_ids),
                   task_ids=np.char.add("t", ps.group.astype(str)))


def ensemble_scores(ps, members=3, seed=0):
    rng = np.random.default_rng(seed)
    return ps.labels[:, None] + 0.2 * rng.standard_normal((len(ps), members))


@pytest.fixture(scope="module")
def pool():
    ps = programs()
    return Pool(ps, scores=ensemble_scores(ps))


@pytest.fixture(scope="module")
def mlp():
    ps = synthetic_programs(8, 24, seed=3, **SMALL)
    return make_model("tenset-mlp", device="cpu", epochs=1, hidden=32).fit(ps)


CASES = [(name, per_task) for name in SAMPLERS for per_task in (True, False)]


@pytest.mark.parametrize("name,per_task", CASES)
def test_contract_and_determinism(pool, name, per_task):
    sampler = make_sampler(name, per_task=per_task)
    first = sampler.select(pool, 25, seed=7)
    assert len(first) == 25 == len(set(first))
    assert set(first) <= set(pool.program_ids)
    assert sampler.select(pool, 25, seed=7) == first
    assert sampler.select(pool, 0.1, seed=7) == sampler.select(pool, 18, seed=7)


@pytest.mark.parametrize("name", [n for n in SAMPLERS if n != "uncertainty"])
def test_seeds_differ(pool, name):   # (uncertainty: fixed scores, the seed only breaks ties)
    s = make_sampler(name, per_task=False)
    assert s.select(pool, 20, seed=0) != s.select(pool, 20, seed=1)


@pytest.mark.parametrize("name", list(SAMPLERS))
def test_budget_over_pool_selects_all_and_says_so(pool, name):
    notes = []
    chosen = make_sampler(name, on_note=notes.append).select(pool, 10_000)
    assert sorted(chosen) == sorted(pool.program_ids)
    assert any("selecting all" in n for n in notes)
    with pytest.warns(SamplerWarning, match="selecting all"):
        make_sampler(name).select(pool, len(pool) + 1)


@pytest.mark.parametrize("bad", [0, -3, 1.5, 0.0, -0.1, float("nan"), True, "10", None])
def test_bad_budgets(pool, bad):
    with pytest.raises(TclError, match="expected a count"):
        make_sampler("rdu").select(pool, bad)


def test_budget_parsing():
    assert parse_budget(5, 100) == 5 and parse_budget(np.int64(5), 100) == 5
    assert parse_budget(0.1, 100) == 10 and parse_budget(1.0, 7) == 7
    assert parse_budget(0.001, 100) == 1   # a share never rounds to nothing
    with pytest.raises(TclError, match="for a count, give an integer"):
        parse_budget(2.0, 100)


@pytest.mark.parametrize("bad", [0, -3, 1.5, float("nan"), True, "5", None, np.bool_(True)])
def test_one_budget_rule_for_params_cli_and_samplers(bad, tmp_path):
    """tcl.budget is the one rule: the params file, --budget and the samplers refuse the same
    values with the same words."""
    import argparse

    from tcl.budget import EXPECTED
    from tcl.cli.common import budget_arg
    from tcl.pipeline.constraints import Budget

    with pytest.raises(TclError, match=re.escape(EXPECTED)):
        parse_budget(bad, 100)
    with pytest.raises(TclError, match=re.escape(f"select.budget: {EXPECTED}")):
        Budget().check(bad, "select.budget", {})   # select.budget's and continual.subset's rule
    if isinstance(bad, (int, float)) and not isinstance(bad, bool):
        with pytest.raises(argparse.ArgumentTypeError, match=re.escape(EXPECTED)):
            budget_arg(str(bad))
    assert budget_arg("7") == 7 and budget_arg("0.25") == 0.25


def test_empty_pool_and_bad_pools():
    ps = programs(1, 4)
    with pytest.raises(TclError, match="empty pool"):
        Pool(ps.subset(np.array([], np.int64)))
    with pytest.raises(TclError, match="duplicate"):
        Pool(replace(ps, program_ids=np.array(["a", "a", "b", "c"])))
    with pytest.raises(TclError, match="task_weights lack"):
        Pool(ps, task_weights={"other": 1.0})
    with pytest.raises(TclError, match="select needs a Pool"):
        make_sampler("random").select(ps, 2)
    with pytest.raises(TclError, match="unknown sampler"):
        make_sampler("bogus")
    with pytest.raises(TclError, match="weights"):
        make_sampler("rdu", r=0, d=0, u=0)


@pytest.mark.parametrize("name", list(SAMPLERS))
def test_task_with_one_candidate(name):
    ps = programs(3, 10)
    keep = np.concatenate([[0], np.arange(10, 30)])   # task t0 keeps one program
    ps = ps.subset(keep)
    pool = Pool(ps, scores=ensemble_scores(ps))
    for per_task in (True, False):
        chosen = make_sampler(name, per_task=per_task).select(pool, 6)
        assert len(set(chosen)) == 6
    single = Pool(ps.subset(np.array([0])), scores=np.zeros((1, 2)))
    assert make_sampler(name).select(single, 1) == ["p0"]


def test_uncertainty_without_model_errors():
    pool = Pool(programs())   # no model, no precomputed scores
    for name, kw in (("uncertainty", {}), ("rdu", {})):
        with pytest.raises(TclError, match="uncertainty needs a cost model"):
            make_sampler(name, **kw).select(pool, 10)
    assert len(make_sampler("rdu", u=0).select(pool, 10)) == 10   # RDU without U needs none


@pytest.mark.parametrize("name", ["random", "kcenter", "representative", "rdu", "uncertainty"])
def test_already_is_never_selected(pool, name):
    already = list(pool.program_ids[::3])
    for per_task in (True, False):
        with pytest.warns(SamplerWarning, match="1 of the 61 already-measured ids are not in"):
            chosen = make_sampler(name, per_task=per_task).select(
                pool, 40, already=already + ["not-in-pool"])
        assert len(chosen) == 40 and not set(chosen) & set(already)
    notes = []
    rest = make_sampler(name, on_note=notes.append).select(pool, 1.0, already=already)
    assert sorted(rest) == sorted(set(pool.program_ids) - set(already))
    assert notes and "selecting all" in notes[0]


def test_diversity_moves_away_from_already():
    """Two clusters in one task: with programs of one measured, diversity goes to the other."""
    ps = synthetic_programs(1, 40, seed=0, noise=0.0, **SMALL)   # only the knob varies
    rows = ps.per_store.copy()
    owner = np.repeat(np.arange(40), np.diff(ps.store_offsets))
    rows[:, 5] = np.where(owner < 20, 0.0, 20.0)   # far apart along one column
    pool = Pool(replace(ps, per_store=rows, program_ids=np.char.add("p", ps.program_ids)))
    cluster = lambda ids: [int(p[1:]) >= 20 for p in ids]  # noqa: E731
    for name, kw in (("kcenter", {}), ("rdu", {"u": 0})):
        for seed in range(3):
            a = make_sampler(name, **kw).select(pool, 1, already=pool.program_ids[:3], seed=seed)
            b = make_sampler(name, **kw).select(pool, 1, already=pool.program_ids[20:23],
                                                seed=seed)
            assert cluster(a) == [True] and cluster(b) == [False], (name, seed, a, b)
        assert sorted(cluster(make_sampler(name, **kw).select(pool, 2))) == [False, True]


def test_kcenter_spreads(pool):
    """Farthest-first covers the task better than random: smaller worst-case distance."""
    z = embed(pool)
    task0 = np.flatnonzero(pool.task == 0)

    def radius(ids):
        sel = np.flatnonzero(np.isin(pool.program_ids, ids))
        d = np.linalg.norm(z[task0][:, None] - z[sel][None], axis=2)
        return d.min(1).max()
    only0 = Pool(pool.programs.subset(task0))
    k = make_sampler("kcenter").select(only0, 5)
    r = [radius(make_sampler("random").select(only0, 5, seed=s)) for s in range(10)]
    assert radius(k) < np.median(r)


def test_per_task_quotas_follow_weights():
    ps = programs(4, 30)
    weights = {"t0": 10.0, "t1": 1.0, "t2": 1.0, "t3": 1.0}
    pool = Pool(ps, task_weights=weights, scores=ensemble_scores(ps))
    for name in SAMPLERS:
        chosen = make_sampler(name).select(pool, 26)
        per = np.bincount(pool.task[np.isin(pool.program_ids, chosen)], minlength=4)
        assert per.tolist() == [20, 2, 2, 2], name
    # too small a budget for every task: the heaviest get pairs, never a lone program
    per = np.bincount(pool.task[np.isin(pool.program_ids,
                                        make_sampler("rdu").select(pool, 4))], minlength=4)
    assert per[0] == 2 and sorted(per[1:].tolist()) == [0, 0, 2]


def test_global_mode_gives_no_task_a_single_program(pool):
    for name in ("kcenter", "representative", "rdu", "uncertainty"):
        chosen = make_sampler(name, per_task=False).select(pool, 9)
        per = np.bincount(pool.task[np.isin(pool.program_ids, chosen)])
        assert 1 not in per.tolist(), (name, per)


def test_allocation_helpers():
    w, zero, big = np.array([1.0, 1.0, 2.0]), np.zeros(3, np.int64), np.full(3, 10)
    assert proportional(8, w, zero, big).tolist() == [2, 2, 4]
    assert proportional(10, w, zero, big).sum() == 10
    assert proportional(10, np.array([1.0, 9.0]), np.zeros(2), np.array([5, 3])).tolist() \
        == [5, 3]                                                       # caps bind
    assert proportional(6, np.array([10.0, 1, 1]), np.full(3, 2), big).tolist() == [2, 2, 2]
    q = allocate(7, np.array([5, 1, 5]), np.ones(3), np.zeros(3, np.int64), 0)
    assert q.sum() == 7 and q[1] == 1 and (q <= [5, 1, 5]).all()
    q = allocate(3, np.array([5, 5, 5]), np.array([3.0, 2.0, 1.0]), np.array([0, 1, 0]), 0)
    assert q.tolist() == [2, 1, 0]   # the task holding one program needs only one more
    assert within_task_percentile(np.array([3.0, 1, 2, 5]), np.array([0, 0, 0, 1])).tolist() \
        == [1.0, 0.0, 0.5, 0.5]


def test_feature_summary():
    ps = programs(1, 3)
    s = feature_summary(ps)
    first = ps.per_store[ps.store_offsets[0]:ps.store_offsets[1]]
    assert np.allclose(s[0, :164], first.mean(0)) and np.allclose(s[0, 164:328], first.max(0))
    assert s.shape == (3, 329)


def test_model_embedding_and_single_model_uncertainty(mlp):
    ps = programs()
    pool = Pool(ps)
    e = mlp.embed(ps)
    assert e.shape == (len(ps), 32) and np.isfinite(e).all()
    assert embed(pool, mlp).shape[0] == len(ps)
    u = disagreement(pool, mlp, seed=0)          # one model: perturbation passes
    assert u.shape == (len(ps),) and (u >= 0).all() and u.max() > 0
    assert np.array_equal(u, disagreement(pool, mlp, seed=0))
    for name in ("uncertainty", "rdu"):
        chosen = make_sampler(name).select(pool, 20, model=mlp, seed=1)
        assert len(set(chosen)) == 20
        assert chosen == make_sampler(name).select(pool, 20, model=mlp, seed=1)


def test_ensemble_uncertainty(mlp):
    ps = programs()
    other = make_model("tenset-mlp", device="cpu", epochs=1, hidden=32, seed=5).fit(
        synthetic_programs(8, 24, seed=4, **SMALL))
    pool = Pool(ps)
    u = disagreement(pool, [mlp, other])
    assert u.shape == (len(ps),) and u.max() > 0
    chosen = make_sampler("rdu").select(pool, 20, model=[mlp, other])
    assert len(set(chosen)) == 20
    # members that agree on every ranking (one is the other, rescaled): no disagreement
    s = ps.labels
    assert np.allclose(disagreement(Pool(ps, scores=np.stack([s, 3 * s + 1], 1)), None), 0)
