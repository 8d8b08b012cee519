"""Devices: a name, a TVM target in dict form, how to measure, and the host it was measured on;
the device registry and the failed-device state.

Built-in profiles are x86 CPU codegen/core-count combinations that run on one host but rank
programs differently (see docs/data-card.md). User devices live in ``data/devices.json``.
"""
from __future__ import annotations

import json
import os
import platform
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable

from ..config import Paths, TclError, check_name
from .jsonfile import JsonRegistry
from .locks import locked
from .records import RecordStore, now_utc


@dataclass(frozen=True)
class MeasureSettings:
    """MetaSchedule evaluator settings; ``repeat`` values of the latency are kept per record."""

    number: int = 3
    repeat: int = 3
    min_repeat_ms: int = 40
    enable_cpu_cache_flush: bool = False
    timeout_sec: float = 10.0

    RANGES = {"number": (1, 1000), "repeat": (1, 100), "min_repeat_ms": (0, 60_000),
              "timeout_sec": (0.1, 3600.0)}

    def __post_init__(self) -> None:
        for key, (low, high) in self.RANGES.items():
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or \
                    not low <= value <= high:
                raise TclError(f"measurement setting {key} must lie in [{low}, {high}], "
                               f"got {value!r}")
        if not isinstance(self.enable_cpu_cache_flush, bool):
            raise TclError("measurement setting enable_cpu_cache_flush must be true or false")


@dataclass(frozen=True)
class Device:
    name: str
    target: dict[str, Any]
    measure: MeasureSettings = field(default_factory=MeasureSettings)
    rpc_key: str | None = None
    tracker: str | None = None  # "host:port" of a TVM RPC tracker
    # CPU flags the host needs to run this profile's code (checked for local devices).
    requires_flags: tuple[str, ...] = ()
    description: str = ""
    # How it builds, runs and is timed: a kind of ``tcl.measure.devices.DEVICE_KINDS``. Left
    # empty, named here, where every device is made: a board behind a tracker, else this host's.
    kind: str = ""

    def __post_init__(self) -> None:
        # the one edge of every device (added, read from devices.json, built in): its name
        # becomes record paths and rows, so an older tcl's non-ASCII name is refused here too
        check_name(self.name, "device name")
        if not self.kind:
            object.__setattr__(self, "kind", self._usual_kind())

    @property
    def is_remote(self) -> bool:
        return self.rpc_key is not None

    @property
    def num_cores(self) -> int:
        return int(self.target.get("num-cores", 1))

    @property
    def host_cpu(self) -> str:
        """The host the measurements come from (``host_identity``; part of a device's
        identity, and the records' ``host_cpu``)."""
        return f"rpc:{self.rpc_key}@{self.tracker}" if self.is_remote else host_identity()

    @property
    def identity(self) -> str:
        """Stable string that enters record ids: same name on another host is another device."""
        return json.dumps({"name": self.name, "target": self.target, "host": self.host_cpu},
                          sort_keys=True)

    @property
    def legacy_identity(self) -> str | None:
        """The identity before hosts were told apart beyond their model name (records measured
        until 2026-12-01 carry it; their ``host_cpu`` is the bare model name). Such a record
        counts as measured for every host of that model name; None for a remote device, whose
        identity did not change."""
        if self.is_remote:
            return None
        return json.dumps({"name": self.name, "target": self.target, "host": host_cpu_model()},
                          sort_keys=True)

    @property
    def identities(self) -> tuple[str, ...]:
        """Every identity a stored record of this device on this host may carry."""
        legacy = self.legacy_identity
        return (self.identity,) if legacy in (None, self.identity) else (self.identity, legacy)

    def tvm_target(self):
        return make_target(self.target)

    def framework_isa_env(self) -> dict[str, str]:
        """Environment that caps PyTorch (its ATen kernels and oneDNN) at the vector ISA this
        profile's codegen targets, so that a framework timed "on the same core" runs the code
        the profile's chip could run (an SSE4.2 profile on an AVX-512 host: no AVX-512 PyTorch).
        Empty for an ``mcpu`` not in ``FRAMEWORK_ISA`` (the host's ISA)."""
        caps = FRAMEWORK_ISA.get(str(self.target.get("mcpu", "")))
        return {} if caps is None else {"ATEN_CPU_CAPABILITY": caps[0],
                                        "ONEDNN_MAX_CPU_ISA": caps[1]}

    def _usual_kind(self) -> str:
        return "rpc" if self.is_remote else "local"

    def _named_kind(self) -> dict[str, str]:
        """``{"kind": ...}`` for a kind other than the usual one, else nothing: the definition
        and the file of every device made before kinds were named stay as they were."""
        return {} if self.kind == self._usual_kind() else {"kind": self.kind}

    def definition(self) -> dict[str, Any]:
        """What makes the device the device it is: its target, how and where it is measured."""
        return {"target": self.target, "measure": asdict(self.measure),
                "rpc_key": self.rpc_key, "tracker": self.tracker, **self._named_kind()}

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["requires_flags"] = list(self.requires_flags)
        del d["kind"]
        return {**d, **self._named_kind()}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "Device":
        d = dict(d)
        d["measure"] = MeasureSettings(**d.get("measure", {}))
        d["requires_flags"] = tuple(d.get("requires_flags", ()))
        return cls(**d)


# mcpu -> (ATEN_CPU_CAPABILITY, ONEDNN_MAX_CPU_ISA): the highest ISA PyTorch may use for it.
FRAMEWORK_ISA = {"nehalem": ("default", "SSE41"), "haswell": ("avx2", "AVX2"),
                 "skylake-avx512": ("avx512", "AVX512_CORE")}


# Built-in profiles. mcpu picks the codegen (vector ISA); num-cores the parallelism the schedule
# and the runtime thread pool use. Measured rank correlations between them: docs/data-card.md.
BUILTIN_DEVICES: dict[str, Device] = {
    d.name: d
    for d in [
        Device("cpu-avx512", {"kind": "llvm", "mcpu": "skylake-avx512", "num-cores": 2},
               requires_flags=("avx512f", "avx512bw", "avx512vl"),
               description="x86 AVX-512 codegen, 2 cores"),
        Device("cpu-avx2", {"kind": "llvm", "mcpu": "haswell", "num-cores": 2},
               requires_flags=("avx2", "fma"),
               description="x86 AVX2+FMA codegen, 2 cores"),
        Device("cpu-sse42", {"kind": "llvm", "mcpu": "nehalem", "num-cores": 1},
               requires_flags=("sse4_2",),
               description="x86 SSE4.2 codegen, 1 core"),
        # For hosts without AVX-512 (a third platform beside the two above).
        Device("cpu-avx2-1c", {"kind": "llvm", "mcpu": "haswell", "num-cores": 1},
               requires_flags=("avx2", "fma"),
               description="x86 AVX2+FMA codegen, 1 core"),
    ]
}


# LLVM's name of each ISA feature whose instructions LLVM puts in code of its own accord (vector
# ISA, FMA, bit manipulation, GFNI for byte shifts), and /proc/cpuinfo's name for it: what a
# target's mcpu and mattr imply (``isa_flags``) must be on the host that runs its code. A
# target's other features are tuning hints ("fast-...", "slow-...") or instructions LLVM emits
# only when asked (aes, sha, sse4a, clzero), which a Zen profile on an Intel host never runs.
ISA_FEATURES = {
    "sse3": "pni", "ssse3": "ssse3", "sse4.1": "sse4_1", "sse4.2": "sse4_2", "popcnt": "popcnt",
    "avx": "avx", "avx2": "avx2", "fma": "fma", "f16c": "f16c", "fma4": "fma4", "xop": "xop",
    "tbm": "tbm", "bmi": "bmi1", "bmi2": "bmi2", "lzcnt": "abm", "movbe": "movbe",
    "gfni": "gfni", "avxvnni": "avx_vnni",
    "avx512f": "avx512f", "avx512cd": "avx512cd", "avx512dq": "avx512dq",
    "avx512bw": "avx512bw", "avx512vl": "avx512vl", "avx512ifma": "avx512ifma",
    "avx512vbmi": "avx512vbmi", "avx512vbmi2": "avx512_vbmi2", "avx512vnni": "avx512_vnni",
    "avx512bitalg": "avx512_bitalg", "avx512vpopcntdq": "avx512_vpopcntdq",
    "avx512bf16": "avx512_bf16", "avx512fp16": "avx512_fp16",
    "avx512vp2intersect": "avx512_vp2intersect",
    "amx-tile": "amx_tile", "amx-int8": "amx_int8", "amx-bf16": "amx_bf16",
    "amx-fp16": "amx_fp16",
    # AArch64
    "neon": "asimd", "fullfp16": "asimdhp", "dotprod": "asimddp", "i8mm": "i8mm",
    "bf16": "bf16", "sve": "sve", "sve2": "sve2",
}


def isa_flags(target: dict[str, Any]) -> frozenset[str]:
    """The cpuinfo flags a host needs to run an LLVM ``target``'s code: the ``ISA_FEATURES``
    that LLVM says its mcpu (and triple) imply, with what its mattr adds or takes away
    ("-avx512f" takes every AVX-512 extension with it). Empty for another target kind."""
    if target.get("kind") != "llvm":
        return frozenset()
    from tvm.target import codegen   # lazy: tvm costs ~1 s at import

    features = codegen.llvm_get_cpu_features(make_target(target))
    return frozenset(ISA_FEATURES[f] for f in map(str, features) if f in ISA_FEATURES)


def host_cpus() -> int:
    """The cpus this process may use (its affinity: a container's cpuset or ``taskset``)."""
    return len(os.sched_getaffinity(0))


def check_cores(cores: int, what: str, available: int | None = None) -> None:
    """Refuse ``cores`` threads (named ``what``) beyond the ``available`` cpus (default
    ``host_cpus``): the runner pins a device to its first cores, and threads beyond them would
    share cores and time something no such device does."""
    available = host_cpus() if available is None else available
    if cores > available:
        raise TclError(f"{what} {cores}: expected at most the {available} cpu(s) this process "
                       f"may use on this host ({host_cpu_model()})")


# The ISA flags that decide which code runs and how fast: they enter the host identity.
IDENTITY_FLAGS = ("sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl",
                  "avx512_vnni", "avx512_bf16", "avx512_fp16", "amx_tile", "asimd", "sve")


@lru_cache(maxsize=1)
def _cpuinfo() -> tuple[str, frozenset[str], dict[str, str]]:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        text = ""
    return parse_cpuinfo(text)


def parse_cpuinfo(text: str) -> tuple[str, frozenset[str], dict[str, str]]:
    """The model name, the flags, and vendor / family / model / stepping (or an Arm CPU's
    implementer / part / variant / revision) of the first CPU in /proc/cpuinfo's ``text``."""
    model, flags, ids = platform.processor() or platform.machine(), frozenset(), {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key, value = key.strip(), value.strip()
        if key == "model name" and model in ("", platform.machine(), platform.processor()):
            model = value
        elif key in ("flags", "Features") and not flags:      # x86 / Arm
            flags = frozenset(value.split())
        elif key in ("vendor_id", "cpu family", "model", "stepping", "CPU implementer",
                     "CPU part", "CPU variant", "CPU revision") and key not in ids:
            ids[key] = value
    return model, flags, ids


def host_cpu_model() -> str:
    return _cpuinfo()[0]


def host_cpu_flags() -> frozenset[str]:
    return _cpuinfo()[1]


def host_identity(cpuinfo: tuple[str, frozenset[str], dict[str, str]] | None = None) -> str:
    """The model name, then vendor, family, model, stepping and the ISA flags that matter, e.g.
    ``AMD EPYC (AuthenticAMD family 23 model 1 stepping 2; avx avx2 f16c fma sse4_2)``.
    The model name alone reads "AMD EPYC" on a Zen 1 without AVX-512 and on a Zen 4 with it.
    ``cpuinfo``: ``parse_cpuinfo``'s answer (default: this host's)."""
    name, flags, ids = cpuinfo or _cpuinfo()
    if not ids and not flags:
        return name
    names = {"cpu family": "family", "CPU implementer": "implementer", "CPU part": "part",
             "CPU variant": "variant", "CPU revision": "revision"}
    what = " ".join([ids.get("vendor_id", "")] + [f"{names.get(k, k)} {v}" for k, v in ids.items()
                                                  if k != "vendor_id"]).strip()
    isa = " ".join(sorted(f for f in IDENTITY_FLAGS if f in flags))
    return f"{name} ({what}; {isa})"


def parse_target(text: str) -> Any:
    """A target given as JSON text (``--target``); text that is not JSON, or nests deeper than
    the parser goes (5,000 lists), is a TclError quoting its start."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as e:
        why = "nested too deeply" if isinstance(e, RecursionError) else str(e)
        shown = repr(text) if len(text) <= 80 else repr(text[:80]) + "..."
        raise TclError(f"invalid target {shown}: not JSON ({why})") from None


def make_target(target: dict[str, Any]):
    """A ``tvm.target.Target`` from its dict form, or a TclError saying why TVM refused it."""
    import tvm

    if not isinstance(target, dict) or "kind" not in target:
        raise TclError(f"invalid target {target!r}: expected a JSON object with a 'kind' key, "
                       'e.g. {"kind": "llvm", "mcpu": "haswell", "num-cores": 2}')
    try:
        made = tvm.target.Target(target)
    except Exception as e:  # TVM raises its own error types; keep its last line
        first = str(e).strip().splitlines()[-1] if str(e).strip() else type(e).__name__
        raise TclError(f"invalid target {json.dumps(target)}: TVM refused it ({first})") from None
    # LLVM only warns about an unknown CPU and then generates generic code: refuse it here.
    mcpu = target.get("mcpu")
    if target["kind"] == "llvm" and mcpu:
        from tvm.target import codegen

        triple = target.get("mtriple") or codegen.llvm_get_system_triple()
        if not codegen.llvm_is_valid_cpu(mcpu, triple):
            raise TclError(f"invalid target {json.dumps(target)}: LLVM does not know CPU "
                           f"{mcpu!r} for {triple} (e.g. haswell, skylake-avx512, znver4)")
    return made


class DeviceRegistry:
    """Built-in profiles plus the user's devices (``devices.json`` under the data root)."""

    def __init__(self, paths: Paths | None = None):
        self.paths = paths or Paths.default()

    def _file(self) -> JsonRegistry:
        return JsonRegistry(self.paths.devices_file, "device registry")

    def _user_devices(self) -> dict[str, Device]:
        return self._file().read(lambda raw: {name: Device.from_json(d)
                                              for name, d in raw.items()})

    def all(self) -> dict[str, Device]:
        return {**BUILTIN_DEVICES, **self._user_devices()}

    def get(self, name: str) -> Device:
        devices = self.all()
        if name not in devices:
            raise TclError(f"unknown device {name!r}; known devices: {', '.join(sorted(devices))} "
                           "(add one with `tcl device add NAME --target JSON`)")
        return devices[name]

    def add(self, name: str, target: dict[str, Any] | str, rpc_key: str | None = None,
            tracker: str | None = None, measure: MeasureSettings | None = None,
            replace: bool = False, check: Callable[[Device], None] | None = None,
            dry_run: bool = False) -> Device:
        """Register a device. One name means one device: the same definition again is a no-op
        (see :meth:`is_registered`), another one is refused unless ``replace`` is given, and a
        replacement is refused while the old device has records in the store. ``check`` runs
        on the validated device before anything is written (the tracker probe of
        ``tcl device add``): what it raises leaves the registry as it was. ``dry_run``: every
        check, and the device it would register, but nothing written."""
        if isinstance(target, str):
            target = parse_target(target)
        # its name is checked first (Device's edge), before TVM is asked about the target
        device = Device(name, target, measure or MeasureSettings(), rpc_key, tracker)
        if name in BUILTIN_DEVICES:
            raise TclError(f"device {name!r} is a built-in profile; choose another name")
        check_distinct(name, self.all())
        if (rpc_key is None) != (tracker is None):
            raise TclError("a remote device needs both --rpc-key and --tracker HOST:PORT")
        if tracker is not None:
            host, _, port = tracker.rpartition(":")
            if not host or not port.isdigit() or not 0 < int(port) < 65536:
                raise TclError(f"invalid tracker {tracker!r}: expected HOST:PORT with a port "
                               "in 1..65535")
        make_target(target)  # validate
        if check is not None:
            check(device)
        if dry_run:
            old = self._user_devices().get(name)
            if old is not None and old.definition() != device.definition() and not replace:
                raise TclError(f"device {name!r} is already registered as "
                               f"{json.dumps(old.definition())}; a run would refuse to "
                               f"redefine it as {json.dumps(device.definition())}")
            return device
        with locked(self.paths, "devices", what="the device registry"):
            users = self._user_devices()
            check_distinct(name, users)   # again under the lock: one added meanwhile
            old = users.get(name)
            if old is not None and old.definition() == device.definition():
                return old
            if old is not None and not replace:
                raise TclError(
                    f"device {name!r} is already registered as {json.dumps(old.definition())}; "
                    f"refusing to redefine it as {json.dumps(device.definition())} (one name "
                    "is one device: choose another name, or pass --replace if it has no "
                    "records)")
            if old is not None and RecordStore(self.paths, warn=None).files(name):
                raise TclError(f"device {name!r} has records measured as "
                               f"{json.dumps(old.definition())}; it cannot be replaced "
                               "(register the new definition under another name)")
            users[name] = device
            self._file().write({k: v.to_json() for k, v in users.items()})
        return device

    def is_registered(self, name: str, target: dict[str, Any] | str, rpc_key: str | None = None,
                      tracker: str | None = None, measure: MeasureSettings | None = None) -> bool:
        """Whether ``name`` is already registered with exactly this definition."""
        old = self._user_devices().get(name)
        if old is None:
            return False
        try:
            target = parse_target(target) if isinstance(target, str) else target
        except TclError:
            return False
        return old.definition() == {"target": target,
                                    "measure": asdict(measure or MeasureSettings()),
                                    "rpc_key": rpc_key, "tracker": tracker}


def check_distinct(name: str, known: dict[str, Device]) -> None:
    """Refuse a new device ``name`` that only case tells from a ``known`` one: "CPU-AVX2" reads
    as cpu-avx2, and is its folder on a case-insensitive file system (macOS, Windows)."""
    same = [k for k in known if k != name and k.casefold() == name.casefold()]
    if same:
        raise TclError(f"device name {name!r} differs from the known device {same[0]!r} only in "
                       "case; choose another name")


# The failed-device state: devices whose last add-device run measured nothing usable
# (``tcl.pipeline.add_device`` marks and clears them, ``tcl status`` shows them).
def _failures(paths: Paths) -> JsonRegistry:
    return JsonRegistry(paths.failures_file, "failed-device state")


def failures(paths: Paths) -> dict[str, dict]:
    return _failures(paths).read()


def mark_failed(paths: Paths, device: str, reason: str) -> None:
    with locked(paths, "devices", what="the device registry"):
        data = failures(paths)
        data[device] = {"reason": reason, "at": now_utc().isoformat()}
        _failures(paths).write(data)


def clear_failed(paths: Paths, device: str) -> None:
    with locked(paths, "devices", what="the device registry"):
        data = failures(paths)
        if data.pop(device, None) is not None:
            _failures(paths).write(data)
