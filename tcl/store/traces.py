"""Trace serialisation: the one text form of a MetaSchedule trace, whose hash is a program's id
(``tcl.store.records.program_id``): sampled candidates, imported JSONDatabase lines and the
tuner's measured programs all go through it."""
from __future__ import annotations

import json
from typing import Any

from ..config import TclError


def canonical_trace_json(trace_obj: list) -> str:
    """The one text form of a trace (ids hash it): compact JSON, booleans as 0/1 as in
    MetaSchedule's JSONDatabase files, so a trace read back from such a file keeps its id."""
    def canon(o: Any) -> Any:
        if isinstance(o, bool):
            return int(o)
        if isinstance(o, list):
            return [canon(x) for x in o]
        return o

    return json.dumps(canon(trace_obj), separators=(",", ":"))


def trace_to_json(trace) -> str:
    """Canonical JSON of a MetaSchedule trace object (IntImm -> int, FloatImm -> float)."""
    import tvm

    def plain(o: Any) -> Any:
        if isinstance(o, (bool, int, float)):
            return o
        if isinstance(o, str):
            return str(o)
        if isinstance(o, tvm.tirx.IntImm):
            return int(o.value)
        if isinstance(o, tvm.tirx.FloatImm):
            return float(o.value)
        if hasattr(o, "__iter__") and not hasattr(o, "keys"):
            return [plain(x) for x in o]
        raise TclError(f"trace holds a value of type {type(o).__name__} that has no JSON form")

    return canonical_trace_json(plain(trace.as_json()))
