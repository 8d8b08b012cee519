"""Active collection: a sampler picks part of the pool and only the picks are measured; rounds,
the selection record, dry runs, and an interrupted run that resumes without selecting twice."""
import os
import signal
import subprocess
import time

import polars as pl
import pytest

from conftest import matmul_task, write_tasks
from tcl.config import TclError
from tcl.store.devices import BUILTIN_DEVICES
from tcl.measure.active import Selection, plan_active, select_and_measure
from tcl.store.catalog import query
from tcl.store.records import RecordStore

pytestmark = pytest.mark.slow
DEVICE = BUILTIN_DEVICES["cpu-avx2"]


@pytest.fixture
def tasks(paths):
    frame = write_tasks(paths, [matmul_task(32), matmul_task(48)])
    return frame.with_columns(weight=pl.Series([3, 1]))


def test_rounds_measure_only_the_picks_and_say_who_chose_them(paths, tasks):
    selection = Selection("rdu", 0.5, rounds=2, options={"u": 0.0},
                          round_hyper={"epochs": 2, "batch_size": 64})
    planned = plan_active(paths, DEVICE, tasks, 6, selection)
    assert (planned.pool, planned.budget, planned.per_round) == (12, 6, [3, 3])
    assert planned.todo == 6
    assert "pool 12 unmeasured candidates" in planned.describe()
    assert not RecordStore(paths, warn=None).files()   # planning measures nothing
    stats = select_and_measure(paths, DEVICE, tasks, 6, selection, progress=False,
                               say=lambda _: None)
    assert [r["selected"] for r in stats.rounds] == [3, 3]
    joined = query(paths, """
        select s.round, s.model, count(*) n, count(r.record_id) measured
        from selections s left join records r using (device, program_id)
        group by all order by 1""")
    assert joined["n"].to_list() == [3, 3] and joined["measured"].to_list() == [3, 3]
    assert joined["model"].to_list() == ["none", "tenset-mlp@round1"]
    assert query(paths, "select count(*) n from records")["n"][0] == 6   # nothing else
    # The same run again: its rounds are stored, so nothing is selected or measured anew, and
    # its plan (an add-device dry run's estimate) says so (it once counted the whole budget).
    done = plan_active(paths, DEVICE, tasks, 6, selection)
    assert (done.budget, done.selected, done.todo, done.eta_secs) == (6, 6, 0, 0)
    again = select_and_measure(paths, DEVICE, tasks, 6, selection, progress=False,
                               say=lambda _: None)
    assert again.collect.measured == 0
    assert query(paths, "select count(*) n from selections")["n"][0] == 6


def test_same_seed_same_selection_and_uncertainty_needs_a_model(paths, tasks, tmp_path):
    from tcl.config import Paths

    picks = []
    for root in (paths, Paths(tmp_path / "other")):
        write_tasks(root, tasks.drop("weight").to_dicts())
        planned = plan_active(root, DEVICE, tasks, 6, Selection("kcenter", 4))
        assert planned.budget == 4
        from tcl.measure.active import _pool
        from tcl.samplers import Pool, make_sampler

        pool, _ = _pool(root, DEVICE, tasks, 6, 0)
        picks.append(make_sampler("kcenter").select(Pool(pool), 4, seed=0))
    assert picks[0] == picks[1]
    with pytest.raises(TclError, match="model"):
        select_and_measure(paths, DEVICE, tasks, 6, Selection("uncertainty", 2),
                           progress=False, say=lambda _: None)


def test_a_retired_selection_is_measured_again_and_nothing_else(paths, tasks):
    """`tcl retire` takes a selection's records out (measured under load); `measure_selected`
    (`tcl collect --selected`) measures exactly those programs again, so the device's model can
    be made again from its subset."""
    from datetime import timedelta

    from tcl.measure.active import measure_selected
    from tcl.store.records import now_utc

    select_and_measure(paths, DEVICE, tasks, 6, Selection("random", 4), progress=False,
                       say=lambda _: None)
    picked = set(query(paths, "select program_id from selections")["program_id"])
    RecordStore(paths).retire(DEVICE.name, now_utc() + timedelta(seconds=1), "under load")
    assert query(paths, "select count(*) n from records")["n"][0] == 0
    # the plan counts the retired picks as still to measure (the run's budget is spent)
    assert plan_active(paths, DEVICE, tasks, 6, Selection("random", 4)).todo == 4
    got = measure_selected(paths, DEVICE, tasks, progress=False)
    assert got.measured == 4
    assert set(query(paths, "select program_id from records")["program_id"]) == picked
    assert measure_selected(paths, DEVICE, tasks, progress=False).measured == 0   # resumable
    with pytest.raises(TclError, match="nothing was selected for device 'cpu-avx2-1c'"):
        measure_selected(paths, BUILTIN_DEVICES["cpu-avx2-1c"], tasks, progress=False)
