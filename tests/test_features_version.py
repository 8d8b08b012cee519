"""Features are computed once per program and featurizer version (issue 53, point 2): they are
shipped with the records, so the version must say exactly what computed them."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import polars as pl

from conftest import matmul_task, write_tasks
from tcl.config import Paths
from tcl.features import (FEATURES_VERSION, current_features, featurize, features_version,
                          load_features, program_features)
from tcl.sampling import ensure_candidates
from tcl.zoo.extract import load_tasks

REPO_DATA = Paths(Path(__file__).resolve().parent.parent / "data")
# A depthwise conv task of the committed zoo and its first four committed candidates.
PINNED_TASK = "00243138d1b1f06e"
# sha256 (first 16 hex) of their per-store rows and tokens as float32, by featurizer version.
PINNED = {1: "e359c7a38a9b961b"}


def test_the_features_of_fixed_programs_are_what_this_version_computed():
    """Fails when the featurizer's output changes: bump FEATURES_VERSION (the shipped features
    in data/features are then computed again) and pin the new digest here."""
    row = load_tasks(REPO_DATA).filter(pl.col("task_id") == PINNED_TASK).row(0, named=True)
    cands = pl.read_parquet(REPO_DATA.candidates_file(PINNED_TASK)).sort("program_id").head(4)
    frame = program_features(PINNED_TASK, row["workload_json"],
                             cands.select("program_id", "trace_json"))
    digest = hashlib.sha256()
    for column in ("per_store", "tokens"):
        for values in frame[column]:
            digest.update(np.asarray(values, np.float32).tobytes())
    assert digest.hexdigest()[:16] == PINNED[FEATURES_VERSION], (
        "the featurizer's output changed: bump tcl.features.FEATURES_VERSION and pin it here")


def test_the_shipped_features_are_of_this_version():
    """A fresh clone computes none of them: the committed files are this featurizer's."""
    f = REPO_DATA.features_version_file
    assert f.exists() and json.loads(f.read_text()) == features_version()


def test_features_of_another_version_are_computed_again(paths):
    task = matmul_task(64)
    write_tasks(paths, [task])
    ensure_candidates(paths, task["task_id"], task["workload_json"], 3)
    assert featurize(paths, progress=False) == 3
    assert featurize(paths, progress=False) == 0            # cached: nothing new
    first = load_features(paths, [task["task_id"]])
    stale = {**features_version(), "features": FEATURES_VERSION - 1}
    paths.features_version_file.write_text(json.dumps(stale))
    said = []
    assert not current_features(paths, say=said.append)
    assert said and "computing them again" in said[0]
    assert featurize(paths, progress=False) == 3            # every program again
    assert json.loads(paths.features_version_file.read_text()) == features_version()
    again = load_features(paths, [task["task_id"]])
    assert again.sort("program_id").equals(first.sort("program_id"))


def test_cached_features_without_a_version_are_not_trusted(paths):
    task = matmul_task(64)
    write_tasks(paths, [task])
    ensure_candidates(paths, task["task_id"], task["workload_json"], 2)
    featurize(paths, progress=False)
    paths.features_version_file.unlink()
    assert featurize(paths, progress=False) == 2
