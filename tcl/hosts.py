"""This host as a device: a target at its native ISA (LLVM's name for the CPU), and the hosts
that measured a device's records.

A device is one target on one host kind (vendor, family, model, ISA flags: ``host_identity``).
ISA caps of one host (cpu-avx2, cpu-sse42) are a controlled study; a user porting to a new chip
tunes at its native ISA, which is what ``tcl device add --this-host`` registers."""
from __future__ import annotations

import re

from .config import Paths, TclError
from .store.catalog import Catalog
from .store.devices import host_identity

_KIND = re.compile(r"family (\d+) model (\d+)")


def native_cpu() -> str:
    """LLVM's name for this host's CPU (e.g. ``znver4``, ``sapphirerapids``): the ``mcpu`` at
    which TVM generates the code this chip runs best."""
    # lazy: tvm costs ~1 s at import
    from tvm.target.codegen import llvm_get_system_cpu

    return str(llvm_get_system_cpu())


def native_target(cores: int) -> dict:
    """This host's native target at ``cores`` threads."""
    return {"kind": "llvm", "mcpu": native_cpu(), "num-cores": cores}


def host_kind(identity: str) -> str:
    """A host identity in short: "family 25 model 17", or the bare model name that records
    measured before 2026-12-01 carry (their host kind was not recorded)."""
    m = _KIND.search(identity)
    return f"family {m[1]} model {m[2]}" if m else identity


def measured_hosts(paths: Paths) -> dict[str, set[str]]:
    """Per device, the host identities its records were measured on."""
    cat = Catalog(paths, in_memory=True)
    try:
        frame = cat.sql("SELECT DISTINCT device, host_cpu FROM records")
    finally:
        cat.close()
    out: dict[str, set[str]] = {}
    for device, host in frame.iter_rows():
        out.setdefault(device, set()).add(host)
    return out


def check_this_host_may_measure(paths: Paths, name: str) -> None:
    """Refuse ``name`` when its records come from another host kind: one name is one device,
    and a device is one host kind (a record of another host's chip is another device's)."""
    here = host_identity()
    others = sorted(h for h in measured_hosts(paths).get(name, ()) if h != here
                    and not h.startswith("rpc:"))
    if others:
        raise TclError(f"device {name!r} was measured on another host kind "
                       f"({', '.join(host_kind(h) for h in others)}); this host is "
                       f"{host_kind(here)}: give this host a name of its own")
