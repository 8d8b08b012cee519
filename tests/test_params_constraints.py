"""Bad-input tests of every params knob, made from the rules its section declares
(``_parameter_constraints`` in tcl/pipeline/params.py): each bad value a knob's rule names
(``Rule.bad``), put in the tiny params file in place of the good one, is refused with one line
that names the file, the knob's section and the problem. A new knob gets its bounds tested here
with no new test code."""
from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from tcl.config import TclError
from tcl.pipeline.constraints import Section
from tcl.pipeline.params import Params, parse_params
from tcl.pipeline.params_rules import Known

ROOT = Path(__file__).resolve().parents[1]
TINY = yaml.safe_load((ROOT / "tests" / "tiny_params.yaml").read_text())


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> tuple[dict, Path]:
    """The tiny params, on a data root of their own, and where their file would be."""
    raw = copy.deepcopy(TINY)
    raw["data"] = str(tmp_path_factory.mktemp("params") / "data")
    return raw, Path(raw["data"]).parent / "params.yaml"


@pytest.fixture(scope="module")
def known(tiny) -> Known:
    """Everything the rules look up, after the tiny file's own knobs were checked."""
    raw, source = tiny
    found = Known(source)
    Section.of(Params).check(copy.deepcopy(raw), "", found)
    return found


def _knobs(section: Section, prefix: tuple[str, ...] = ()):
    """(key path, rule) of every knob, a section's own rule (a mapping of its keys) included."""
    for key, rule in section.rules.items():
        yield prefix + (key,), rule
        if isinstance(rule, Section):
            yield from _knobs(rule, prefix + (key,))


KNOBS = list(_knobs(Section.of(Params)))


def _value(raw: dict, where: tuple[str, ...]):
    for k in where:
        raw = raw[k]
    return raw


@pytest.mark.parametrize("where, rule", KNOBS, ids=[".".join(w) for w, _ in KNOBS])
def test_every_bad_value_a_knobs_rule_names_is_refused_naming_the_knob(tiny, known, where,
                                                                       rule):
    good, source = tiny
    cases = rule.bad(copy.deepcopy(_value(good, where)), known)
    assert cases, f"{'.'.join(where)}: its rule names no bad value"
    section = where[0]
    for value, words in cases:
        raw = copy.deepcopy(good)
        _value(raw, where[:-1])[where[-1]] = value
        with pytest.raises(TclError) as e:
            parse_params(raw, source, check_models=False)
        message = str(e.value)
        assert message.startswith(f"params.yaml: {section}") and words in message \
            and "\n" not in message, (value, words, message)


def test_every_knob_of_the_file_has_a_rule_and_the_tiny_file_passes_them(tiny, known):
    """The rules cover the file (an unknown key is refused), and the values they give are the
    ones the params hold."""
    def keys(raw, prefix=()):
        for k, v in raw.items():
            yield prefix + (k,)
            if isinstance(v, dict) and prefix + (k,) in sections:
                yield from keys(v, prefix + (k,))
    sections = {w for w, r in KNOBS if isinstance(r, Section)}
    assert set(keys(TINY)) == {w for w, _ in KNOBS}
    params = parse_params(copy.deepcopy(tiny[0]), tiny[1], check_models=False)
    assert params.train.models == known["train.models"] and params.continual.sequence == \
        (known["continual.first"], *known["continual.then"])
