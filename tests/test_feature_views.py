"""Feature views (issue 27, point 3): the size-normalised transform is exact on hand-made rows,
and a model saved with a view predicts the same after load."""
import numpy as np
import pytest
import torch

from tcl.config import TclError
from tcl.features import (LOOP_PRODUCT_COLUMN, SIZE_COLUMNS, feature_view, size_normalised,
                          view_width)
from tcl.models.base import PER_STORE_WIDTH
from tcl.models.mlp import TenSetMLP
from tcl.models.nn import synthetic_programs
from tcl.models.xgb import XGBModel

torch.set_num_threads(1)


def test_size_columns_are_the_counts_of_per_store_feature():
    cols = set(SIZE_COLUMNS.tolist())
    assert len(cols) == len(SIZE_COLUMNS) == 59
    assert set(range(16)) <= cols                      # arithmetic-op counts
    for b in range(5):                                 # per buffer: bytes .. unique lines, / reuse
        base = 57 + 18 * b
        assert {base + k for k in (3, 4, 5, 6, 13, 14, 15, 16)} <= cols
        assert not {base + k for k in (0, 1, 2, 7, 8, 9, 10, 11, 12, 17)} & cols
    assert {158, 159, LOOP_PRODUCT_COLUMN} <= cols
    # vectorize/unroll/parallel, GPU, arithmetic intensity, alloc size and its ratio, loops, unroll
    assert not set(range(16, 57)) & cols and not set(range(147, 158)) & cols
    assert not {160, 162, 163} & cols


def test_size_normalised_is_exact_on_hand_made_rows():
    rng = np.random.default_rng(0)
    rows = rng.uniform(0, 30, (3, PER_STORE_WIDTH)).astype(np.float32)
    rows[:, LOOP_PRODUCT_COLUMN] = [10.0, 12.5, 5.0]
    offsets = np.array([0, 2, 2, 3])          # program 0: two stores, 1: none, 2: one
    out = size_normalised(rows, offsets)
    expect = rows.copy()
    expect[:2, SIZE_COLUMNS] -= np.float32(12.5)   # program 0's largest loop product
    expect[2, SIZE_COLUMNS] -= np.float32(5.0)
    np.testing.assert_array_equal(out, expect)
    other = np.setdiff1d(np.arange(PER_STORE_WIDTH), SIZE_COLUMNS)
    np.testing.assert_array_equal(out[:, other], rows[:, other])     # flags, ratios untouched
    assert out[0, LOOP_PRODUCT_COLUMN] == -2.5 and out[1, LOOP_PRODUCT_COLUMN] == 0.0
    np.testing.assert_array_equal(rows[:, LOOP_PRODUCT_COLUMN], [10.0, 12.5, 5.0])  # no in-place

    both = feature_view(rows, offsets, "both")
    assert both.shape == (3, view_width("both")) == (3, PER_STORE_WIDTH + 59)
    np.testing.assert_array_equal(both[:, :PER_STORE_WIDTH], rows)
    np.testing.assert_array_equal(both[:, PER_STORE_WIDTH:], expect[:, SIZE_COLUMNS])
    assert feature_view(rows, offsets, "raw") is rows
    np.testing.assert_array_equal(feature_view(rows, offsets, "size"), expect)
    empty = size_normalised(np.zeros((0, PER_STORE_WIDTH), np.float32), np.zeros(4, np.int64))
    assert empty.shape == (0, PER_STORE_WIDTH)
    with pytest.raises(TclError, match="features 'flops' is unknown"):
        feature_view(rows, offsets, "flops")


def test_a_size_normalised_view_is_the_same_for_a_scaled_copy_of_a_task():
    """What the view is for: a task 2^k times larger (counts and loop product shifted by k in
    log space) reads the same counts."""
    rng = np.random.default_rng(1)
    rows = rng.uniform(1, 20, (4, PER_STORE_WIDTH)).astype(np.float32)
    offsets = np.array([0, 4])
    larger = rows.copy()
    larger[:, SIZE_COLUMNS] += 6.0
    np.testing.assert_allclose(size_normalised(larger, offsets), size_normalised(rows, offsets),
                               atol=1e-5)


@pytest.fixture(scope="module")
def data():
    small = dict(tokens=(4, 8), stores=(2, 5), noise=0.05)
    return synthetic_programs(12, 16, seed=0, **small), synthetic_programs(4, 16, seed=1, **small)


@pytest.mark.parametrize("view", ["size", "both"])
def test_xgb_saved_with_a_view_predicts_the_same_after_load(data, tmp_path, view):
    model = XGBModel(features=view, num_boost_round=30, nthread=1).fit(data[0])
    assert model.booster.num_features() == view_width(view)
    model.save(tmp_path / "m.json")
    again = XGBModel.load(tmp_path / "m.json")
    assert again.params["features"] == view
    np.testing.assert_array_equal(again.predict(data[1]), model.predict(data[1]))


@pytest.mark.parametrize("view", ["size", "both"])
def test_tenset_mlp_saved_with_a_view_predicts_the_same_after_load(data, tmp_path, view):
    model = TenSetMLP(device="cpu", features=view, hidden=16, epochs=2, batch_size=64)
    model.fit(data[0], data[1])
    assert model.net.store_scale.shape == (view_width(view),)
    model.save(tmp_path / "m.pt")
    again = TenSetMLP.load(tmp_path / "m.pt", device="cpu")
    assert again.config["features"] == view
    np.testing.assert_array_equal(again.predict(data[1]), model.predict(data[1]))


def test_a_batch_of_any_programs_reads_the_rows_of_the_whole_set_view(data):
    """The net applies the view per batch (continual training batches through it too): a
    program's size comes from all its stores, so batches and the whole set agree."""
    ps = data[1]
    model = TenSetMLP(device="cpu", features="size", hidden=8)
    model.net.max_stores = 2                      # truncated programs still use every store
    index = np.array([5, 0, 17])
    b = model.net.batch(ps, index)
    whole = feature_view(ps.per_store, ps.store_offsets, "size")
    rows = np.concatenate([whole[ps.store_offsets[i]:ps.store_offsets[i] + 2] for i in index])
    np.testing.assert_array_equal(b.stores.numpy(), rows)   # store_scale is 1 before fitting


def test_unknown_view_is_refused_by_both_kinds():
    with pytest.raises(TclError, match="xgb features 'tiny' is unknown"):
        XGBModel(features="tiny")
    with pytest.raises(TclError, match="features must be one of"):
        TenSetMLP(device="cpu", features="tiny")
