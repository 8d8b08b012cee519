"""Scale-out on Dask (``scale_out`` in params.yaml): where sampling, featurizing and building run.

With ``task_runner: local`` everything runs in this process, as before. With ``dask`` the
sample and featurize flows map their Prefect tasks over chunks of tasks on prefect-dask's
``DaskTaskRunner``, and the measure stage builds on the same cluster (``dask_builder``:
MetaSchedule's Builder interface), while kernels are still timed where the device is (locally
or through the TVM RPC tracker). ``dask_address: null`` starts a LocalCluster on this machine;
an address joins a cluster someone started (``dask scheduler`` / ``dask worker``; README).
The workers need tcl installed and, for sampling and featurizing, the same data root (a shared
file system); builds send their libraries back and need no shared files.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

from ..config import TclError
from ..measure.dask_builder import dask_builder
from .params import Params, ScaleOutParams

CHUNKS_PER_WORKER = 4   # enough pieces to balance tasks of uneven cost, few enough to be cheap


def uses_dask(params: Params) -> bool:
    return params.scale_out.task_runner == "dask"


def task_runner(params: Params):
    """The Prefect task runner for the sample and featurize flows."""
    from prefect.task_runners import ThreadPoolTaskRunner

    s = params.scale_out
    if s.task_runner == "local":
        return ThreadPoolTaskRunner(max_workers=1)
    _check_reachable(s)
    from prefect_dask import DaskTaskRunner

    if s.dask_address:
        return DaskTaskRunner(address=s.dask_address)
    return DaskTaskRunner(cluster_kwargs={**_local_cluster_kwargs(s), "env": _worker_prefect_env()})


def local_processes(params: Params) -> int:
    """Processes a stage's CPU-bound loop may use here: the usable CPUs when local; 1 with
    Dask, whose workers are the parallelism (each runs its chunk in one process)."""
    import os

    return 1 if uses_dask(params) else len(os.sched_getaffinity(0))


def chunks(items: list, params: Params) -> list[list]:
    """``items`` in pieces for the task runner: one piece when local (as a plain loop)."""
    if not uses_dask(params) or not items:
        return [items] if items else []
    n = min(len(items), CHUNKS_PER_WORKER * max(1, params.scale_out.dask_workers))
    return [items[i::n] for i in range(n)]


@contextmanager
def dask_client(s: ScaleOutParams) -> Iterator:
    """A ``distributed.Client`` on the configured cluster (a LocalCluster started and stopped
    here when no address is given)."""
    from distributed import Client, LocalCluster

    if s.dask_address:
        client = _connect(s.dask_address)
        try:
            yield client
        finally:
            client.close()
        return
    with LocalCluster(**_local_cluster_kwargs(s)) as cluster, Client(cluster) as client:
        yield client


@contextmanager
def builder(params: Params) -> Iterator:
    """The MetaSchedule Builder the measure stage uses: None (the collector's LocalBuilder)
    when local, else one that builds on the Dask cluster."""
    if not uses_dask(params):
        yield None
        return

    with dask_client(params.scale_out) as client:
        yield dask_builder(client)


def _local_cluster_kwargs(s: ScaleOutParams) -> dict:
    # Processes, one thread each: TVM's sampling and builds hold the GIL in places, and a
    # crashing build takes down its worker only. No dashboard: nothing listens beyond loopback.
    return {"n_workers": s.dask_workers, "threads_per_worker": 1, "processes": True,
            "dashboard_address": None, "host": "127.0.0.1"}


def _worker_prefect_env() -> dict[str, str]:
    """The Prefect API the LocalCluster's workers report task runs to: this process's own.
    Without a PREFECT_API_URL each worker would start a temporary server of its own on the same
    database (slow, and on a loaded machine it times out); with one, they inherit it."""
    from prefect import get_client
    from prefect.settings import PREFECT_API_URL

    if PREFECT_API_URL.value():
        return {}
    return {"PREFECT_API_URL": str(get_client(sync_client=True).api_url).rstrip("/")}


def _connect(address: str, timeout_s: float = 10.0):
    from distributed import Client

    try:
        return Client(address, timeout=timeout_s)
    except (OSError, TimeoutError) as e:
        raise TclError(f"the Dask scheduler at {address} (scale_out.dask_address) is "
                       f"unreachable: {type(e).__name__}: {e}; start it (`dask scheduler`) or "
                       "set scale_out.task_runner: local") from None


def _check_reachable(s: ScaleOutParams) -> None:
    if s.dask_address:
        _connect(s.dask_address).close()
