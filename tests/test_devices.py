import os

import pytest

from tcl.config import TclError
from tcl.store.devices import BUILTIN_DEVICES, Device, DeviceRegistry, check_runnable, make_target


def test_builtin_profiles_are_distinct_platforms():
    targets = {d.name: d.target for d in BUILTIN_DEVICES.values()}
    assert targets["cpu-avx512"]["mcpu"] != targets["cpu-avx2"]["mcpu"] != targets["cpu-sse42"]["mcpu"]
    assert targets["cpu-sse42"]["num-cores"] == 1 and targets["cpu-avx2"]["num-cores"] == 2
    for d in BUILTIN_DEVICES.values():
        make_target(d.target)  # each is a valid TVM target in dict form
        assert d.host_cpu and d.host_cpu in d.identity


def test_unknown_device_names_known_ones(paths):
    with pytest.raises(TclError, match="unknown device 'gpu-x'.*cpu-avx2"):
        DeviceRegistry(paths).get("gpu-x")


@pytest.mark.parametrize("target, message", [
    ('{"kind": "nokind"}', "TVM refused it"),
    ('{"kind": "llvm", "mcpu": "notacpu"}', "LLVM does not know CPU 'notacpu'"),
    ('not json', "not JSON"),
    ('{"mcpu": "haswell"}', "'kind' key"),
])
def test_invalid_target_is_refused(paths, target, message):
    with pytest.raises(TclError, match=message):
        DeviceRegistry(paths).add("mine", target)
    assert not paths.devices_file.exists()


def test_add_device_persists_and_remote_needs_tracker(paths):
    reg = DeviceRegistry(paths)
    reg.add("board", '{"kind": "llvm", "mcpu": "cortex-a72", "mtriple": "aarch64-linux-gnu"}',
            rpc_key="rasp4", tracker="127.0.0.1:9190")
    board = DeviceRegistry(paths).get("board")
    assert board.is_remote and board.host_cpu == "rpc:rasp4@127.0.0.1:9190"
    with pytest.raises(TclError, match="both --rpc-key and --tracker"):
        reg.add("half", '{"kind": "llvm"}', rpc_key="k")
    with pytest.raises(TclError, match="built-in"):
        reg.add("cpu-avx2", '{"kind": "llvm"}')


def test_profile_the_host_cannot_run_is_refused(monkeypatch):
    import tcl.store.devices as device

    monkeypatch.setattr(device, "host_cpu_flags", lambda: frozenset({"sse4_2", "avx2", "fma"}))
    with pytest.raises(TclError, match="needs CPU features avx512f"):
        check_runnable(BUILTIN_DEVICES["cpu-avx512"])
    check_runnable(BUILTIN_DEVICES["cpu-avx2"])


def test_frameworks_timed_beside_a_profile_run_at_its_isa():
    """PyTorch timed "on the same core" as a profile uses no wider vector ISA than the profile's
    codegen: an SSE4.2 profile's environment puts ATen on its default (non-AVX) kernels."""
    import subprocess
    import sys

    env = BUILTIN_DEVICES["cpu-sse42"].framework_isa_env()
    assert env == {"ATEN_CPU_CAPABILITY": "default", "ONEDNN_MAX_CPU_ISA": "SSE41"}
    out = subprocess.run([sys.executable, "-c", "import torch; "
                          "print(torch.backends.cpu.get_cpu_capability())"],
                         env={**os.environ, **env}, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "DEFAULT"
    assert Device("x", {"kind": "llvm", "mcpu": "unknown-cpu"}).framework_isa_env() == {}
