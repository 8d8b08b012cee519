"""The budget rule, in one place: how many programs to select, as a count or a share of a pool.

The params file (``select.budget``, ``continual.subset``), the CLI (``--budget``) and the
samplers all check a budget here, so they accept the same values and say the same thing.
"""
from __future__ import annotations

import math
import numbers
from typing import Any

from .config import TclError

EXPECTED = "expected a count (integer >= 1) or a share of the pool (number in (0, 1])"
# Above any pool: the zoo's ~1600 tasks x 4096 programs per task (tcl.sampling's cap) is 6.6M.
MAX_COUNT = 10_000_000


def check_budget(budget: Any) -> int | float:
    """``budget`` as a count (int >= 1) or a share (float in (0, 1]); anything else (a bool,
    a string, 0, 1.5, NaN) is a TclError that says what was expected."""
    # numpy's bool is no numbers.Real, its integers are: both as Python's own
    if isinstance(budget, bool) or not isinstance(budget, numbers.Real):
        raise TclError(f"{EXPECTED}, got {budget!r} ({type(budget).__name__})")
    if isinstance(budget, numbers.Integral):
        if budget < 1:
            raise TclError(f"{EXPECTED}, got {budget} (selects nothing)")
        if budget > MAX_COUNT:
            raise TclError(f"a count is at most {MAX_COUNT} (more than any pool holds), got "
                           f"{budget}; for all of the pool, give 1.0")
        return int(budget)
    share = float(budget)
    if math.isnan(share) or not 0 < share <= 1:
        hint = "; for a count, give an integer" if share > 1 else ""
        raise TclError(f"{EXPECTED}, got {share}{hint}")
    return share


def budget_from_text(text: str) -> int | float:
    """A budget written as text (``--budget``): "50" is a count, "0.1" a share."""
    try:
        value: int | float = int(text)
    except ValueError:
        try:
            value = float(text)
        except ValueError:
            raise TclError(f"{EXPECTED}, got {text!r}") from None
    return check_budget(value)


def parse_budget(budget: Any, pool_size: int) -> int:
    """A budget -> a count >= 1 of a pool of ``pool_size`` (a share never rounds to nothing)."""
    value = check_budget(budget)
    return value if isinstance(value, int) else max(1, round(value * pool_size))
