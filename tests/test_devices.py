import os
from pathlib import Path

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


LOOKALIKES = ["\u0441\u0440u-avx2",   # Cyrillic "ср": looks like cpu-avx2
              "cpu-avx2\n", "\uff43pu", "na\u00efve", "a b", "a/b", "..", "", "x" * 65]


@pytest.mark.parametrize("name", LOOKALIKES)
def test_one_ascii_name_rule_for_devices_networks_and_store_paths(paths, name):
    """Every entry point of a name that becomes a path or a row refuses what the store's path
    check refuses, in the same words (issue 38: device add took any Unicode letter)."""
    from tcl.store.records import RecordStore
    from tcl.zoo.user import UserNetworks

    for add in (lambda: DeviceRegistry(paths).add(name, '{"kind": "llvm"}'),
                lambda: RecordStore(paths).partition(name, "t1"),
                lambda: UserNetworks(paths).add(name.lower(), "m:f", ["1x3"])):
        with pytest.raises(TclError, match="expected 1 to 64 ASCII letters, digits"):
            add()
    assert not paths.root.exists()


def test_a_name_an_older_tcl_registered_is_named_by_every_command(tmp_path, capsys):
    """devices.json holding a non-ASCII name (written by an older tcl): each command says in
    one line which entry is invalid, none crashes."""
    import json

    import yaml

    from tcl.cli import main

    data = tmp_path / "data"
    data.mkdir()
    name = "\u0441\u0440u-avx2"   # as `Device.to_json` wrote it
    (data / "devices.json").write_text(json.dumps({name: {
        "name": name, "target": {"kind": "llvm", "mcpu": "haswell", "num-cores": 1},
        "measure": {}, "rpc_key": None, "tracker": None, "requires_flags": [],
        "description": ""}}))
    raw = yaml.safe_load((Path(__file__).parent / "tiny_params.yaml").read_text())
    raw["data"] = str(data)
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump(raw))
    for argv in (["--data", str(data), "device", "list"],
                 ["--data", str(data), "query", "select 1"],
                 ["--data", str(data), "status"],
                 ["params", "--params", str(params)],
                 ["device", "add", "zen3", "--target", '{"kind": "llvm", "mcpu": "znver3"}',
                  "--params", str(params), "--dry-run"]):
        code = main(argv)
        err = capsys.readouterr().err
        lines = [line for line in err.splitlines() if line.strip()]
        assert code == 2 and len(lines) == 1, (argv, err)
        assert "devices.json" in lines[0] and "'\u0441\u0440u-avx2'" in lines[0], lines[0]
        assert "ASCII" in lines[0] and "internal error" not in lines[0], lines[0]


def test_this_host_is_a_device_at_its_native_isa_in_one_command(paths, capsys):
    """`tcl device add --this-host`: the target is LLVM's name for this CPU at --cores, the name
    <cpu>-<cores>c unless given (or the registered device that is exactly that target); a name
    another host kind measured is refused; `tcl device list` names the hosts that measured."""
    from test_store import rows

    from tcl.cli import main
    from tcl.hosts import native_cpu
    from tcl.store.records import RecordStore

    def tcl(*args: str) -> tuple[int, str]:
        code = main(["--data", str(paths.root), "device", *args])
        out = capsys.readouterr()
        return code, out.out + out.err

    cpu = native_cpu()
    assert cpu and cpu != "generic"
    code, out = tcl("add", "--this-host", "--no-run")
    assert code == 0 and f"added device {cpu}-1c" in out, out
    assert DeviceRegistry(paths).get(f"{cpu}-1c").target == {"kind": "llvm", "mcpu": cpu,
                                                             "num-cores": 1}
    code, out = tcl("add", "--this-host", "--no-run")      # the same target: that device
    assert code == 0 and f"device {cpu}-1c is already registered" in out
    # a device whose records another host kind measured is not this host's to measure
    xeon = "Intel(R) Xeon(R) (GenuineIntel family 6 model 167 stepping 1; avx512f amx_tile)"
    RecordStore(paths).append([dict(r, host_cpu=xeon) for r in rows(device="xeon-1c")])
    code, out = tcl("add", "xeon-1c", "--this-host", "--no-run")
    assert code == 2 and "measured on another host kind (family 6 model 167)" in out, out
    assert "xeon-1c" not in DeviceRegistry(paths).all()
    code, out = tcl("add", "--this-host", "--target", '{"kind": "llvm"}', "--no-run")
    assert code == 2 and "one of them" in out
    code, out = tcl("list")
    assert code == 0 and f"{cpu}-1c" in out and "nothing measured yet" in out


@pytest.mark.parametrize("name, known", [("CPU-AVX2", "cpu-avx2"), ("Cpu-Sse42", "cpu-sse42"),
                                         ("ZEN3", "zen3")])
def test_a_name_that_differs_from_a_known_device_only_in_case_is_refused(paths, name, known):
    """Issue 54 item 2: "CPU-AVX2" beside the built-in cpu-avx2 (or "ZEN3" beside a user's zen3)
    reads as the same device, and is the same folder on a case-insensitive file system."""
    reg = DeviceRegistry(paths)
    reg.add("zen3", '{"kind": "llvm", "mcpu": "znver3"}')
    before = paths.devices_file.read_bytes()
    for dry_run in (True, False):
        with pytest.raises(TclError, match=f"device name {name!r} differs from the known "
                                           f"device {known!r} only in case"):
            reg.add(name, '{"kind": "llvm", "mcpu": "haswell"}', dry_run=dry_run)
    assert paths.devices_file.read_bytes() == before


@pytest.mark.parametrize("name", ["cpu-avx2.", "mine.", "zen3..."])
def test_a_device_name_with_a_trailing_dot_is_refused(paths, name):
    """Issue 54 item 2: "cpu-avx2." is cpu-avx2 on file systems that drop a trailing dot."""
    with pytest.raises(TclError, match=f"invalid device name {name!r}: expected .*no "
                                       "trailing '.'"):
        DeviceRegistry(paths).add(name, '{"kind": "llvm"}')
    assert not paths.root.exists()
