"""Hand-computed metric examples (the conventions are in tcl/metrics.py's docstring)."""
import math

import numpy as np
import polars as pl
import pytest

from tcl import metrics
from tcl.config import TclError

# Task A: 3 programs; task B: one program; task C: two programs with tied scores.
TASKS = np.array(["A", "A", "A", "B", "C", "C"])
LAT = np.array([2.0, 1.0, 4.0, 3.0, 1.0, 2.0])
SCORES = np.array([0.9, 0.1, 0.5, 0.0, 0.5, 0.5])
NETWORKS = pl.DataFrame({"network_key": ["n1", "n1", "n2", "n2"],
                         "task_id": ["A", "B", "B", "C"], "weight": [2, 1, 1, 3]})


def test_labels_min_over_latency_and_invalid_zero():
    got = metrics.labels(LAT, TASKS)
    np.testing.assert_allclose(got, [0.5, 1.0, 0.25, 1.0, 1.0, 0.5])
    bad = metrics.labels([np.nan, 2.0, np.inf, -1.0, 4.0], [0, 0, 0, 0, 0])
    np.testing.assert_allclose(bad, [0, 1, 0, 0, 0.5])
    assert metrics.labels([np.nan], [7]).tolist() == [0.0]  # no valid latency at all
    assert len(metrics.labels([], [])) == 0


def test_a_failed_program_labels_below_every_running_program_of_its_task():
    # Task 0: a failure (NaN: timeout / run / build error) beside a program 1000x slower than
    # the best; task 1: only failures. Every failure is below every running program of its task.
    lat = np.array([1.0, 1000.0, np.nan, np.inf, 5.0, np.nan, np.nan])
    grp = np.array([0, 0, 0, 0, 1, 2, 2])
    y = metrics.labels(lat, grp)
    fail = metrics.failed(y)
    assert fail.tolist() == [False, False, True, True, False, True, True]
    assert (y[fail] == metrics.FAILED_LABEL).all() and (y[~fail] > metrics.FAILED_LABEL).all()
    for g in np.unique(grp):
        ran, bad = y[(grp == g) & ~fail], y[(grp == g) & fail]
        assert not len(ran) or not len(bad) or bad.max() < ran.min()


def test_failed_pick_share_counts_tasks_whose_top1_fails():
    # A: top-1 (score 0.9) failed, top-5 runs; B: top-1 runs; C: only failures: left out.
    scores = [0.9, 0.1, 0.5, 0.2, 0.7]
    lat = [np.nan, 1.0, 2.0, np.nan, np.nan]
    per_task = metrics.task_metrics(scores, lat, ["A", "A", "B", "C", "C"], (1, 5))
    assert per_task["task_id"].to_list() == ["A", "B"]
    assert metrics.failed_pick_share(per_task, 1) == 0.5
    assert metrics.failed_pick_share(per_task, 5) == 0.0
    assert metrics.failed_pick_share(per_task.head(0)) is None
    with pytest.raises(TclError, match="pick2"):
        metrics.failed_pick_share(per_task, 2)


def test_labels_rejects_mismatched_lengths():
    with pytest.raises(TclError, match="differ in length"):
        metrics.labels([1.0, 2.0], [0])


def test_topk_score_tenset_definition():
    top1 = metrics.topk_score(NETWORKS, SCORES, LAT, 1, task_ids=TASKS)
    # n1: A picks program 0 (lat 2, best 1): 2*1 / 2*2; B has one program, which any ranking
    # picks: no top-1 to score (left out, not counted as 1)
    # n2: B left out, C tie -> input order picks lat 1 (best): 1
    assert top1["network_key"].to_list() == ["n1", "n2"]
    np.testing.assert_allclose(top1["top1"].to_numpy(), [0.5, 1.0])
    # no task has more than 5 programs: top-5 is n/a (None), not a trivial 1.0
    top5 = metrics.topk_score(NETWORKS, SCORES, LAT, 5, task_ids=TASKS)
    assert top5["top5"].to_list() == [None, None]
    per_task = metrics.task_scores(metrics.task_metrics(SCORES, LAT, TASKS, (1, 5)), (1, 5))
    assert per_task.filter(pl.col("task_id") == "B")["top1"].to_list() == [None]
    assert per_task["top5"].null_count() == len(per_task)
    assert top1["n_tasks"].to_list() == [2, 2] and top1["tasks_missing"].to_list() == [0, 0]


def test_topk_ties_keep_input_order():
    # Same tie in task C, the slower program first: top-1 picks it (lat 2 vs best 1).
    got = metrics.topk_score(NETWORKS.filter(pl.col("task_id") == "C"),
                             [0.5, 0.5], [2.0, 1.0], 1, task_ids=["C", "C"])
    assert got["top1"].to_list() == [0.5]


def test_topk_invalid_pick_and_unmeasured_task():
    # Top-scored program failed: the pick is inf and the network scores 0 on that task.
    net = pl.DataFrame({"network_key": ["n"] * 2, "task_id": ["D", "E"], "weight": [1, 1]})
    got = metrics.topk_score(net, [1.0, 0.0, 5.0], [np.nan, 2.0, np.nan], 1,
                             task_ids=["D", "D", "E"])
    assert got["top1"].to_list() == [0.0]
    assert got["n_tasks"].to_list() == [1] and got["tasks_missing"].to_list() == [1]
    top2 = metrics.topk_score(net, [1.0, 0.0, 5.0], [np.nan, 2.0, np.nan], 2,
                              task_ids=["D", "D", "E"])
    assert top2["top2"].to_list() == [None]     # D's 2 programs: its top-2 is both of them


def test_network_without_any_valid_task_has_no_score():
    # Network m's only task failed everywhere: null (not NaN), so a mean over networks skips it.
    net = pl.DataFrame({"network_key": ["m", "n"], "task_id": ["E", "D"], "weight": [1, 1]})
    got = metrics.topk_score(net, [1.0, 0.0, 5.0], [np.nan, 2.0, np.nan], 1,
                             task_ids=["D", "D", "E"])
    assert got["top1"].to_list() == [None, 0.0]
    assert got["n_tasks"].to_list() == [0, 1] and got["tasks_missing"].to_list() == [1, 0]
    assert got["top1"].mean() == 0.0


def test_pairwise_accuracy_with_single_program_and_ties():
    # A: 3 pairs, 1 right (0 vs 2); B: no pair; C: 1 tied pair = 0.5 -> 1.5 / 4
    assert metrics.pairwise_accuracy(SCORES, metrics.labels(LAT, TASKS), TASKS) == 0.375
    # Equal labels are not compared; a single program has no pair.
    assert math.isnan(metrics.pairwise_accuracy([1.0, 2.0], [0.5, 0.5], [0, 0]))
    assert math.isnan(metrics.pairwise_accuracy([1.0], [1.0], [0]))
    # Pairs across groups never count.
    assert math.isnan(metrics.pairwise_accuracy([0.0, 1.0], [1.0, 0.5], [0, 1]))
    assert metrics.pairwise_accuracy([0.0, 1.0, 3.0], [0.2, 0.5, 1.0], [0, 0, 0]) == 1.0


def test_pairwise_large_group_chunks_match_bruteforce():
    rng = np.random.default_rng(0)
    n = 2500  # over one broadcast chunk
    s, y = rng.normal(size=n), rng.integers(0, 20, n).astype(float)
    s[:100] = 0.0  # some ties
    i, j = np.triu_indices(n, 1)
    d = np.sign(y[i] - y[j])
    m = d != 0
    agree = np.sign(s[i] - s[j])[m] * d[m]
    expect = ((agree > 0).sum() + 0.5 * (agree == 0).sum()) / m.sum()
    assert metrics.pairwise_accuracy(s, y, np.zeros(n)) == pytest.approx(expect)


def test_per_class():
    tasks = pl.DataFrame({"task_id": ["A", "B", "C"], "op_class": ["conv", "dense", "dense"]})
    got = metrics.per_class(tasks, SCORES, LAT, TASKS, ks=(1,))
    assert got["op_class"].to_list() == ["conv", "dense"]
    np.testing.assert_allclose(got["top1"].to_numpy(), [0.5, 1.0])  # conv: 1/2; dense: (3+1)/(3+1)
    np.testing.assert_allclose(got["pairwise"].to_numpy(), [1 / 3, 0.5])
    assert got["n_tasks"].to_list() == [1, 2]


def test_forgetting():
    assert metrics.forgetting(0.9, 0.7) == pytest.approx(0.2)
    before = pl.DataFrame({"device": ["a", "b"], "top1": [0.9, 0.8]})
    after = pl.DataFrame({"device": ["a", "b"], "top1": [0.7, 0.85]})
    got = metrics.forgetting(before, after)
    np.testing.assert_allclose(got["forgetting"].to_numpy(), [0.2, -0.05])


def test_record_labels_from_records():
    records = pl.DataFrame({
        "device": ["d", "d", "d", "e"], "task_id": ["t", "t", "t", "t"],
        "latencies": [[1.0, 3.0], [4.0], [], [8.0]],
        "status": ["ok", "ok", "run_error", "ok"]})
    got = metrics.record_labels(records)
    assert got["latency"].to_list() == [2.0, 4.0, None, 8.0]
    np.testing.assert_allclose(got["label"].to_numpy(), [1.0, 0.5, 0.0, 1.0])


def test_evaluate_and_report(tmp_path):
    """The harness on synthetic data: oracle scores are perfect, per device and per class."""
    import json

    from tcl.evaluate import evaluate, synthetic_data, write_report

    programs, lat, nets, tasks = synthetic_data(n_tasks=6, programs_per_task=12, n_networks=3,
                                                n_holdout=2, seed=3)   # sharing tasks
    oracle = -np.nan_to_num(lat["latency"].to_numpy(), nan=np.inf)
    two = pl.concat([lat.with_columns(pl.lit(d).alias("device")) for d in ("a", "b")])
    frame = evaluate({"oracle": oracle, "constant": np.zeros(len(programs))}, programs, two,
                     nets, tasks)
    assert set(frame["scope"]) == {"network", "mean", "op_class"}
    assert set(frame["device"]) == {"a", "b"}
    best = frame.filter(pl.col("model") == "oracle")
    np.testing.assert_allclose(best["top1"].to_numpy(), 1.0)
    np.testing.assert_allclose(best["pairwise"].to_numpy(), 1.0)
    held = set(nets.filter(pl.col("holdout"))["task_id"]) & set(lat["task_id"])
    means = frame.filter(pl.col("scope") == "mean")
    assert means["n_tasks"].to_list() == [len(held)] * 4     # distinct tasks, not per network
    const = frame.filter((pl.col("model") == "constant") & (pl.col("scope") == "mean"))
    np.testing.assert_allclose(const["pairwise"].to_numpy(), 0.5)
    files = write_report(frame, tmp_path)
    assert "| device |" in files["markdown"].read_text()
    doc = json.loads(files["metrics"].read_text())
    assert doc["a"]["oracle"]["mean"]["top1"] == pytest.approx(1.0)
    assert files["plot"].stat().st_size > 1000
    with pytest.raises(TclError, match="shape"):
        evaluate({"bad": np.zeros(3)}, programs, lat, nets, tasks)
