"""The rules a params knob's value must follow, declared beside the knob: each section of
``tcl.pipeline.params`` maps its keys to rules in ``_parameter_constraints``, after
scikit-learn's. A rule checks a value (``check``: the value as the params hold it, or
``Refused`` naming the key and the problem) and says which values break it (``bad``: pairs of a
value and words of its refusal), from which tests/test_params_constraints.py makes a bad-input
test of every knob: a new knob gets its bounds tested with no new test code.

What a rule looks up it finds in ``known`` by name: a registry ("model kinds", loaded on first
use), the devices registered under the data root, or a knob checked before it ("devices")."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..budget import EXPECTED as BUDGET_RULE
from ..budget import check_budget
from ..config import TclError


class Refused(TclError):
    """A value that breaks its knob's rule: "<key>: <problem>" (the params loader adds the
    file's name in front)."""

    def __init__(self, key: str, problem: str):
        super().__init__(f"{key}: {problem}" if key else problem)
        self.key, self.problem = key, problem


def show(value: Any) -> str:
    """A value as a refusal names it: its type and its first 60 characters."""
    text = repr(value)
    return f"{type(value).__name__} {text[:60]}" if value is not None else "nothing (null)"


def _known(value: Any, known: Mapping[str, Any]) -> Any:
    """``value``, or what ``known`` holds under it when it is a name (a registry's bound)."""
    return known[value] if isinstance(value, str) else value


class Rule:
    def check(self, value: Any, key: str, known: Mapping[str, Any]) -> Any:
        raise NotImplementedError

    def bad(self, valid: Any, known: Mapping[str, Any]) -> list[tuple[Any, str]]:
        """Values this rule refuses (``valid``: one it takes), each with words of the refusal."""
        raise NotImplementedError


class All(Rule):
    """Each of ``rules`` in turn (a knob's own rule, then one across knobs)."""

    def __init__(self, *rules: Rule):
        self.rules = rules

    def check(self, value, key, known):
        for rule in self.rules:
            value = rule.check(value, key, known)
        return value

    def bad(self, valid, known):
        return [case for rule in self.rules for case in rule.bad(valid, known)]


@dataclass(frozen=True)
class Integer(Rule):
    low: int
    high: int | str | None      # a bound, its name in ``known``, or None: no upper bound
    null: bool = False          # null allowed (e.g. "no limit")

    def check(self, value, key, known):
        if value is None and self.null:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            what = "an integer or null" if self.null else "an integer"
            raise Refused(key, f"expected {what}, got {show(value)}")
        high = _known(self.high, known)
        if value < self.low:
            raise Refused(key, f"must be >= {self.low}, got {value}")
        if high is not None and value > high:
            raise Refused(key, f"must be <= {high}, got {value}")
        return value

    def bad(self, valid, known):
        high = _known(self.high, known)
        return [("3", "expected an integer"), (1.5, "expected an integer"),
                (True, "expected an integer"), (self.low - 1, f"must be >= {self.low}")] + \
            ([] if high is None else [(high + 1, f"must be <= {high}")]) + \
            ([] if self.null else [(None, "expected an integer, got nothing")])


@dataclass(frozen=True)
class Number(Rule):
    low: float
    high: float

    def check(self, value, key, known):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise Refused(key, f"expected a number, got {show(value)}")
        if not self.low <= value <= self.high:
            raise Refused(key, f"must lie in [{self.low}, {self.high}], got {value}")
        return float(value)

    def bad(self, valid, known):
        where = f"must lie in [{self.low}, {self.high}]"
        return [("1", "expected a number"), (False, "expected a number"),
                (None, "expected a number"), (self.low - 1, where), (self.high * 2 + 1, where)]


class Boolean(Rule):
    def check(self, value, key, known):
        if not isinstance(value, bool):
            raise Refused(key, f"expected true or false, got {show(value)}")
        return value

    def bad(self, valid, known):
        return [(v, "expected true or false") for v in ("yes", 1, None)]


class Budget(Rule):
    """A count (an integer >= 1) or a share of a pool (a number in (0, 1]): tcl.budget's rule."""

    def check(self, value, key, known):
        try:
            return check_budget(value)
        except TclError as e:
            raise Refused(key, str(e)) from None

    def bad(self, valid, known):
        return [(v, BUDGET_RULE) for v in (0, -3, 1.5, "5", True, None)]


@dataclass(frozen=True)
class OneOf(Rule):
    options: tuple[str, ...] | str  # the values, or their name in ``known`` (a registry)
    what: str | None = None         # a registry's item, e.g. "sampler": "unknown sampler ..."

    def check(self, value, key, known):
        options = list(_known(self.options, known))
        if isinstance(value, str) and value in options:
            return value
        if self.what:
            raise Refused(key, f"unknown {self.what} {value!r} (known: {', '.join(options)})")
        listed = " or ".join(options) if len(options) == 2 and not isinstance(self.options, str) \
            else "one of " + ", ".join(options)   # a registry's are listed
        raise Refused(key, f"expected {listed}, got {show(value)}")

    def bad(self, valid, known):
        words = f"unknown {self.what}" if self.what else "expected "
        return [("no-such-thing", words), (3, words), (None, words)]


@dataclass(frozen=True)
class Names(Rule):
    """A list of distinct names, each one of the known ones."""
    what: str                   # e.g. "device"
    among: str                  # the known names' name in ``known``
    empty: bool = False         # [] allowed

    def check(self, value, key, known):
        if self.empty and value == []:
            return ()
        if not isinstance(value, list) or not value:
            raise Refused(key, f"expected a non-empty list of {self.what}s, got {show(value)}")
        among = known[self.among]
        for i, name in enumerate(value):
            if not isinstance(name, str):
                raise Refused(f"{key}[{i}]", f"expected a {self.what} name, got {show(name)}")
            if name not in among:
                raise Refused(f"{key}[{i}]", f"unknown {self.what} {name!r} "
                                             f"(known: {', '.join(sorted(among))})")
            if name in value[:i]:
                raise Refused(f"{key}[{i}]", f"{self.what} {name!r} is listed twice")
        return tuple(value)

    def bad(self, valid, known):
        cases = [(self.what, f"expected a non-empty list of {self.what}s"),
                 ([3], f"expected a {self.what} name"),
                 (["no-such-thing"], f"unknown {self.what} 'no-such-thing'")]
        if not self.empty:
            cases.append(([], f"expected a non-empty list of {self.what}s"))
        if valid:
            cases.append(([valid[0], valid[0]], "is listed twice"))
        return cases


@dataclass(frozen=True)
class ListOf(Rule):
    """A non-empty list, each item by ``item``'s rule."""
    item: Rule
    what: str                   # the items, e.g. "integers"

    def check(self, value, key, known):
        if not isinstance(value, list) or not value:
            raise Refused(key, f"expected a non-empty list of {self.what}, got {show(value)}")
        return tuple(self.item.check(v, f"{key}[{i}]", known) for i, v in enumerate(value))

    def bad(self, valid, known):
        return [([], f"expected a non-empty list of {self.what}"),
                ("x", f"expected a non-empty list of {self.what}")] + \
            [([*valid, v], words) for v, words in self.item.bad(valid[0], known)]


@dataclass(frozen=True)
class Section(Rule):
    """A mapping with exactly these keys, each by its rule, checked in this order; what each
    gives is in ``known`` under its full key ("train.models") for the rules after it."""
    rules: Mapping[str, Rule]

    @classmethod
    def of(cls, params_class: type) -> Section:
        """A params dataclass's section (its ``_parameter_constraints``)."""
        return cls(params_class._parameter_constraints)

    def check(self, value, key, known):
        expected = tuple(self.rules)
        if not isinstance(value, dict):
            raise Refused(key, f"expected a mapping with keys {', '.join(expected)}, "
                               f"got {show(value)}")
        unknown = [k for k in value if k not in expected]
        if unknown:
            raise Refused(_join(key, unknown[0]),
                          f"unknown key (expected one of: {', '.join(expected)})")
        missing = [k for k in expected if k not in value]
        if missing:
            raise Refused(_join(key, missing[0]),
                          "missing value (every knob must be set in the params file)")
        checked = {}
        for k, rule in self.rules.items():
            checked[k] = known[_join(key, k)] = rule.check(value[k], _join(key, k), known)
        return checked

    def bad(self, valid, known):
        first = next(iter(self.rules))
        return [("x", "expected a mapping with keys"),
                ({**valid, "no_such_knob": 1}, "unknown key (expected one of:"),
                ({k: v for k, v in valid.items() if k != first}, "missing value")]


def _join(key: str, name: Any) -> str:
    return f"{key}.{name}" if key else str(name)
