"""Property-based tests (hypothesis) of the three parsers that take a user's input as it is:
the MetaSchedule importer, the params loader and the target parser. Whatever they are given,
they either succeed or raise a TclError; no other exception escapes."""
import json
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tcl.config import Paths, TclError
from tcl.store.devices import BUILTIN_DEVICES, make_target
from tcl.pipeline.params import load_params, parse_params

ROOT = Path(__file__).resolve().parent.parent
TINY = yaml.safe_load((ROOT / "tests" / "tiny_params.yaml").read_text())
SETTINGS = settings(max_examples=60, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture,
                                           HealthCheck.too_slow])

scalars = st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**6),
                    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=12))
values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)),
    max_leaves=8)


# ---- targets --------------------------------------------------------------------------------

TARGET_KEYS = ["kind", "mcpu", "num-cores", "mtriple", "mattr", "keys", "device", "tag", "bogus"]
targets = st.dictionaries(st.sampled_from(TARGET_KEYS), st.one_of(
    scalars, st.sampled_from(["llvm", "c", "cuda", "haswell", "znver4", "nehalem", "x86_64"]),
    st.lists(st.sampled_from(["+avx2", "cpu", "-sse4.2", ""]), max_size=3)), max_size=5)


@SETTINGS
@given(target=st.one_of(targets, values))
def test_the_target_parser_accepts_or_names_the_problem(target):
    try:
        made = make_target(target)
    except TclError as e:
        assert "invalid target" in str(e)
    else:
        assert made is not None and isinstance(target, dict) and "kind" in target


@SETTINGS
@given(text=st.one_of(st.text(max_size=40), targets.map(json.dumps)))
def test_device_add_takes_any_target_text(tmp_path, text):
    """Any text as a target: registered as exactly that target, or refused naming the target,
    with nothing registered."""
    from tcl.store.devices import DeviceRegistry

    paths = Paths(tmp_path / "data")
    registry = DeviceRegistry(paths)
    before = paths.devices_file.read_bytes() if paths.devices_file.exists() else None
    try:
        registry.add("prop", text, replace=True)
    except TclError as e:
        message = str(e)
        assert "target" in message, message
        after = paths.devices_file.read_bytes() if paths.devices_file.exists() else None
        assert after == before                       # nothing registered
    else:
        assert registry.get("prop").target == json.loads(text)


# ---- params ---------------------------------------------------------------------------------

def key_paths(raw, prefix=()):
    if isinstance(raw, dict):
        for k, v in raw.items():
            yield prefix + (k,)
            yield from key_paths(v, prefix + (k,))


PATHS = list(key_paths(TINY))


@SETTINGS
@given(where=st.sampled_from(PATHS), value=values, drop=st.booleans())
def test_the_params_loader_accepts_or_names_the_key(tmp_path, where, value, drop):
    raw = json.loads(json.dumps(TINY))
    raw["data"] = str(tmp_path / "data")
    node = raw
    for k in where[:-1]:
        node = node[k]
    if drop:
        del node[where[-1]]
    else:
        node[where[-1]] = value
    try:
        parse_params(raw, tmp_path / "params.yaml")
    except TclError as e:
        assert str(e).startswith("params.yaml")


@SETTINGS
@given(text=st.text(max_size=200))
def test_any_params_text_is_loaded_or_refused(tmp_path, text):
    """Any text as params.yaml: refused naming the file (random text is never a whole valid
    params file: every section is required; the CLI shows the message as one line)."""
    f = tmp_path / "params.yaml"
    f.write_text(text)
    with pytest.raises(TclError) as e:
        load_params(f)
    message = str(e.value)
    assert "params.yaml" in message, message


# ---- the MetaSchedule importer --------------------------------------------------------------

@pytest.fixture(scope="module")
def valid_db(tmp_path_factory):
    """One workload line and three tuning-record lines, made by MetaSchedule itself."""
    from conftest import metaschedule_database
    from tcl.measure.msjson import RECORD_FILE, WORKLOAD_FILE

    out = metaschedule_database(tmp_path_factory.mktemp("db"))
    return Lines((out / WORKLOAD_FILE).read_text().splitlines(),
                 (out / RECORD_FILE).read_text().splitlines())


class Lines(tuple):
    """The database's lines, with a short repr (hypothesis prints its inputs on failure)."""

    def __new__(cls, workloads, records):
        return super().__new__(cls, (workloads, records))

    def __repr__(self) -> str:
        return f"Lines({len(self[0])} workload lines, {len(self[1])} record lines)"


def garbled(lines):
    """A line of the file as it was, cut short, replaced, or with its workload index moved."""
    line = st.sampled_from(lines)
    return st.one_of(
        line,
        st.tuples(line, st.integers(0, 400)).map(lambda t: t[0][:t[1]]),
        st.text(max_size=60),
        values.map(json.dumps),
        st.tuples(line, st.integers(-3, 5)).map(
            lambda t: json.dumps([t[1]] + json.loads(t[0])[1:])),
    )


@SETTINGS
@given(data=st.data())
def test_the_importer_keeps_good_lines_and_names_bad_ones(tmp_path, valid_db, data):
    from tcl.measure.msjson import RECORD_FILE, WORKLOAD_FILE, import_database

    workloads, records = valid_db
    wl_lines = data.draw(st.lists(garbled(workloads), min_size=0, max_size=3))
    rec_lines = data.draw(st.lists(garbled(records), min_size=0, max_size=6))
    import tempfile

    db = Path(tempfile.mkdtemp(dir=tmp_path))
    (db / WORKLOAD_FILE).write_text("\n".join(wl_lines) + "\n")
    (db / RECORD_FILE).write_text("\n".join(rec_lines) + "\n")
    paths = Paths(tmp_path / "data")
    try:
        stats = import_database(paths, db, BUILTIN_DEVICES["cpu-avx2"])
    except TclError:
        return
    assert stats.records <= len(rec_lines)
    assert all(":" in p for p in stats.problems)   # each names its file and line
