"""Workload zoo: real architectures at tiny inputs, extracted through the real TVM pipeline."""
from __future__ import annotations

import pytest

from tcl.config import Paths, TclError
from tcl.zoo import extract
from tcl.store.records import task_id_of
from tcl.zoo.extract import OP_CLASSES, build_zoo, load_networks, load_tasks, task_module
from tcl.zoo.networks import LONG_TAIL, NETWORKS, instance, zoo_instances

HOLDOUT = {"resnet18", "resnet50", "mobilenet_v2", "resnext50", "bert_tiny", "bert_base"}


def test_unknown_network_names_it_and_the_known_ones():
    with pytest.raises(TclError) as err:
        zoo_instances(["resnet18", "alexnet"])
    msg = str(err.value)
    assert "'alexnet'" in msg and "resnet18" in msg and "gpt2" in msg and "'resnet18'" not in msg


def test_instances_variants_and_holdout_flags():
    every = zoo_instances()
    assert len({i.key for i in every}) == len(every)
    built_in = {n for n, s in NETWORKS.items() if not s.long_tail}
    assert {i.network for i in every} == built_in and len(built_in) >= 11   # the default zoo
    for name in NETWORKS:
        assert len(zoo_instances([name])) >= 2, name
    held = {i.key for i in every if i.holdout}
    assert {i.network for i in every if i.holdout} == HOLDOUT
    assert all(i.batch == 1 for i in every if i.holdout)
    assert {f"{n}-b1-{128 if n.startswith('bert') else 224}" for n in HOLDOUT} <= held
    r = next(i for i in every if i.key == "resnet18-b4-224")
    assert (r.network, r.batch, r.input_shape, r.holdout) == ("resnet18", 4, "4x3x224x224", False)
    small = zoo_instances(["bert_tiny"], small=True)
    assert [i.key for i in small] == ["bert_tiny-b1-16", "bert_tiny-b2-16"]
    assert [i.holdout for i in small] == [True, False] and small[0].input_shape == "1x16"


def test_long_tail_families_are_eight_more_never_held_out():
    tail = zoo_instances(list(LONG_TAIL))
    assert len(LONG_TAIL) >= 8 and {i.family for i in tail} == set(LONG_TAIL)
    assert not any(i.holdout for i in tail)
    assert not {i.family for i in tail} & {i.family for i in zoo_instances()}
    dlrm = next(i for i in tail if i.key == "dlrm-b64-26")
    assert dlrm.input_shape == "64x13,64x26" and [t.shape for t in dlrm.example()] == [(64, 13), (64, 26)]


@pytest.mark.parametrize("name,params", [
    ("resnet18", 11.69e6), ("resnet50", 25.56e6), ("resnext50", 25.03e6),
    ("mobilenet_v2", 3.50e6), ("mobilenet_v3", 5.48e6), ("densenet121", 7.98e6),
    ("efficientnet_b0", 5.29e6)])
def test_architectures_match_published_parameter_counts(name, params):
    model = NETWORKS[name].build(224)
    assert sum(p.numel() for p in model.parameters()) == pytest.approx(params, rel=0.005)


@pytest.fixture(scope="module")
def zoo(tmp_path_factory):
    paths = Paths(tmp_path_factory.mktemp("zoo"))
    insts = [instance("resnet18", 1, 32), instance("resnet50", 1, 32)]
    per_instance, real = {}, extract.extract_tasks

    def recording(inst):  # build_zoo's own extraction, kept to compare with the tables
        per_instance[inst.key] = real(inst)
        return per_instance[inst.key]

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(extract, "extract_tasks", recording)
        tasks, nets = build_zoo(paths, instances=insts)
    return paths, per_instance, tasks, nets


def test_extraction_gives_weighted_classified_tasks(zoo):
    paths, per_instance, tasks, nets = zoo
    rows = per_instance["resnet18-b1-32"]
    assert len(rows) >= 10 and all(r["weight"] >= 1 for r in rows)
    classes = {r["op_class"] for r in rows}
    assert {"conv", "dense", "pool"} <= classes <= set(OP_CLASSES)
    conv = [r for r in rows if r["op_class"] == "conv"]
    assert all(r["flop"] > 0 for r in conv)
    assert sum(r["weight"] for r in conv) >= 16  # 20 convolutions, some of them identical
    back = task_module(rows[0]["workload_json"])
    assert task_id_of(back) == rows[0]["task_id"]


def test_tasks_are_deduplicated_across_instances(zoo):
    paths, per_instance, tasks, nets = zoo
    ids = [{r["task_id"] for r in rows} for rows in per_instance.values()]
    shared = ids[0] & ids[1]
    assert shared, "resnet18 and resnet50 share their stem convolution and max pool"
    assert tasks["task_id"].is_unique().all() and len(tasks) == len(ids[0] | ids[1])
    assert set(nets["task_id"]) <= set(tasks["task_id"])
    for key, rows in per_instance.items():  # every instance keeps its own weights
        got = dict(nets.filter(nets["network_key"] == key).select("task_id", "weight").iter_rows())
        assert got == {r["task_id"]: r["weight"] for r in rows}
    assert nets["holdout"].all()
    assert load_tasks(paths).equals(tasks) and load_networks(paths).equals(nets)


def test_build_zoo_is_incremental(zoo, monkeypatch, capsys):
    paths, _, tasks, nets = zoo

    def refuse(inst):
        raise AssertionError(f"{inst.key} extracted again")

    monkeypatch.setattr(extract, "extract_tasks", refuse)
    again = build_zoo(paths, instances=[instance("resnet18", 1, 32), instance("resnet50", 1, 32)])
    assert again[0].equals(tasks) and again[1].equals(nets)
    assert "already extracted" in capsys.readouterr().out
    monkeypatch.undo()

    more_tasks, more_nets = build_zoo(paths, instances=[instance("bert_tiny", 2, 16),
                                                       instance("resnet18", 1, 32)])
    assert "[1/1] bert_tiny-b2-16" in capsys.readouterr().out
    assert set(more_nets["network_key"]) == {"resnet18-b1-32", "resnet50-b1-32", "bert_tiny-b2-16"}
    bert = more_nets.filter(more_nets["network"] == "bert_tiny")
    assert not bert["holdout"].any()
    classes = set(more_tasks.filter(more_tasks["task_id"].is_in(bert["task_id"].to_list()))["op_class"])
    assert {"dense", "batch_matmul", "softmax", "norm", "injective"} <= classes


def test_class_quotas_cover_every_class_and_respect_sizes():
    counts = {"dense": 4, "conv": 100, "softmax": 1, "injective": 49}
    q = extract.class_quotas(counts, 20)
    assert sum(q.values()) == 20 and all(q[c] >= 1 for c in counts)
    assert q["softmax"] == 1 and q["conv"] > q["injective"] > q["dense"]
    assert q["conv"] < 20 * 100 / 154  # square-root shares: below the proportional share
    assert extract.class_quotas(counts, 2) == {"dense": 1, "conv": 1, "softmax": 0, "injective": 0}
    assert extract.class_quotas(counts, 1000) == counts  # never more than a class has


def test_capped_selection_is_stratified_heaviest_first_within_a_class(zoo):
    paths, _, tasks, nets = zoo
    keys = ["resnet18-b1-32", "resnet50-b1-32"]
    every = extract.select_tasks(paths, keys)
    assert len(every) == len(tasks) and every["holdout"].all()
    assert every["weight"].is_sorted(descending=True)
    assert every.head(1).equals(extract.select_tasks(paths, keys, max_holdout=1))
    n_classes = every["op_class"].n_unique()
    capped = extract.select_tasks(paths, keys, max_holdout=n_classes + 2)
    assert len(capped) == n_classes + 2 and capped["op_class"].n_unique() == n_classes
    for (cls,), group in capped.group_by(["op_class"]):  # each class: its heaviest tasks
        heaviest = every.filter(every["op_class"] == cls).head(len(group))
        assert set(group["task_id"]) == set(heaviest["task_id"])
