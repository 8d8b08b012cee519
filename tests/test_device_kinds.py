"""Device kinds (``tcl.measure.devices``): a local CPU and an RPC board build, run and time as
they did before the interface, and a third kind, defined in this module and registered in one
line, goes through planning, measuring, timing and ``tcl device list`` with no other module
touched."""
from __future__ import annotations

import functools
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from tcl.config import TclError
from tcl.measure.devices import DEVICE_KINDS, create
from tcl.measure.devices.base import DeviceKind
from tcl.measure.devices.settings import SETTINGS, DeviceSettings, TimingProtocol
from tcl.store.devices import BUILTIN_DEVICES, Device, MeasureSettings
from tcl.tvm_compat import meta_schedule

ONE_CORE = BUILTIN_DEVICES["cpu-avx2-1c"]
BOARD = Device("board", {"kind": "llvm", "mcpu": "cortex-a72", "mtriple": "aarch64-linux-gnu"},
               rpc_key="rasp4", tracker="127.0.0.1:9190")


class SimulatedDevice(DeviceKind):
    """A device that only this test has: a program "builds" to a file holding its structural
    hash and "runs" in a latency drawn from that hash; a compiled network "runs" in its
    protocol's repeat count of milliseconds. What a new kind must say, and nothing more."""

    name = "simulated"

    def check_runnable(self, host_flags=None, host_cpus=None) -> None:
        self.device.tvm_target()

    def spare_cpus(self) -> set[int]:
        return set(os.sched_getaffinity(0))

    @property
    def where(self) -> str:
        return "simulated here"

    def builder(self, pooled: bool = False, cpus=None):
        return SimpleNamespace(build=_simulated_build, close=lambda: None)

    def runner(self, **_kwargs):
        repeat = self.device.measure.repeat
        return SimpleNamespace(run=lambda inputs: [_simulated_run(i, repeat) for i in inputs])

    @contextmanager
    def timer(self):
        def run(_fn, _lib, inputs, _cores, timing, *_rest):
            from tcl.tune.timing import Timed

            return Timed([np.zeros_like(inputs[0])], float(timing.repeat), 0.0, float("nan"))
        yield run


DEVICE_KINDS.add("simulated", __name__, "SimulatedDevice")   # the one registration line


def _simulated_build(build_inputs) -> list:
    import tvm_ffi

    ms, out = meta_schedule(), []
    for b in build_inputs:
        artifact = Path(tempfile.mkdtemp(prefix="tcl-sim-")) / "program"
        artifact.write_text(str(tvm_ffi.structural_hash(b.mod)))
        out.append(ms.builder.BuilderResult(str(artifact), None))
    return out


def _simulated_run(runner_input, repeat: int):
    ms = meta_schedule()
    seconds = (1 + int(Path(runner_input.artifact_path).read_text()) % 1000) * 1e-6
    return SimpleNamespace(result=lambda: ms.runner.RunnerResult([seconds] * repeat, None))


SIMULATED = Device("sim", {"kind": "llvm", "num-cores": 1}, kind="simulated")


# -- the local CPU and the RPC board, as before ------------------------------------------------

def test_every_builder_times_a_build_out_after_the_one_settings_timeout(monkeypatch):
    import inspect

    from tcl.measure import builder, dask_builder, pooled_builder

    assert SETTINGS.build_timeout_s == 60.0
    for factory in (builder.local_builder, pooled_builder.pooled_builder,
                    dask_builder.dask_builder):
        assert inspect.signature(factory).parameters["timeout_sec"].default == 60.0
    made = []
    monkeypatch.setattr(builder, "local_builder", lambda **kw: made.append(("local", kw)))
    monkeypatch.setattr(pooled_builder, "pooled_builder",
                        lambda **kw: made.append(("pooled", kw)))
    for device in (ONE_CORE, BOARD):
        create(device).builder()
        create(device).builder(pooled=True, cpus={1})
    create(ONE_CORE, DeviceSettings(build_timeout_s=300.0)).builder()
    assert made == [("local", {"timeout_sec": 60.0}),
                    ("pooled", {"timeout_sec": 60.0, "cpus": {1}})] * 2 + \
        [("local", {"timeout_sec": 300.0})]


def test_the_local_runner_is_pinned_and_the_rpc_runner_asks_the_tracker(monkeypatch):
    from tcl.measure.devices.local import pin_worker
    from tcl.measure.interrupt import quiet_interrupts

    ms = meta_schedule()
    made = []
    monkeypatch.setattr(ms.runner, "LocalRunner", lambda **kw: made.append(("local", kw)))
    monkeypatch.setattr(ms.runner, "RPCRunner", lambda **kw: made.append(("rpc", kw)))
    create(ONE_CORE).runner(f_run_evaluator="hook")
    create(BOARD).runner()
    (_, local), (_, rpc) = made
    config = local["evaluator_config"]
    assert (config.number, config.repeat, config.min_repeat_ms,
            config.enable_cpu_cache_flush) == (3, 3, 40, False)
    assert local["timeout_sec"] == 10.0 and local["f_run_evaluator"] == "hook"
    assert local["initializer"].func is quiet_interrupts
    assert local["initializer"].args == (pin_worker, 1)
    assert rpc["rpc_config"].tracker_host == "127.0.0.1" and rpc["rpc_config"].tracker_port == 9190
    assert rpc["rpc_config"].tracker_key == "rasp4"
    assert rpc["rpc_config"].session_timeout_sec == 10.0
    assert rpc["evaluator_config"].repeat == 3


def test_a_network_is_timed_with_at_least_five_repeats_and_frameworks_by_their_median():
    for device in (ONE_CORE, BOARD):
        assert create(device).timing == TimingProtocol(number=3, repeat=5, min_repeat_ms=40,
                                                       warmup=3)
    eight = Device("eight", {"kind": "llvm"}, MeasureSettings(number=1, repeat=8))
    assert create(eight).timing.repeat == 8
    import time

    naps = iter([0.0, 0.001, 0.06, 0.003])   # a warm-up, then 1, 60 and 3 ms
    median = TimingProtocol(repeat=3, warmup=1).framework_ms(lambda: time.sleep(next(naps)))
    assert next(naps, None) is None and 3.0 <= median < 20.0   # the mean would be over 20
    with pytest.raises(TclError, match="min_network_repeat must be a whole number >= 1"):
        DeviceSettings(min_network_repeat=0)


def test_the_local_cpu_times_in_a_process_pinned_to_its_cores():
    with create(ONE_CORE).timer() as run:
        assert run(os.sched_getaffinity, 0) == {min(os.sched_getaffinity(0))}
        assert run(os.getenv, "TVM_NUM_THREADS") == "1"
    with pytest.raises(TclError, match="device 'board' is remote: tcl tune times the compiled "
                                       "network on this host"):
        create(BOARD).timer()


def test_each_kind_says_where_it_runs_and_what_failed(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: {0, 1, 2})
    local, board = create(ONE_CORE), create(BOARD)
    assert local.spare_cpus() == {1, 2} and board.spare_cpus() == {0, 1, 2}
    assert (local.where, board.where) == ("runs here", "remote via 127.0.0.1:9190")
    assert (local.failing_part, board.failing_part) == ("runner",
                                                        "tracker 127.0.0.1:9190 (key rasp4)")
    assert local.problem() is None
    assert board.problem(timeout=1.0).startswith("cannot reach the tracker at 127.0.0.1:9190")
    local.wait_until_reachable(retries=0, delay_s=0.0)   # always there: at once
    assert local.runner_device_type() == board.runner_device_type() == "cpu"


def test_a_devices_kind_is_named_where_it_is_made_and_its_file_is_unchanged():
    assert (ONE_CORE.kind, BOARD.kind, SIMULATED.kind) == ("local", "rpc", "simulated")
    for device in (ONE_CORE, BOARD):
        assert "kind" not in device.to_json() and "kind" not in device.definition()
        assert Device.from_json(device.to_json()) == device
    assert SIMULATED.to_json()["kind"] == SIMULATED.definition()["kind"] == "simulated"
    assert Device.from_json(SIMULATED.to_json()) == SIMULATED
    with pytest.raises(TclError, match="unknown device kind 'quantum'; known: local, rpc"):
        create(Device("q", {"kind": "llvm"}, kind="quantum"))


# -- a third kind ------------------------------------------------------------------------------

def test_a_simulated_device_is_planned_measured_timed_and_listed(paths, capsys):
    from conftest import matmul_task, write_tasks
    from tcl.cli import main
    from tcl.measure.collect import collect
    from tcl.sampling import ensure_candidates
    from tcl.store.jsonfile import JsonRegistry
    from tcl.store.records import RecordStore
    from tcl.tune.plan import tunable_device
    from tcl.tune.timing import time_compiled

    JsonRegistry(paths.devices_file, "device registry").write({"sim": SIMULATED.to_json()})
    device = tunable_device(paths, "sim")                   # planning: runnable, can be timed
    assert device == SIMULATED and create(device).can_pipeline()

    task = matmul_task(16)
    tasks = write_tasks(paths, [task])
    ensure_candidates(paths, task["task_id"], task["workload_json"], 3)
    stats = collect(paths, device, tasks, 3, progress=False, pipelined=True)
    assert stats.measured == 3 and stats.per_status == {"ok": 3}
    rows = RecordStore(paths).read("sim")
    assert set(rows["device"]) == {"sim"} and set(rows["host_cpu"]) == {device.host_cpu}
    assert all(len(lat) == 3 and lat[0] <= 1e-3 for lat in rows["latencies"])

    example = [SimpleNamespace(numpy=functools.partial(np.ones, 4))]
    inst = SimpleNamespace(source="user", network="n", batch=1, size=None)
    timed = time_compiled(Path("network.so"), inst, example, device)
    assert timed.mean_ms == 5.0 and timed.outputs[0].shape == (4,)   # the protocol's 5 repeats

    assert main(["--data", str(paths.root), "device", "list"]) == 0
    assert any(line.startswith("sim ") and "simulated here" in line
               for line in capsys.readouterr().out.splitlines())
