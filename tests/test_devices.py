import os
from pathlib import Path

import pytest

from tcl.config import TclError
from tcl.measure.devices import create
from tcl.store.devices import BUILTIN_DEVICES, Device, DeviceRegistry, make_target


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
    assert board.kind == "rpc" and board.host_cpu == "rpc:rasp4@127.0.0.1:9190"
    with pytest.raises(TclError, match="both --rpc-key and --tracker"):
        reg.add("half", '{"kind": "llvm"}', rpc_key="k")
    with pytest.raises(TclError, match="built-in"):
        reg.add("cpu-avx2", '{"kind": "llvm"}')


def test_profile_the_host_cannot_run_is_refused(monkeypatch):
    import tcl.store.devices as device

    monkeypatch.setattr(device, "host_cpu_flags", lambda: ZEN3_FLAGS)
    with pytest.raises(TclError, match="needs CPU features avx512f"):
        create(BUILTIN_DEVICES["cpu-avx512"]).check_runnable()
    create(BUILTIN_DEVICES["cpu-avx2"]).check_runnable()


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


# /proc/cpuinfo's flags of a Zen 3 (AMD EPYC 7763): AVX2 and FMA, no AVX-512, no GFNI
ZEN3_FLAGS = frozenset((
    "fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx fxsr sse "
    "sse2 ht syscall nx mmxext fxsr_opt pdpe1gb rdtscp lm constant_tsc rep_good nopl nonstop_tsc "
    "cpuid extd_apicid aperfmperf pni pclmulqdq monitor ssse3 fma cx16 pcid sse4_1 sse4_2 x2apic "
    "movbe popcnt aes xsave avx f16c rdrand lahf_lm cmp_legacy svm extapic cr8_legacy abm sse4a "
    "misalignsse 3dnowprefetch osvw ibs skinit wdt tce topoext perfctr_core perfctr_nb bpext "
    "perfctr_llc mwaitx cpb cat_l3 cdp_l3 invpcid_single hw_pstate ssbd mba ibrs ibpb stibp "
    "vmmcall fsgsbase bmi1 avx2 smep bmi2 erms invpcid cqm rdt_a rdseed adx smap clflushopt clwb "
    "sha_ni xsaveopt xsavec xgetbv1 xsaves cqm_llc cqm_occup_llc cqm_mbm_total cqm_mbm_local "
    "clzero irperf xsaveerptr rdpru wbnoinvd amd_ppin arat npt lbrv svm_lock nrip_save tsc_scale "
    "vmcb_clean flushbyasid decodeassists pausefilter pfthreshold v_vmsave_vmload vgif "
    "v_spec_ctrl umip pku ospke vaes vpclmulqdq rdpid overflow_recov succor smca fsrm").split())


@pytest.mark.parametrize("target, missing", [
    # zen4-1c of issue 54 item 7: no flag named, but znver4's code uses AVX-512
    ({"kind": "llvm", "mcpu": "znver4", "num-cores": 1}, "avx512bw, avx512cd"),
    ({"kind": "llvm", "mcpu": "sapphirerapids"}, "amx_bf16"),
    # mattr turns a feature on
    ({"kind": "llvm", "mcpu": "znver3", "mattr": ["+avx512f"]}, "avx512f"),
])
def test_a_target_whose_mcpu_implies_features_the_host_lacks_is_refused(target, missing):
    """The features come from LLVM (what the target's mcpu and mattr imply), checked against a
    Zen 3's flags: a profile that names no flag is refused for what its codegen uses."""
    with pytest.raises(TclError, match=f"device 'zen4-1c' needs CPU features .*{missing}.* "
                                       "that this host"):
        create(Device("zen4-1c", target)).check_runnable(host_flags=ZEN3_FLAGS, host_cpus=2)


@pytest.mark.parametrize("target", [
    {"kind": "llvm", "mcpu": "znver3", "num-cores": 2},
    {"kind": "llvm", "mcpu": "haswell"},
    {"kind": "llvm"},
    # mattr turns AVX-512 (and every AVX-512 extension, which needs it) off: Zen 3 runs it
    {"kind": "llvm", "mcpu": "skylake-avx512", "mattr": ["-avx512f"]},
])
def test_a_target_within_the_hosts_features_runs_there(target):
    create(Device("mine", target)).check_runnable(host_flags=ZEN3_FLAGS, host_cpus=2)
    assert create(BUILTIN_DEVICES["cpu-avx2"]).check_runnable(host_flags=ZEN3_FLAGS) is None
    with pytest.raises(TclError, match="needs CPU features avx512f, avx512bw, avx512vl"):
        create(BUILTIN_DEVICES["cpu-avx512"]).check_runnable(host_flags=ZEN3_FLAGS)


def test_device_list_says_what_runs_on_this_host(paths, capsys):
    """On this very host (no flags injected): bdver2's code uses FMA4, XOP and TBM, which no
    CPU since AMD's Zen has; the native CPU's runs here; a device of more cores than this
    process may use does not (issue 54 items 7 and 8)."""
    from tcl.cli import main
    from tcl.hosts import native_cpu

    cores = len(os.sched_getaffinity(0))
    reg = DeviceRegistry(paths)
    reg.add("bulldozer", {"kind": "llvm", "mcpu": "bdver2", "num-cores": 1})
    reg.add("native", {"kind": "llvm", "mcpu": native_cpu(), "num-cores": cores})
    reg.add("wide", {"kind": "llvm", "mcpu": native_cpu(), "num-cores": cores + 1})
    assert main(["--data", str(paths.root), "device", "list"]) == 0
    says = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()}
    assert "NOT runnable here: device 'bulldozer' needs CPU features fma4, tbm, xop" \
        in says["bulldozer"], says["bulldozer"]
    assert "runs here" in says["native"], says["native"]
    assert f"NOT runnable here: device 'wide' num-cores {cores + 1}: expected at most the " \
        f"{cores} cpu(s) this process may use" in says["wide"], says["wide"]


def test_this_host_takes_no_more_cores_than_it_has(paths, capsys):
    """Issue 54 item 8: `device add --this-host --cores 3` on a 2-core host registered
    znver3-3c; refused now, in one line naming --cores, dry run or not."""
    from tcl.cli import main

    more = str(len(os.sched_getaffinity(0)) + 1)
    for extra in (["--no-run"], ["--dry-run"]):
        code = main(["--data", str(paths.root), "device", "add", "--this-host", "--cores", more,
                     *extra])
        err = capsys.readouterr().err
        assert code == 2 and err.count("\n") == 1, err
        assert f"--cores {more}: expected at most the {int(more) - 1} cpu(s)" in err, err
    assert not paths.devices_file.exists()
