"""A MetaSchedule Builder whose builds run on a Dask cluster (scale-out of the build step).

MetaSchedule's LocalBuilder builds in a process pool on this machine. ``dask_builder`` gives the
same ``Builder`` interface with one Dask task per program: a worker compiles with tcl's build
function and MetaSchedule's own export (``tcl.measure.builder.build_to_bytes``) and sends the
library's bytes back, so the artifact lands in a local temp directory where the runner (local
or RPC) reads it, whichever machine built it.
"""
from __future__ import annotations

from ..tvm_compat import meta_schedule
from .builder import build_to_bytes, builder_result
from .devices.settings import SETTINGS


def dask_builder(client, timeout_sec: float = SETTINGS.build_timeout_s):
    """A MetaSchedule ``Builder`` that builds on the cluster behind ``client``
    (a ``distributed.Client``); a build still running after ``timeout_sec`` per program of the
    batch fails as a timed-out build, as in LocalBuilder."""
    from tvm.ir.utils import derived_object

    ms = meta_schedule()

    @derived_object
    class DaskBuilder(ms.builder.PyBuilder):
        def build(self, build_inputs):
            return _build(ms, client, build_inputs, timeout_sec)

    return DaskBuilder()


def _build(ms, client, build_inputs, timeout_sec: float) -> list:
    import tvm
    from distributed import wait

    futures = [client.submit(build_to_bytes, tvm.ir.save_json(b.mod),
                             tvm.ir.save_json(b.target), pure=False) for b in build_inputs]
    try:
        wait(futures, timeout=timeout_sec * max(1, len(futures)))
    except TimeoutError:
        pass   # the unfinished ones fail below
    results = []
    for f in futures:
        if not f.done():
            f.cancel()
            results.append(ms.builder.BuilderResult(None, f"build timed out on the Dask cluster "
                                                          f"({client.scheduler.address})"))
            continue
        try:
            data, error = f.result()
        except Exception as e:  # noqa: BLE001 - a worker that died: this build failed
            data, error = None, f"Dask worker failed: {type(e).__name__}: {e}"
        results.append(builder_result(data, error))
    return results
