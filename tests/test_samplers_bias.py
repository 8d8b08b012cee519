"""The samplers of issue 23: performance-biased diversity (balto), typicality (typiclust), and
deploy-first allocation (``Pool.first_tasks``)."""
from dataclasses import replace

import numpy as np
import pytest

from tcl.config import TclError
from tcl.models.nn import synthetic_programs
from tcl.samplers import Pool, make_sampler
from tcl.samplers.tasks import allocate
from tcl.samplers.typiclust import pick_typical, typicality

SMALL = dict(stores=(1, 5), tokens=(4, 12))


def programs(n_groups=6, per_group=30, seed=0):
    ps = synthetic_programs(n_groups, per_group, seed=seed, **SMALL)
    return replace(ps, program_ids=np.char.add("p", ps.program_ids),
                   task_ids=np.char.add("t", ps.group.astype(str)))


@pytest.fixture(scope="module")
def pool():
    ps = programs()
    rng = np.random.default_rng(0)
    teacher = ps.labels + 0.05 * rng.standard_normal(len(ps))   # one column: its ranking
    return Pool(ps, scores=teacher)


def test_balto_first_pick_is_the_teachers_fastest_and_stays_in_its_top_share(pool):
    mean = pool.scores[:, 0]
    chosen = make_sampler("balto", top=0.25).select(pool, 0.2, seed=3)
    index = np.flatnonzero(np.isin(pool.program_ids, chosen))
    for t in range(pool.n_tasks):
        members = np.flatnonzero(pool.task == t)
        mine = np.intersect1d(members, index)
        ranked = members[np.argsort(-mean[members])]
        assert ranked[0] == pool.program_ids.tolist().index(
            [c for c in chosen if c in set(pool.program_ids[members])][0])
        # quota (6) <= the top quarter (8 of 30): every pick is predicted fast
        assert set(mine) <= set(ranked[:8])


def test_balto_beats_random_on_the_picks_true_speed(pool):
    label = dict(zip(pool.program_ids, pool.programs.labels))
    balto = np.mean([label[i] for i in make_sampler("balto").select(pool, 0.1, seed=1)])
    rand = np.mean([label[i] for i in make_sampler("random").select(pool, 0.1, seed=1)])
    assert balto > rand


def test_balto_diversity_changes_the_later_picks(pool):
    fast = make_sampler("balto", d=0.0).select(pool, 0.3, seed=0)
    spread = make_sampler("balto", d=4.0).select(pool, 0.3, seed=0)
    assert set(fast) != set(spread)


@pytest.mark.parametrize("kw", [dict(p=0), dict(p=-1), dict(top=0), dict(top=1.5),
                                dict(p=float("nan")), dict(top=True)])
def test_balto_bad_parameters(kw):
    with pytest.raises(TclError, match="balto"):
        make_sampler("balto", **kw)


def test_balto_without_a_teacher_says_so():
    with pytest.raises(TclError, match="needs a cost model"):
        make_sampler("balto").select(Pool(programs(2, 10)), 4)


def test_typicality_prefers_the_centre():
    z = np.array([[0.0, 0.0], [0.1, 0.0], [-0.1, 0.0], [0.0, 0.1], [2.0, 2.0]])
    typ = typicality(z, 3)
    assert typ.argmax() == 0 and typ.argmin() == 4
    assert np.isinf(typicality(z[:1], 3)).all()


def test_typiclust_takes_the_centre_of_each_cluster():
    ring = lambda m: np.stack([np.cos(np.arange(m) * 2 * np.pi / m),  # noqa: E731
                               np.sin(np.arange(m) * 2 * np.pi / m)], 1)
    a = np.vstack([[0, 0], ring(9)])
    b = np.vstack([[10, 10], 10 + ring(5)])
    z = np.vstack([a, b])
    picks = pick_typical(z, np.zeros(len(z), bool), 2, 20, seed=0)
    assert sorted(picks.tolist()) == [0, 10]          # the centre of each cluster
    assert picks[0] == 0                              # the larger cluster first
    taken = np.zeros(len(z), bool)
    taken[3] = True                                   # cluster a is covered: b's centre
    assert pick_typical(z, taken, 1, 20, seed=0).tolist() == [10]


def test_typiclust_more_picks_than_clusters_and_duplicates():
    z = np.zeros((6, 2))                              # one point six times
    picks = pick_typical(z, np.zeros(6, bool), 4, 20, seed=0)
    assert len(set(picks.tolist())) == 4


def test_typiclust_is_seeded(pool):
    s = make_sampler("typiclust")
    assert s.select(pool, 0.2, seed=4) == s.select(pool, 0.2, seed=4)
    with pytest.raises(TclError, match="typiclust"):
        make_sampler("typiclust", neighbours=0)


def test_allocate_serves_the_first_tasks_first():
    avail, w, have = np.array([10, 10, 3, 3]), np.ones(4), np.zeros(4, np.int64)
    first = np.array([False, False, True, True])
    assert allocate(4, avail, w, have, 0, first).tolist() == [0, 0, 2, 2]
    q = allocate(10, avail, w, have, 0, first)        # first tasks full (3 + 3), rest after
    assert q[2:].tolist() == [3, 3] and q.sum() == 10 and (q[:2] >= 2).all()


@pytest.mark.parametrize("name", ["random", "balto", "kcenter", "typiclust"])
def test_deploy_first_pool(pool, name):
    first = ["t4", "t5"]
    deploy = replace(pool, first_tasks=first)   # (dataclasses.replace re-runs the checks)
    chosen = make_sampler(name).select(deploy, 40, seed=0)
    tasks = {pool.programs.task_ids[pool.program_ids.tolist().index(c)] for c in chosen}
    assert tasks == set(first)
    with pytest.raises(TclError, match="per-task"):
        make_sampler(name, per_task=False).select(deploy, 10)
    with pytest.raises(TclError, match="not one string"):
        Pool(pool.programs, first_tasks="t4")


def test_deploy_first_changes_the_run_id_only_when_set():
    import hashlib
    import json

    from tcl.measure.active import Selection

    plain, first = Selection("balto"), Selection("balto", first_tasks=("t1",))
    key = json.dumps(["d", "balto", 0.1, 1, {}, "tenset-mlp", 0, 32, ["t0", "t1"]],
                     sort_keys=True, default=str)   # the key before deploy-first existed
    assert plain.run_id("d", 32, ["t1", "t0"]).endswith(
        hashlib.sha256(key.encode()).hexdigest()[:10])
    assert first.run_id("d", 32, ["t0", "t1"]) != plain.run_id("d", 32, ["t0", "t1"])


def test_least_per_task(pool):
    avail, w, have = np.full(6, 30), np.ones(6), np.zeros(6, np.int64)
    q = allocate(12, avail, w, have, 0, least=4)
    assert sorted(q.tolist()) == [0, 0, 0, 4, 4, 4]
    chosen = make_sampler("random", least=4).select(pool, 12, seed=0)
    _, per = np.unique([c for c in pool.programs.task_ids[np.isin(pool.program_ids, chosen)]],
                       return_counts=True)
    assert sorted(per.tolist()) == [4, 4, 4]
    with pytest.raises(TclError, match="least"):
        make_sampler("random", least=1)
