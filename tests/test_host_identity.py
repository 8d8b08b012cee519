"""Host identity: two EPYCs that /proc/cpuinfo both names "AMD EPYC" (a Zen 1 without AVX-512,
a Zen 4 with it) get different identities, hence different record ids; records stored before
hosts were told apart still count as measured on this host; `tcl status` says which host
measured what."""
from __future__ import annotations

import json

from test_store import rows

from tcl.store.devices import BUILTIN_DEVICES, host_identity, parse_cpuinfo
from tcl.measure.collect import measured_before
from tcl.store.records import RecordStore, record_id

ZEN1 = """processor\t: 0
vendor_id\t: AuthenticAMD
cpu family\t: 23
model\t\t: 1
model name\t: AMD EPYC
stepping\t: 2
flags\t\t: fpu sse4_2 avx avx2 fma f16c
processor\t: 1
model name\t: something else
"""
ZEN4 = """processor\t: 0
vendor_id\t: AuthenticAMD
cpu family\t: 25
model\t\t: 17
model name\t: AMD EPYC
stepping\t: 1
flags\t\t: fpu sse4_2 avx avx2 fma f16c avx512f avx512bw avx512vl avx512_vnni avx512_bf16
"""


def test_two_epycs_of_one_model_name_are_told_apart():
    zen1, zen4 = parse_cpuinfo(ZEN1), parse_cpuinfo(ZEN4)
    assert zen1[0] == zen4[0] == "AMD EPYC"
    assert host_identity(zen1) == ("AMD EPYC (AuthenticAMD family 23 model 1 stepping 2; "
                                   "avx avx2 f16c fma sse4_2)")
    assert host_identity(zen4) == ("AMD EPYC (AuthenticAMD family 25 model 17 stepping 1; "
                                   "avx avx2 avx512_bf16 avx512_vnni avx512bw avx512f "
                                   "avx512vl f16c fma sse4_2)")


def test_records_from_before_the_host_identity_count_as_measured():
    device = BUILTIN_DEVICES["cpu-avx2"]
    assert device.identity != device.legacy_identity
    assert json.loads(device.identity)["host"] == host_identity()
    trace = json.dumps([[["Split", [], [1], []]], []])
    legacy = record_id(device.legacy_identity, "t1", trace)
    other_host = record_id(device.identity.replace(host_identity(), "another host"), "t1", trace)
    assert measured_before(device, "t1", trace, {legacy})
    assert measured_before(device, "t1", trace, {record_id(device.identity, "t1", trace)})
    assert not measured_before(device, "t1", trace, {other_host})
    assert not measured_before(device, "t2", trace, {legacy})


def test_status_names_the_hosts_that_measured_a_device(paths):
    from tcl.pipeline.status import device_status

    old = rows(n=2)
    new = [dict(r, host_cpu=host_identity()) for r in rows(n=3, offset=2)]
    RecordStore(paths).append([dict(r, host_cpu="AMD EPYC") for r in old] + new)
    (row,) = device_status(paths).filter(device="cpu-avx2").iter_rows(named=True)
    assert row["hosts"] == f"AMD EPYC: 2; {host_identity()}: 3"
