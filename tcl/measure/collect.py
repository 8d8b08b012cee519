"""The collection loop: build a batch, then run it, then append its records.

Builds and kernel timing never overlap (LocalBuilder.build returns before LocalRunner.run starts,
and the runner times one kernel at a time), unless the collection is ``pipelined``: then the
next batch builds on the cores the device does not use while this one runs on the device's
(a 1-core device on a 2-core host; issue 39 point 3). Every finished batch is one atomic
Parquet file per task, so a killed collector loses at most the batch in flight; re-running skips
record ids already stored.

What is stored is what the program did: ``ok``, or its own ``build_error``, ``run_error`` (a
crash) or ``timeout``. A measurement cut short by a signal, or failed because the runner, the
RPC session or the tracker failed, is not a record: it is counted, reported and measured on the
next run. Concurrent collections on one data root take a lock per (device, task) while they
measure it, so no program is measured twice (``tcl.store.locks``).
"""
from __future__ import annotations

import concurrent.futures
import contextvars
import json
import os
import re
import shutil
import sys
import threading
import time
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

import polars as pl

from ..config import Paths, TclError
from ..progress import replan
from ..sampling import (MAX_PROGRAMS_PER_TASK, apply_trace, ensure_candidates, load_candidates,
                        sample_programs)
from ..store.devices import Device
from ..store.locks import try_lock, wait_for_lock
from ..store.records import RecordStore, now_utc, program_id, record_id
from ..tvm_compat import meta_schedule
from .devices import create
from .devices.base import DeviceKind, stop_runner
from .interrupt import InfrastructureFailure, Interrupted, StopGuard, shielded

DEFAULT_RECORDS_PER_SEC = 3.0  # measured on the 2-core reference machine (environment notes)
# Seconds between progress lines of a collection given a ``report`` callback (a batch of 64
# takes about a minute on 2 cores, so per-batch lines alone leave the log silent too long).
PROGRESS_EVERY_S = 30.0
MIN_RECORDS_FOR_RATE = 100   # fewer records than this say nothing reliable about a rate

# Messages of failures that say nothing about the program: the RPC link or the worker pool.
INFRA_ERROR = re.compile(
    r"connect(ion)? to (the )?tracker|ConnectionRefused|Connection refused|ConnectionReset|"
    r"Connection reset|BrokenPipe|Broken pipe|RPCSessionTimeout|rpc session|socket error|"
    r"No route to host|Cannot connect|Connection closed|Failed to connect", re.I)


@dataclass
class CollectStats:
    measured: int = 0
    errors: int = 0
    skipped: int = 0
    dropped: int = 0   # cut short or failed for infrastructure reasons: not stored
    build_secs: float = 0.0
    run_secs: float = 0.0
    wall_secs: float = 0.0
    per_status: dict[str, int] = field(default_factory=dict)
    # the batch in flight, for progress lines: "building", "running" (``ran`` of it timed so
    # far, not stored yet) or "" between batches
    phase: str = ""
    ran: int = 0

    @property
    def other_secs(self) -> float:
        return max(0.0, self.wall_secs - self.build_secs - self.run_secs)


@dataclass
class Plan:
    """What a collection would do: per task, how many programs are still to measure."""

    device: Device
    tasks: pl.DataFrame  # task_id, task_name, op_class, workload_json, todo
    programs_per_task: int
    records_per_sec: float
    rate_basis: str = ""   # where records_per_sec comes from (``throughput``)

    @property
    def todo(self) -> int:
        return int(self.tasks["todo"].sum()) if len(self.tasks) else 0

    @property
    def eta_secs(self) -> float:
        return self.todo / self.records_per_sec

    def describe(self) -> str:
        lines = [f"device {self.device.name} ({self.device.host_cpu}), target "
                 f"{json.dumps(self.device.target)}",
                 f"{len(self.tasks)} tasks x up to {self.programs_per_task} programs: "
                 f"{self.todo} to measure, about {self.eta_secs / 60:.1f} min at "
                 f"{self.records_per_sec:.1f} records/s"
                 + (f" ({self.rate_basis})" if self.rate_basis else "")]
        for row in self.tasks.iter_rows(named=True):
            lines.append(f"  {row['task_id']}  {row['op_class']:<14} {row['todo']:>4} to measure  "
                         f"{row['task_name']}")
        return "\n".join(lines)


def classify_run_error(error: str) -> str:
    """``timeout``, ``run_error`` (the program's own failure) or ``infra`` (not stored)."""
    if INFRA_ERROR.search(error):
        return "infra"
    return "timeout" if "Timeout" in error else "run_error"


def measured_throughput(store: RecordStore, device: str) -> float:
    """Records per second of earlier collections on this device, from the timestamps of the
    collector's own records (``records_rate``); ``DEFAULT_RECORDS_PER_SEC`` with too few to
    tell. A tuning run's or an import's records are left out: they are stored all at once,
    so their timestamps say nothing of a rate (a run's 1,400 in a second read as 9 records/s)."""
    return throughput(store, device)[0]


def throughput(store: RecordStore, device: str) -> tuple[float, str]:
    """``measured_throughput`` and where it comes from, in words for an estimate's line: an
    assumed rate is said to be one (issue 54: a dry run gave the default as if measured)."""
    collected = store.read(device, columns=["measured_at", "source"]).filter(
        pl.col("source") == "collect")["measured_at"]
    rate = records_rate(collected)
    if rate is None:
        return DEFAULT_RECORDS_PER_SEC, (
            f"assumed: {device} has {len(collected)} collected records, fewer than the "
            f"{MIN_RECORDS_FOR_RATE} a rate is measured from; the first batch will tell")
    return rate, f"measured from {device}'s {len(collected)} collected records"


def records_rate(times: pl.Series) -> float | None:
    """Records per second of the collections that stored records at ``times``; None under
    ``MIN_RECORDS_FOR_RATE`` records. Gaps over 10 minutes between consecutive records are
    idle time between runs, not work (records arrive a batch at a time, a minute or more
    apart)."""
    if len(times) < MIN_RECORDS_FOR_RATE:
        return None
    gaps = times.sort().diff().dt.total_seconds(fractional=True).drop_nulls()
    busy = float(gaps.filter(gaps < 600).sum())
    return len(times) / busy if busy > 0 else None


def probe_rate(paths: Paths, device: Device, tasks: pl.DataFrame, seconds: float,
               batch_size: int = 16) -> tuple[float, int]:
    """(records per second, programs measured) of ``device``, measured for real for about
    ``seconds`` on candidates of ``tasks``: the stored ones, or sampled in memory where a task
    has none. Nothing is stored (a dry run's estimate with no similar device to go by)."""
    import tvm

    kind = create(device)
    kind.check_runnable()
    stats, builder, runner, done = CollectStats(), None, None, 0
    start = time.perf_counter()
    # stopped as a collection is (``collect``): the workers start with SIGINT blocked, a
    # signal kills them, and one line says what happened (no traceback per build worker)
    guard = StopGuard()
    try:
        with guard:
            for row in tasks.iter_rows(named=True):
                if guard.interrupted or time.perf_counter() - start >= seconds:
                    break
                mod = tvm.ir.load_json(row["workload_json"])
                traces = load_candidates(paths, row["task_id"]).head(batch_size)[
                    "trace_json"].to_list() or [t for t, _ in sample_programs(mod, batch_size,
                                                                            seed=0)]
                if builder is None:
                    builder, runner = kind.builder(), shielded(kind.runner)
                rows = shielded(_measure_batch, kind,
                                [Job(row["task_id"], mod, t) for t in traces], builder, runner,
                                stats)
                done += len(rows)
    except Exception:
        if not guard.interrupted:   # else whatever a pool made of the signal (a killed worker)
            raise
    finally:
        if runner is not None:
            stop_runner(runner)
    if guard.interrupted:
        raise Interrupted(guard.signum, f"interrupted by {guard.signal_name}: the probe stored "
                          "nothing (a dry run); run the command again for its estimate")
    secs = time.perf_counter() - start
    if done == 0 or secs <= 0:
        raise TclError(f"the probe measured nothing on {device.name} in {secs:.0f} s")
    return done / secs, done


def measured_before(device: Device, task_id: str, trace_json: str, done: set[str]) -> bool:
    """Whether ``done`` (record ids) holds this program measured on ``device`` on this host:
    under its identity, or from before hosts were told apart (``Device.legacy_identity``)."""
    return any(record_id(i, task_id, trace_json) in done for i in device.identities)


def plan(paths: Paths, device: Device, tasks: pl.DataFrame, programs_per_task: int,
         program_ids: set[str] | None = None) -> Plan:
    """Count what is left to measure, from the stored candidates and records (samples nothing).
    ``program_ids``: measure only these of the candidates (a sampler's selection)."""
    if not 1 <= programs_per_task <= MAX_PROGRAMS_PER_TASK:
        raise TclError(f"programs per task must lie in [1, {MAX_PROGRAMS_PER_TASK}], "
                       f"got {programs_per_task}")
    store = RecordStore(paths)
    todo = []
    for row in tasks.iter_rows(named=True):
        cands = load_candidates(paths, row["task_id"]).head(programs_per_task)
        done = store.record_ids(device.name, row["task_id"])
        if program_ids is not None:
            chosen = cands.filter(pl.col("program_id").is_in(list(program_ids)))
            todo.append(sum(not measured_before(device, row["task_id"], t, done)
                            for t in chosen["trace_json"]))
            continue
        measured = sum(measured_before(device, row["task_id"], t, done)
                       for t in cands["trace_json"])
        # A task whose design space ran out when sampled has fewer candidates than asked for.
        exhausted = len(cands) and int(cands["requested"].max()) >= programs_per_task
        todo.append((len(cands) if exhausted else programs_per_task) - measured)
    frame = tasks.with_columns(pl.Series("todo", todo, dtype=pl.Int64))
    return Plan(device, frame, programs_per_task, *throughput(store, device.name))


@dataclass
class Job:
    """One program to measure: its task, the task's IRModule and the trace. ``last``: the last
    job of its task in this run (its task lock is released once the job's batch is stored)."""

    task_id: str
    mod: object
    trace: str
    last: bool = False


@dataclass
class _Built:
    """A batch after building: the rows of the jobs that failed to build, and what to run."""

    rows: list[dict]
    run_inputs: list
    run_slots: list   # (job, artifact path) per run input
    per_build: float
    row: Callable


def _build_batch(kind: DeviceKind, jobs: list[Job], builder, stats: CollectStats) -> _Built:
    """Build every job of the batch; one row per job that failed to build."""
    import tvm

    ms = meta_schedule()
    device = kind.device
    target = device.tvm_target()
    base = {"device": device.name, "host_cpu": device.host_cpu,
            "target": json.dumps(device.target, sort_keys=True), "source": "collect",
            "tvm_version": tvm.__version__}

    def row(job: Job, status: str, error: str | None, latencies: list[float],
            build_secs: float) -> dict:
        return {**base, "task_id": job.task_id,
                "record_id": record_id(device.identity, job.task_id, job.trace),
                "program_id": program_id(job.task_id, job.trace), "trace_json": job.trace,
                "latencies": latencies, "status": status, "error": error,
                "build_secs": build_secs, "measured_at": now_utc()}

    rows, inputs, slots = [], [], []
    for job in jobs:
        try:
            inputs.append(ms.builder.BuilderInput(apply_trace(job.mod, job.trace), target))
            slots.append(job)
        except TclError as e:
            rows.append(row(job, "build_error", str(e), [], 0.0))
    if not inputs:
        return _Built(rows, [], [], 0.0, row)
    t0 = time.perf_counter()
    if stats.phase != "running":   # pipelined, the batch before this one may be running
        stats.phase = "building"
    built = builder.build(inputs)
    build_secs = time.perf_counter() - t0
    stats.build_secs += build_secs
    per_build = build_secs / len(inputs)
    run_inputs, run_slots = [], []
    for job, inp, res in zip(slots, inputs, built):
        if res.error_msg:
            rows.append(row(job, "build_error", res.error_msg.strip()[-2000:], [], per_build))
            continue
        args = ms.arg_info.ArgInfo.from_prim_func(inp.mod["main"])
        run_inputs.append(ms.runner.RunnerInput(res.artifact_path, kind.runner_device_type(),
                                                args))
        run_slots.append((job, res.artifact_path))
    return _Built(rows, run_inputs, run_slots, per_build, row)


def _run_batch(kind: DeviceKind, built: _Built, runner, stats: CollectStats) -> list[dict]:
    """Run the built programs one by one; one row per job of the batch (status ``infra`` marks
    a failure of the runner or the RPC link, not of the program)."""
    rows = list(built.rows)
    t0 = time.perf_counter()
    # The Python runner behind TVM's derived-object wrapper: its futures keep their Python
    # type (through the FFI an RPCRunnerFuture comes back as a bare RunnerFuture).
    stats.phase, stats.ran = "running", 0
    futures = getattr(runner, "_inst", runner).run(built.run_inputs) if built.run_inputs else []
    results = _results(futures, rpc_answer_secs(kind.device), stats)
    stats.run_secs += time.perf_counter() - t0
    for (job, artifact), res in zip(built.run_slots, results):
        if res.error_msg:
            rows.append(built.row(job, classify_run_error(res.error_msg),
                                  res.error_msg.strip()[-2000:], [], built.per_build))
        else:
            rows.append(built.row(job, "ok", None, [float(s) for s in res.run_secs],
                                  built.per_build))
        shutil.rmtree(Path(artifact).parent, ignore_errors=True)  # the builder's temp dir
    return rows


def _measure_batch(kind: DeviceKind, jobs: list[Job], builder, runner,
                   stats: CollectStats) -> list[dict]:
    """Build every job of the batch, then run the built ones one by one; one row per job."""
    return _run_batch(kind, _build_batch(kind, jobs, builder, stats), runner, stats)


@dataclass
class _NoAnswer:
    """A runner result standing in for one that never came (an RPC session that hangs)."""

    error_msg: str
    run_secs: None = None


def rpc_answer_secs(device: Device) -> float:
    """How long one remote measurement may take before the RPC link counts as failed.
    MetaSchedule's RPCRunner waits forever on a server the tracker still lists but that is
    gone; a program's own slowness is bounded by the session timeout well before this."""
    return 3 * device.measure.timeout_sec + 10


def _results(futures: list, answer_secs: float, stats: CollectStats | None = None) -> list:
    """The futures' results; an RPC future with no answer in ``answer_secs`` (each, in turn)
    fails, and so do the rest of the batch, as infrastructure failures. ``stats.ran`` counts
    the results in (progress lines)."""
    import concurrent.futures

    out, gone = [], None
    for f in futures:
        if gone is None and hasattr(f, "future"):  # RPCRunnerFuture: a concurrent future inside
            try:
                f.future.result(timeout=answer_secs)
            except concurrent.futures.TimeoutError:
                gone = (f"RPCRunner: the RPC session gave no answer within {answer_secs:.0f}s "
                        "(server gone or unreachable)")
            except Exception:  # the future's own error: RPCRunnerFuture.result() words it
                pass
        if gone and hasattr(f, "future"):
            f.future.cancel()  # queued runs would start new workers that hang the same way
        out.append(_NoAnswer(gone) if gone else f.result())
        if stats is not None:
            stats.ran += 1
    return out


class Heartbeat:
    """A progress line every ``every_s`` seconds from a background thread while a collection
    measures: programs measured of the total, rate and ETA (``report`` gets each line)."""

    def __init__(self, report: Callable[[str], None], what: str, total: int,
                 stats: CollectStats, every_s: float):
        self.report, self.what, self.total, self.stats = report, what, total, stats
        self.every_s = every_s
        self._stop = threading.Event()
        # the caller's context: a Prefect task's logger still knows its task run in the thread
        self._thread = threading.Thread(target=contextvars.copy_context().run,
                                        args=(self._beat,), daemon=True, name="tcl-heartbeat")
        self._start = time.perf_counter()

    def line(self) -> str:
        secs = time.perf_counter() - self._start
        done = self.stats.measured + self.stats.ran   # stored, and timed in the running batch
        rate = done / secs if secs > 0 else 0.0
        eta = f"ETA {max(self.total - done, 0) / rate:.0f} s" if rate > 0 else \
            "ETA after the first results"
        batch = f"; a batch is {self.stats.phase}" if self.stats.phase else ""
        return (f"{self.what}: {done} of {self.total} programs measured, "
                f"{rate:.2f} records/s, {eta} ({secs:.0f} s so far{batch})")

    def _beat(self) -> None:
        while not self._stop.wait(self.every_s):
            self.report(self.line())

    def __enter__(self) -> "Heartbeat":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


class _TaskLocks:
    """The (device, task) measurement locks this collection holds.

    No deadlock by construction: a collection waits for a task's lock only while it holds no
    other (``_jobs`` flushes its pending batch first, which stores and releases them), so no
    waiter holds what another waits for. The wait polls, so a signal stops it."""

    def __init__(self, paths: Paths, device: str, stop: Callable[[], bool] = lambda: False):
        self.paths, self.device, self.held, self.stop = paths, device, {}, stop

    def try_take(self, task_id: str) -> bool:
        lock = try_lock(self.paths, "measure", self.device, task_id)
        if lock is not None:
            self.held[task_id] = lock
        return lock is not None

    def take(self, task_id: str) -> bool:
        """Wait for the lock (another collection measures this task now); False if stopped."""
        if self.held:
            raise RuntimeError(f"waiting for task {task_id} while holding {sorted(self.held)}: "
                               "a deadlock waiting to happen (flush the batch first)")
        lock = wait_for_lock(self.paths, "measure", self.device, task_id, stop=self.stop)
        if lock is not None:
            self.held[task_id] = lock
        return lock is not None

    def release(self, task_id: str) -> None:
        lock = self.held.pop(task_id, None)
        if lock is not None:
            lock.release()

    def release_all(self) -> None:
        for task_id in list(self.held):
            self.release(task_id)


FLUSH = None   # from _jobs: measure and store the batch so far before the next job


def _batches(jobs: Iterator[Job | None], size: int) -> Iterator[tuple[list[Job], bool]]:
    """``jobs`` in batches of up to ``size``. A FLUSH ends a batch early and marks it (True):
    it is stored before the next batch is asked for, since ``_jobs`` then waits for a task
    lock. A marked batch may be empty (a pipelined collection's batch in flight holds the
    locks)."""
    batch: list[Job] = []
    for job in jobs:
        if job is FLUSH:
            yield batch, True
            batch = []
            continue
        batch.append(job)
        if len(batch) == size:
            yield batch, False
            batch = []
    if batch:
        yield batch, False


def _jobs(paths: Paths, device: Device, plan_: Plan, seed: int, stats: CollectStats,
          locks: _TaskLocks, say: Callable[[str], None],
          program_ids: set[str] | None = None) -> Iterator[Job | None]:
    """Programs still to measure, task by task (candidates sampled just in time). A task that
    another collection is measuring is skipped and revisited at the end, when its records are
    in the store, so it is measured by one of them only. Before waiting for such a task it
    yields FLUSH: the batch so far is measured and stored, and its task locks released."""
    import tvm

    store = RecordStore(paths)
    n = plan_.programs_per_task
    busy = []
    rows = [r for r in plan_.tasks.iter_rows(named=True)]
    for pass_ in ("first", "busy"):
        for row in (rows if pass_ == "first" else busy):
            if pass_ == "first" and row["todo"] == 0:
                stats.skipped += n
                continue
            if pass_ == "first" and not locks.try_take(row["task_id"]):
                busy.append(row)
                continue
            if pass_ == "busy":
                if locks.held:   # measure and store what is pending: never wait holding a lock
                    yield FLUSH
                say(f"waiting for another collection measuring task {row['task_id']} "
                    f"on {device.name}")
                if not locks.take(row["task_id"]):
                    return   # stopped by a signal: the caller raises Interrupted
            cands = ensure_candidates(paths, row["task_id"], row["workload_json"], n, seed)
            if program_ids is not None:
                cands = cands.filter(pl.col("program_id").is_in(list(program_ids)))
            done = store.record_ids(device.name, row["task_id"])  # read under the lock
            traces = [t for t in cands["trace_json"]
                      if not measured_before(device, row["task_id"], t, done)]
            stats.skipped += len(cands) - len(traces)
            if not traces:
                locks.release(row["task_id"])
                continue
            mod = tvm.ir.load_json(row["workload_json"])
            for i, t in enumerate(traces):
                yield Job(row["task_id"], mod, t, last=i == len(traces) - 1)


def collect(paths: Paths, device: Device, tasks: pl.DataFrame, programs_per_task: int,
            seed: int = 0, batch_size: int = 64, progress: bool = True,
            runner_kwargs: dict | None = None, builder=None,
            on_batch: Callable[[CollectStats], None] | None = None,
            program_ids: set[str] | None = None, report: Callable[[str], None] | None = None,
            what: str = "", every_s: float | None = None,
            pipelined: bool = False, planned_rate: float | None = None) -> CollectStats:
    """Measure up to ``programs_per_task`` candidates of each task on ``device``; resumable.
    ``program_ids``: only these of the candidates (what a sampler selected). ``report``: gets
    a progress line (``what``: measured of the total, rate, ETA) every ``every_s`` seconds
    (default ``PROGRESS_EVERY_S``) while anything is measured. After the first batch, a rate
    more than 25% off the plan's (``planned_rate``, default the device's measured throughput)
    is said, with a new estimate (``tcl.progress.replan``).

    A batch spans tasks: LocalBuilder starts a fresh worker pool per batch, so small tasks
    share one start. ``builder`` is any MetaSchedule Builder (default: LocalBuilder with
    tcl's build function). ``pipelined``: the next batch builds while this one runs; the
    default builder is then a pooled one on the cores this process may use beyond the
    device's (``DeviceKind.build_cpus``). Raises :class:`Interrupted` on SIGINT/SIGTERM and
    :class:`InfrastructureFailure` when the tracker or the runner fails, after storing every
    finished measurement and nothing that the failure cut short.
    """
    from tqdm import tqdm

    if batch_size < 1:
        raise TclError(f"batch size must be >= 1, got {batch_size}")
    kind = create(device)
    kind.check_runnable()
    the_plan = plan(paths, device, tasks, programs_per_task, program_ids)
    store = RecordStore(paths)
    stats = CollectStats()
    t_start = time.perf_counter()
    runner = None  # started on the first batch: a run with nothing new starts no pools
    replanned = False
    bar = tqdm(total=the_plan.todo, unit="prog", disable=not progress, file=sys.stderr,
               desc=f"collect {device.name}")
    guard = StopGuard()
    locks = _TaskLocks(paths, device.name, stop=lambda: guard.interrupted)
    spare = kind.build_cpus() if pipelined else None   # refused before anything starts
    # the thread that builds ahead applies the traces itself: it keeps off the device's cores
    pool = concurrent.futures.ThreadPoolExecutor(
        1, thread_name_prefix="tcl-build-ahead",
        initializer=(lambda: os.sched_setaffinity(0, spare)) if spare else None)
    ahead = None   # pipelined: the next batch's build, in flight
    own = None     # a pooled builder started here, stopped here
    say = (lambda msg: bar.write(msg, file=sys.stderr)) if progress else (lambda msg: None)
    beat = Heartbeat(report, what or f"measure {device.name}", the_plan.todo, stats,
                     PROGRESS_EVERY_S if every_s is None else every_s) \
        if report is not None and the_plan.todo else nullcontext()
    if pipelined:
        # the pooled builder's spawned workers need multiprocessing's resource tracker: started
        # before the guard, which kills every process started inside it when it exits
        from multiprocessing import resource_tracker
        resource_tracker.ensure_running()
    try:
        with guard, beat:
            try:
                batches = _batches(_jobs(paths, device, the_plan, seed, stats, locks, say,
                                         program_ids), batch_size)
                item = next(batches, None)
                while not guard.interrupted and item is not None:
                    batch, flush = item
                    if not batch:   # a FLUSH with nothing pending: the locks are free now
                        item = next(batches, None)
                        continue
                    problem = kind.problem()
                    if problem:   # a batch built ahead is counted below
                        stats.dropped += len(batch) if ahead is None else 0
                        raise InfrastructureFailure(_infra_message(kind, problem, stats))
                    if runner is None:
                        # pipelined: workers started once, on the spare cores (LocalBuilder
                        # would start a pool per batch on them; benchmarks/collect.py)
                        if builder is None and pipelined:
                            builder = own = kind.builder(pooled=True, cpus=spare)
                        builder = builder or kind.builder()
                        runner = shielded(kind.runner, **(runner_kwargs or {}))
                    built = _result(ahead) if ahead is not None else \
                        shielded(_build_batch, kind, batch, builder, stats)
                    ahead, item = None, None
                    if pipelined and not flush:   # never waits for a lock: it would FLUSH first
                        item = next(batches, None)
                        if item is not None and item[0]:
                            ahead = pool.submit(shielded, _build_batch, kind, item[0], builder,
                                                stats)
                    rows = shielded(_run_batch, kind, built, runner, stats)
                    rows, failure = _keep(rows, kind, guard)
                    _store(store, rows, stats, locks, batch)
                    if not replanned and stats.measured:
                        replanned = True
                        line = replan(what or f"measure {device.name}", "records",
                                      planned_rate or the_plan.records_per_sec,
                                      stats.measured / (time.perf_counter() - t_start),
                                      the_plan.todo - stats.measured)
                        if line:
                            (report or say)(line)
                    bar.update(len(rows))
                    bar.set_postfix(errors=stats.errors)
                    if on_batch:
                        on_batch(stats)
                    if failure:
                        raise InfrastructureFailure(_infra_message(kind, failure, stats))
                    if not pipelined or flush:
                        item = next(batches, None)
            finally:
                if ahead is not None:   # stopped with a build in flight: not measured
                    ahead.exception()
                    stats.dropped += len(item[0])
            if guard.interrupted:
                raise Interrupted(guard.signum, f"interrupted by {guard.signal_name}: kept "
                                  f"{stats.measured} records measured in this run "
                                  f"({stats.dropped} cut short, not stored); run the same "
                                  "command again to resume")
    finally:
        pool.shutdown()
        if own is not None:
            own.close()
        locks.release_all()
        bar.close()
        stats.wall_secs = time.perf_counter() - t_start
    return stats


def _result(future: concurrent.futures.Future):
    """The build ahead's batch, waited for in short slices: a signal that reaches another
    thread runs its handler (``StopGuard``'s, which stops the build) only once this, the main
    thread, runs again, and a build that never ends would otherwise hold it for good."""
    while True:
        try:
            return future.result(timeout=0.2)
        except concurrent.futures.TimeoutError:
            continue


def _keep(rows: list[dict], kind: DeviceKind, guard: StopGuard) -> tuple[list[dict], str | None]:
    """The rows to store, and what failed when the batch says the infrastructure did."""
    if guard.interrupted:  # the signal killed the workers: only finished measurements count
        return [r for r in rows if r["status"] == "ok"], None
    infra = [r for r in rows if r["status"] == "infra"]
    rows = [r for r in rows if r["status"] != "infra"]
    failure = (infra[0]["error"].strip().splitlines()[-1][:300]) if infra else None
    if any(r["status"] != "ok" for r in rows):
        # A tracker that went away mid-batch can look like timeouts: ask the device again.
        problem = kind.problem()
        if problem:
            return [r for r in rows if r["status"] == "ok"], problem
    return rows, failure


def _store(store: RecordStore, rows: list[dict], stats: CollectStats, locks: _TaskLocks,
           batch: list[Job]) -> None:
    store.append(rows)  # one atomic file per task of the batch
    stats.phase, stats.ran = "", 0
    for r in rows:
        stats.per_status[r["status"]] = stats.per_status.get(r["status"], 0) + 1
    stats.measured += len(rows)
    stats.errors += sum(r["status"] != "ok" for r in rows)
    stats.dropped += len(batch) - len(rows)
    for job in batch:
        if job.last:
            locks.release(job.task_id)


def _infra_message(kind: DeviceKind, problem: str, stats: CollectStats) -> str:
    return (f"measurement on {kind.device.name} stopped: the {kind.failing_part} failed "
            f"({problem}); kept {stats.measured} records, {stats.dropped} programs not stored "
            "as errors; run again when it is back to measure them")
