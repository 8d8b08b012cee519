"""Runners for a device: MetaSchedule's LocalRunner (pinned to the profile's cores) or RPCRunner."""
from __future__ import annotations

import functools
import gc
import os
import traceback
from typing import Callable

from ..config import TclError
from ..store.devices import Device
from ..tvm_compat import meta_schedule
from .interrupt import held_interrupts, quiet_interrupts


def pin_worker(num_threads: int) -> None:
    """Runs in the runner's worker process: use exactly the profile's cores."""
    os.environ["TVM_NUM_THREADS"] = str(num_threads)
    cpus = sorted(os.sched_getaffinity(0))
    os.sched_setaffinity(0, set(cpus[:num_threads]))


def _spare_cpus(device: Device) -> set[int]:
    """The cpus this process may use beyond the ``device``'s (``pin_worker`` gives the runner
    the first ``num_cores``); all of them for a remote device, which runs elsewhere."""
    cpus = sorted(os.sched_getaffinity(0))
    return set(cpus) if device.is_remote else set(cpus[device.num_cores:])


def can_pipeline(device: Device) -> bool:
    """Whether ``device`` leaves this process a cpu to build on while it runs."""
    return bool(_spare_cpus(device))


def build_cpus(device: Device) -> set[int]:
    """Where a pipelined collection builds while the device runs (``_spare_cpus``); refused
    when there is no such cpu."""
    spare = _spare_cpus(device)
    if not spare:
        raise TclError(f"a pipelined collection builds on cores {device.name} does not use, but "
                       f"this process may use {len(os.sched_getaffinity(0))} cpu(s) and "
                       f"{device.name} uses {device.num_cores}: measure without pipelining, "
                       "or give it more cpus")
    return spare


def evaluator_config(device: Device):
    ms = meta_schedule()
    m = device.measure
    return ms.runner.EvaluatorConfig(number=m.number, repeat=m.repeat,
                                     min_repeat_ms=m.min_repeat_ms,
                                     enable_cpu_cache_flush=m.enable_cpu_cache_flush)


def make_runner(device: Device, **local_kwargs):
    """A runner that measures on ``device``; extra kwargs go to LocalRunner (tests use hooks).
    A LocalRunner's workers end silently on a Ctrl-C, while they start too (``quiet_interrupts``);
    ``stop_runner`` stops them."""
    ms = meta_schedule()
    config = evaluator_config(device)
    if device.is_remote:
        host, _, port = device.tracker.rpartition(":")
        rpc = ms.runner.RPCConfig(tracker_host=host, tracker_port=int(port),
                                  tracker_key=device.rpc_key,
                                  session_timeout_sec=device.measure.timeout_sec)
        return ms.runner.RPCRunner(rpc_config=rpc, evaluator_config=config)
    try:
        # LocalRunner's constructor starts its pool's one thread and, from it, a worker (a first
        # job checks them): with SIGINT held here, both start with it held, and the worker (and
        # every worker the thread restarts) holds it until its initializer quiets it
        with held_interrupts():
            # evaluator_config by keyword: LocalRunner's first positional parameter is timeout_sec
            return ms.runner.LocalRunner(timeout_sec=device.measure.timeout_sec,
                                         evaluator_config=config,
                                         initializer=functools.partial(
                                             quiet_interrupts, pin_worker, device.num_cores),
                                         **local_kwargs)
    except BaseException as e:
        # Interrupted while it started: the half-made runner's pool is reachable only through
        # this error's frames. Freed here, it is shut down in this thread; left to the garbage
        # collector, it may be shut down from its own thread, which fails with a traceback.
        while e is not None:
            traceback.clear_frames(e.__traceback__)
            e = e.__context__
        gc.collect()
        raise


def stop_runner(runner) -> None:
    """Stop a LocalRunner's worker now, from this thread: left to the garbage collector, its
    pool may be shut down from its own thread, which fails with a traceback."""
    pool = getattr(runner, "pool", None)
    if pool is not None:
        pool.shutdown(wait=True)


def runner_device_type(device: Device) -> str:
    kind = device.target.get("kind", "llvm")
    return "cpu" if kind in ("llvm", "c") else kind


def tracker_problem(device: Device, timeout: float = 5.0, need_server: bool = True) -> str | None:
    """Why ``device``'s RPC tracker cannot measure now (None when it can, or when the device is
    local): unreachable, or (``need_server``) no server registered under the device's key.
    Asked before every batch, so a tracker that is down costs no program a stored error."""
    if not device.is_remote:
        return None
    import socket

    host, _, port = device.tracker.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout):
            pass
    except OSError as e:
        return f"cannot reach the tracker at {device.tracker}: {e.strerror or e}"
    try:
        summary = _tracker_summary(host, int(port), timeout)
    except Exception as e:  # the tracker accepted the connection but did not answer
        return f"the tracker at {device.tracker} did not answer: {str(e).splitlines()[-1]}"
    servers = {s.get("key", "").split(":", 1)[-1] for s in summary.get("server_info", [])}
    if need_server and device.rpc_key not in servers and \
            device.rpc_key not in summary.get("queue_info", {}):
        return (f"no RPC server is registered under key {device.rpc_key!r} at the tracker "
                f"{device.tracker} (registered: {', '.join(sorted(servers)) or 'none'})")
    return None


def wait_for_tracker(device: Device, retries: int, delay_s: float,
                     say: Callable[[str], None] = print) -> None:
    """Ask the tracker up to ``1 + retries`` times, ``delay_s`` apart (the policy: params'
    measure.retries and measure.retry_delay_s), until it answers; a TclError naming the last
    problem if it never did. Its servers may come later: each batch checks for them."""
    import time

    for attempt in range(retries + 1):
        problem = tracker_problem(device, need_server=False)
        if problem is None:
            return
        if attempt < retries:
            say(f"device {device.name}: {problem}; trying again in {delay_s:g} s "
                f"({attempt + 1} of {retries} retries)")
            time.sleep(delay_s)
    raise TclError(f"device {device.name!r}: {problem} (after {retries + 1} attempts)")


def _tracker_summary(host: str, port: int, timeout: float) -> dict:
    from tvm import rpc

    # Reached just before, so TVM's connect (which retries refused connections for 60 s)
    # connects at once; the timeout bounds the answer.
    session = rpc.connect_tracker(host, port)
    try:
        session._sock.settimeout(timeout)
        return session.summary()
    finally:
        session.close()
