"""Candidate programs from a task's MetaSchedule design space, sampled without measuring.

Half of a task's candidates are random samples of the design space (ReplayTrace); the other half
are chains of MetaSchedule mutations (tile sizes, parallel extent, unroll, compute location) of
those samples, replayed with the postprocessors so every candidate is a valid, buildable program.
Candidates are device-independent: they are sampled once per task with the canonical CPU target
and every CPU profile measures the same traces, so devices can be compared program by program.
"""
from __future__ import annotations

import json
import random

import polars as pl

from .config import Paths, TclError
from .store.locks import locked
from .store.records import program_id, read_parquet, write_parquet_atomic
from .store.schemas import CANDIDATE_SCHEMA
from .store.traces import trace_to_json
from .tvm_compat import meta_schedule

SAMPLING_TARGET = {"kind": "llvm", "num-cores": 2}
# At 1-2 records/s one task's 4096 programs are about an hour of measurement; more is a typo.
MAX_PROGRAMS_PER_TASK = 4096
_CHUNK = 256          # random traces drawn per call: memory stays bounded on any request
_STALE_TRIES = 64     # consecutive draws that add nothing new: the design space is used up


def tune_context(mod, target: dict | None = None, seed: int = 0, task_name: str = "main"):
    """A TuneContext over ``mod`` whose search strategy replays random design-space traces."""
    import tvm

    ms = meta_schedule()
    ctx = ms.TuneContext(mod=mod, target=tvm.target.Target(target or SAMPLING_TARGET),
                         space_generator="post-order-apply",
                         search_strategy=ms.search_strategy.ReplayTrace(),
                         task_name=task_name, rand_state=seed, num_threads=1)
    return ctx


def _random_traces(ctx, n: int) -> list:
    spaces = ctx.generate_design_space()
    ctx.pre_tuning(max_trials=n, num_trials_per_iter=n, design_spaces=spaces,
                   database=None, cost_model=None)
    cands = ctx.search_strategy.generate_measure_candidates() or []
    ctx.post_tuning()
    return [c.sch.trace for c in cands]


def _mutator_apply(mutator, trace, seed: int):
    from tvm.s_tir.meta_schedule.mutator.mutator import _ffi_api

    return _ffi_api.MutatorApply(mutator, trace, seed)


def _mutate(ctx, mod, trace, rng: random.Random, steps: int):
    """Apply ``steps`` random MetaSchedule mutations; None when every try was invalid."""
    from tvm import s_tir

    mutators = list(ctx.space_generator.mutator_probs.items())
    if not mutators:
        return None
    for _ in range(steps):
        mutator = rng.choices([m for m, _ in mutators], weights=[p for _, p in mutators])[0]
        # MutatorApply with an explicit seed: Mutator.apply draws from an unseeded state.
        new = _mutator_apply(mutator, trace, rng.randrange(1, 1 << 30))
        if new is None:
            continue
        sch = s_tir.Schedule(mod, seed=rng.randrange(1 << 30))
        try:
            new.apply_to_schedule(sch, remove_postproc=True)
            if not all(p.apply(sch) for p in ctx.space_generator.postprocs):
                continue
        except Exception:  # an invalid mutation (e.g. tile no longer divides): try another
            continue
        trace = sch.trace
    return trace


def sample_programs(mod, n: int, seed: int = 0, target: dict | None = None,
                    exclude: set[str] = frozenset()) -> list[tuple[str, str]]:
    """Up to ``n`` distinct (trace_json, origin) candidates for one task, not in ``exclude``.

    Small design spaces (injective tasks) may have fewer than ``n`` distinct programs: random
    draws come in chunks and stop once a chunk adds nothing new, mutations once
    ``_STALE_TRIES`` in a row add nothing, so a request far above the space ends quickly.
    """
    if not 1 <= n <= MAX_PROGRAMS_PER_TASK:
        raise TclError(f"programs per task must lie in [1, {MAX_PROGRAMS_PER_TASK}], got {n}")
    ctx = tune_context(mod, target, seed)
    rng = random.Random(seed)
    seen, out = set(exclude), []

    def take(trace, origin: str) -> bool:
        text = trace_to_json(trace)
        if text not in seen and len(out) < n:
            seen.add(text)
            out.append((text, origin))
            return True
        return False

    def draw_random(want: int) -> list:
        drawn = []
        while len(out) < n and want > 0:
            chunk = _random_traces(ctx, min(_CHUNK, want))
            want -= len(chunk)
            added = [take(t, "random") for t in chunk]
            drawn += chunk  # duplicates too: mutations start from any draw, as they always did
            if not any(added):
                break
        return drawn

    randoms = draw_random(max(1, (n + 1) // 2))
    tries = stale = 0
    while randoms and len(out) < n and tries < 4 * n and stale < _STALE_TRIES:
        tries += 1
        mutated = _mutate(ctx, mod, rng.choice(randoms), rng, steps=rng.randint(1, 4))
        stale = 0 if mutated is not None and take(mutated, "mutation") else stale + 1
    if len(out) < n:  # more random samples where mutations ran dry
        draw_random(2 * (n - len(out)))
    return out


def load_candidates(paths: Paths, task_id: str) -> pl.DataFrame:
    f = paths.candidates_file(task_id)
    if not f.exists():
        return pl.DataFrame(schema=CANDIDATE_SCHEMA)
    return read_parquet(f, "candidates file", "move it away; `tcl collect` samples the task "
                        "again", schema=CANDIDATE_SCHEMA)


def ensure_candidates(paths: Paths, task_id: str, workload_json: str, n: int,
                      seed: int = 0) -> pl.DataFrame:
    """The task's first ``n`` candidates, sampling (and persisting) only what is missing.

    The read-sample-write runs under the task's candidates lock, so concurrent collections
    asking for different counts extend one file instead of overwriting each other's."""
    have = load_candidates(paths, task_id)
    if enough_candidates(have, n):  # the common case needs no lock: the file only ever grows
        return have.head(n)
    with locked(paths, "candidates", task_id, what=f"candidates of task {task_id}"):
        return _extend_candidates(paths, task_id, workload_json, n, seed)


def enough_candidates(have: pl.DataFrame, n: int) -> bool:
    """Whether ``have`` (a task's stored candidates) answers a request for ``n``: it holds
    ``n``, or an earlier request for ``n`` or more found the design space used up."""
    return len(have) >= n or bool(len(have) and int(have["requested"].max()) >= n)


def _extend_candidates(paths: Paths, task_id: str, workload_json: str, n: int,
                       seed: int) -> pl.DataFrame:
    import tvm

    have = load_candidates(paths, task_id)  # again, under the lock
    if enough_candidates(have, n):
        return have.head(n)
    next_round = int(have["round"].max()) + 1 if len(have) else 0
    mod = tvm.ir.load_json(workload_json)
    new = sample_programs(mod, n - len(have), seed=seed + 7919 * next_round,
                          exclude=set(have["trace_json"].to_list()))
    rows = pl.DataFrame([{"program_id": program_id(task_id, t), "task_id": task_id,
                          "trace_json": t, "origin": o, "round": next_round, "requested": n}
                         for t, o in new],
                        schema=CANDIDATE_SCHEMA)
    merged = pl.concat([have, rows])
    if len(merged) < n:  # the design space ran out: remember the ask so it is not retried
        merged = merged.with_columns(requested=pl.lit(n, pl.Int32))
    write_parquet_atomic(merged, paths.candidates_file(task_id), "candidates file")
    return merged.head(n)


def apply_trace(mod, trace_json: str):
    """The scheduled IRModule of a stored trace (raises TclError when it does not apply)."""
    from tvm import s_tir

    sch = s_tir.Schedule(mod)
    try:
        s_tir.schedule.Trace.apply_json_to_schedule(json.loads(trace_json), sch)
    except Exception as e:
        raise TclError(f"trace does not apply to its workload: {str(e).splitlines()[-1]}") from None
    return sch.mod
