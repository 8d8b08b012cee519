"""The committed raw files behind docs/results.md, and the one rule every printed figure follows.

The rule (docs/results.md says it once, in the headline's caption):
- ``±`` is the standard error of the mean over seeds, n stated; a figure whose ``±`` is over
  something else (cells, devices, rounds) names it (``Sample.over``).
- A difference is "beyond the noise" when a two-sided t-test at 5% rejects zero: paired by
  seed where both sides share seeds, |mean| > t(0.975, n - 1) x SE; two independent samples:
  Welch's test. With n = 2 or fewer on a side that needs a spread the verdict is "not
  decidable", whatever the means say.
"""
from __future__ import annotations

import functools
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
ALPHA = 0.05        # two-sided
MIN_DECIDABLE = 3   # fewer values than this: no spread to test against


@functools.cache
def rows(name: str) -> tuple[dict, ...]:
    """The JSON lines of ``docs/<name>`` (read once; do not change them)."""
    return tuple(json.loads(line) for line in (DOCS / name).read_text().splitlines()
                 if line.strip())


@functools.cache
def markdown_rows(name: str | None, must_have: str, text: str | None = None) -> list[dict]:
    """Every row of the markdown tables in ``docs/<name>`` (or in ``text``, a script's output)
    whose header has ``must_have``, as dicts of the header's names to the cells' text."""
    out, header = [], None
    for line in (text if text is not None else (DOCS / name).read_text()).splitlines():
        if not line.startswith("|"):
            header = None
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if header is None:
            header = cells if must_have in cells else []
        elif header and not set(line) <= set("|-: "):
            out.append(dict(zip(header, cells)))
    return out


def printed(job, *args, **kwargs) -> str:
    """What a benchmark script's summary function prints (its tables are the one place their
    arithmetic lives), as text."""
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        job(*args, **kwargs)
    return out.getvalue()


def t_critical(n: int) -> float:
    """The two-sided 5% critical value of Student's t with n - 1 degrees of freedom."""
    from scipy.stats import t

    return float(t.ppf(1 - ALPHA / 2, n - 1))


@dataclass(frozen=True)
class Sample:
    """Values of one quantity (per seed unless ``over`` says otherwise): mean ± SE and the test
    of the rule above. ``digits`` and ``sign`` only shape the text."""

    values: tuple[float, ...]
    over: str = "seeds"

    @classmethod
    def of(cls, values, over: str = "seeds") -> "Sample":
        v = tuple(float(x) for x in values if x is not None and math.isfinite(float(x)))
        if not v:
            raise ValueError("a sample needs at least one finite value")
        return cls(v, over)

    @property
    def n(self) -> int:
        return len(self.values)

    @property
    def mean(self) -> float:
        return float(np.mean(self.values))

    @property
    def se(self) -> float:
        return float(np.std(self.values, ddof=1) / math.sqrt(self.n)) if self.n > 1 else math.nan

    @property
    def t(self) -> float:
        return self.mean / self.se if self.n > 1 and self.se > 0 else math.nan

    def beyond(self) -> bool | None:
        """Whether the mean differs from zero beyond the noise; None: not decidable."""
        if self.n < MIN_DECIDABLE:
            return None
        return bool(self.se == 0 and self.mean != 0) or abs(self.t) > t_critical(self.n)

    def text(self, digits: int = 3, sign: bool = False, unit: str = "") -> str:
        """``mean ± se`` (one value: the value and "n = 1")."""
        f = f"{{:{'+' if sign else ''}.{digits}f}}"
        if self.n == 1:
            return f.format(self.mean) + unit + " (n = 1)"
        return f.format(self.mean) + f" ± {self.se:.{digits}f}{unit}"

    def test(self) -> str:
        """The verdict of the rule after its statistic: 't = 4.1, n = 5: beyond the noise'."""
        got = self.beyond()
        if got is None:
            return f"n = {self.n}: not decidable"
        stat = "SE 0" if self.se == 0 else f"t = {self.t:.1f}"
        return f"{stat}, n = {self.n}: {'beyond' if got else 'within'} the noise"


def welch(a: Sample, b: Sample) -> str:
    """Whether two independent samples' means differ beyond the noise (Welch's t-test)."""
    from scipy.stats import ttest_ind

    if min(a.n, b.n) < MIN_DECIDABLE:
        return f"n = {a.n} and {b.n}: not decidable"
    res = ttest_ind(a.values, b.values, equal_var=False)
    word = "beyond" if res.pvalue < ALPHA else "within"
    return f"Welch t = {res.statistic:.1f}, n = {a.n} and {b.n}: {word} the noise"


def paired(a: dict, b: dict, over: str = "seeds") -> Sample:
    """a - b over the keys (seeds) both have."""
    keys = sorted(set(a) & set(b))
    return Sample.of([a[k] - b[k] for k in keys], over)


def ratio(a: dict, b: dict, over: str = "seeds") -> Sample:
    """a / b over the keys (seeds) both have."""
    keys = sorted(set(a) & set(b))
    return Sample.of([a[k] / b[k] for k in keys], over)


def span(values, digits: int = 2, unit: str = "") -> str:
    """'lo-hi' of some values (one value: itself)."""
    lo, hi = min(values), max(values)
    return f"{lo:.{digits}f}{unit}" if f"{lo:.{digits}f}" == f"{hi:.{digits}f}" \
        else f"{lo:.{digits}f}-{hi:.{digits}f}{unit}"


def number(text: str) -> float:
    """The leading number of a table cell ('0.623 (0.04)' -> 0.623)."""
    return float(re.match(r"\s*([-+]?[\d.]+)", text)[1])
