"""Resuming an interrupted tuning run, and what a run's output directory may already hold.

A run writes its parameters to ``run.json`` (``RUN_FILE``) before it tunes and each point of
its curve to ``curve.jsonl`` (``CURVE_FILE``) as it comes. Started again with the same
parameters and directory, an interrupted run resumes where it stopped: its measured rounds stay
in its database and the rest of the budget goes to the tasks it had not reached
(``resume_state``). What else a directory may hold, and what a new run does with it:
``prepare_out``.
"""
from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..config import Paths, TclError, read_text
from ..dataset import tune_source
from ..measure.msjson import RECORD_FILE, import_database
from ..tvm_compat import meta_schedule

RUN_FILE = "run.json"        # a run's parameters, written before it tunes: what a resume matches
CURVE_FILE = "curve.jsonl"   # the curve's points as they come, for a resumed run to continue


@dataclass
class ResumeState:
    """What an interrupted run in the same directory had done (``resume_state``): measured
    trials and best latency (s) per task (the network's task index), its curve and wall time."""

    trials: dict[int, int] = field(default_factory=dict)
    best: dict[int, float] = field(default_factory=dict)
    curve: list[dict] = field(default_factory=list)
    wall_s: float = 0.0

    @property
    def measured(self) -> int:
        return sum(self.trials.values())


def resume_state(out: Path, tasks) -> ResumeState:
    """The interrupted run's tuning records (its database, matched to ``tasks`` by the task
    module's structural hash, as MetaSchedule's database matches workloads) and curve file."""
    import tvm_ffi

    from ..online import run_latency   # lazy: MetaSchedule (~25 s)

    state = ResumeState()
    if (out / CURVE_FILE).is_file():
        state.curve = [json.loads(line) for line in (out / CURVE_FILE).read_text().splitlines()
                       if line.strip()]
        state.wall_s = state.curve[-1]["wall_s"] if state.curve else 0.0
    records = out / "database" / "database_tuning_record.json"
    if not records.is_file() or not records.stat().st_size:
        return state
    index = {tvm_ffi.structural_hash(t.dispatched[0]): i for i, t in enumerate(tasks)}
    db = meta_schedule().database.JSONDatabase(work_dir=str(out / "database"))
    for rec in db.get_all_tuning_records():
        i = index.get(tvm_ffi.structural_hash(rec.workload.mod))
        if i is None:
            raise TclError(f"{out}'s database holds a task that is not one of this network's: "
                           "not the run to resume (choose another --out)")
        state.trials[i] = state.trials.get(i, 0) + 1
        latency = run_latency(rec)
        if latency == latency:
            state.best[i] = min(state.best.get(i, np.inf), latency)
    return state


def check_target_kind(records: Path, device) -> None:
    """Refuse a run's tuning records (``records``) made for another target kind than
    ``device``'s, before TVM reads them: resumed, MetaSchedule took them as this run's (a kind
    this TVM lacks ended in an internal error, rocm's waited minutes for a GPU, cuda's were
    passed over without a word). A line that is not JSON is left to the reader, as before."""
    if not records.is_file():
        return
    want = device.target.get("kind")
    for n, line in enumerate(read_text(records, "tuning record file").splitlines(), 1):
        try:
            kind = json.loads(line)[1][2]["kind"]
        except (ValueError, LookupError, TypeError):
            continue
        if kind != want:
            raise TclError(f"{records}:{n} is a record for target kind {kind!r}, not "
                           f"{device.name}'s {want!r}: not this run's database (choose another "
                           "--out, or empty it)")


def prepare_out(paths: Paths, out: Path, device, run: dict, set_aside: bool) -> bool:
    """Whether the run resumes one interrupted in ``out``. A finished run there is refused. An
    interrupted one (no ``summary.json``) of the same parameters (``RUN_FILE``: network, device,
    model, update mode, seed, budget, search size and scheduler) is continued. One of this
    device with other parameters: with ``set_aside`` (the default directory, whose name holds
    network, device, model, update mode and seed, so a run with another budget or search meets
    it there) it gives its measurements to the store (source ``tune:<network>``) and is moved
    aside to ``<out>.interrupted-<n>``, and the new run starts afresh and says so; else (a
    directory the user named: ``--out``) it is refused, untouched, naming the parameters that
    differ. Any other directory (no run file: the user's own, whatever MetaSchedule log it
    holds; or another device's run) is refused, untouched."""
    if not out.exists() or not any(out.iterdir()):
        return False
    if (out / "summary.json").exists():
        raise TclError(f"{out} holds a finished tuning run: a run writes a fresh directory "
                       "(choose --out, or remove it)")
    try:
        recorded = json.loads((out / RUN_FILE).read_text())
    except (OSError, ValueError):
        recorded = None
    if not isinstance(recorded, dict) or not {"network", "device"} <= set(recorded):
        raise TclError(f"{out} is a directory that is not a tcl tune run (it has no {RUN_FILE} "
                       "naming a run's parameters), so it is neither resumed nor imported: "
                       "choose another --out, or empty it")
    if recorded == run:
        check_target_kind(out / "database" / RECORD_FILE, device)
        return True
    if recorded["device"] != run["device"]:
        raise TclError(f"{out} holds an interrupted tcl tune run for device "
                       f"{recorded['device']!r}, not {run['device']!r}: its measurements are "
                       "not this device's; choose another --out, or empty it")
    check_target_kind(out / "database" / RECORD_FILE, device)
    if not set_aside:
        differ = ", ".join(f"{k} {recorded.get(k)} there, {run.get(k)} here"
                           for k in list(run) + [k for k in recorded if k not in run]
                           if recorded.get(k) != run.get(k))
        raise TclError(f"{out} holds an interrupted tcl tune run of {run['device']} with other "
                       f"parameters ({differ}), so it is neither resumed nor replaced: give "
                       "another --out, or remove it (or run again with its parameters to "
                       "resume it)")
    added = 0
    db = out / "database"
    if (db / "database_tuning_record.json").is_file() and \
            (db / "database_tuning_record.json").stat().st_size > 0:
        added = import_database(paths, db, device,
                                source=tune_source(recorded["network"])).records
    n = 1
    while out.with_name(f"{out.name}.interrupted-{n}").exists():
        n += 1
    aside = out.with_name(f"{out.name}.interrupted-{n}")
    out.rename(aside)
    print(f"tune: {out} held an interrupted run; starting over, as its parameters are not "
          f"this run's (its {added} new measurements joined the store, its files are in "
          f"{aside})", file=sys.stderr)
    return False
