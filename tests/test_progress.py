"""Never silent (issue 53, point 4): long work says done / total, rate and ETA at least every
30 s, checked with a fake clock."""
from __future__ import annotations

import re

import numpy as np
import polars as pl

from tcl.progress import EVERY_S, Progress

LINE = re.compile(r"^(?P<what>[\w ]+): (?P<done>\d+) of (?P<total>\d+) (?P<unit>\w+) done "
                  r"\(\d+%\), (?P<rate>[\d.e+-]+) \w+/s, ETA (?P<eta>[\d.]+ (s|min|h)|after .*), "
                  r"[\d.]+ (s|min|h) (so far|in all)$")


class FakeClock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_line_every_interval_with_done_total_rate_and_eta():
    assert EVERY_S <= 30
    clock, lines = FakeClock(), []
    p = Progress("featurize", 1000, report=lines.append, clock=clock, background=False)
    with p:
        for second in range(1, 121):
            clock.now += 1
            p.advance(5)             # 5 programs a second
            p.tick()
    # one line per 30 s of work and one at the end; never 30 s without a line
    assert len(lines) == 120 // int(EVERY_S) + 1
    for text in lines:
        m = LINE.match(text)
        assert m, text
        assert m["total"] == "1000" and m["unit"] == "programs"
    first = LINE.match(lines[0])
    assert first["done"] == "150" and float(first["rate"]) == 5.0
    assert first["eta"] == "2.8 min"        # 850 programs left at 5/s: 170 s
    assert lines[-1].endswith("in all")


def test_silent_before_the_interval_and_no_end_line_for_short_work():
    clock, lines = FakeClock(), []
    with Progress("export", 10, unit="records", report=lines.append, clock=clock,
                  background=False) as p:
        clock.now += EVERY_S - 1
        p.advance(10)
        assert p.tick() is None
    assert lines == []


def test_eta_before_anything_is_done_says_so():
    clock, lines = FakeClock(), []
    p = Progress("train", 36, unit="fits", report=lines.append, clock=clock, background=False)
    clock.now += EVERY_S
    p.tick()
    assert "0 of 36 fits" in lines[0] and "ETA after the first is done" in lines[0]


def test_the_background_thread_reports_without_ticks():
    """A unit of work longer than the interval (one model fit) still leaves lines."""
    import time

    lines = []
    with Progress("train", 3, unit="fits", report=lines.append, every_s=0.05) as p:
        time.sleep(0.3)
        p.advance()
    assert len(lines) >= 3 and all(LINE.match(t) for t in lines)


def test_work_deep_inside_counts_through_step():
    """A training loop counts its epochs with ``step()``; the innermost Progress that asked for
    it gets them, and nothing is counted when none is open."""
    from tcl import progress

    clock, lines = FakeClock(), []
    progress.step()                                   # no Progress open: nothing happens
    with Progress("distill zen4-1c", 100, unit="epochs", report=lines.append, clock=clock,
                  background=False, counts_steps=True) as outer:
        with Progress("read", 5, unit="lines", report=lines.append, clock=clock,
                      background=False):
            progress.step(3)                          # not a step counter: the outer one gets it
        clock.now += EVERY_S
        outer.tick()
    assert outer.done == 3 and lines[0].startswith("distill zen4-1c: 3 of 100 epochs done")


def test_an_estimate_off_by_more_than_a_quarter_is_said_with_a_new_one():
    """Estimates follow reality (issue 53, point 5): after the first batch, a rate more than
    25% off the plan's is said, with the time the rest takes at the observed rate."""
    from tcl.progress import REPLAN_TOLERANCE, replan

    assert REPLAN_TOLERANCE == 0.25
    assert replan("measure x", "records", 1.0, 1.2, 100) is None       # within the plan
    assert replan("measure x", "records", 1.0, 0.8, 100) is None
    slow = replan("measure x", "records", 1.0, 0.5, 300)
    assert slow == ("measure x: the first batch ran at 0.5 records/s, 2.0x slower than the "
                    "plan's 1; re-estimated: the 300 records left take about 10.0 min")
    fast = replan("measure x", "records", 1.0, 2.0, 60)
    assert "2.0x faster" in fast and "about 30 s" in fast


def test_tune_judges_its_plan_by_the_first_batch_built(tmp_path, monkeypatch, capsys):
    """tune's replan is made when the first batch is built, at that batch's pace. It was made at
    the first measured results, which MetaSchedule's scheduler reports only when it picks a
    task again: after a whole first round (60% of a mobilenet_v2 run at 64 trials per task),
    counting one task's candidates against all that time ('0.057 trials/s, 18.8x slower than
    the plan's 1.07; ... about 10.1 h' while the run went at 1.84 trials/s)."""
    from tcl.tune import curve
    from tcl.tune.resume import ResumeState

    clock = {"now": 1000.0}
    monkeypatch.setattr(curve.time, "perf_counter", lambda: clock["now"])
    callback = curve.progress_callback(2112, {0: 1.0}, False, [0], ResumeState(),
                                       tmp_path / "curve.jsonl", planned_rate=1.07)
    clock["now"] += 32.0
    callback.built(64)                    # 2.0 trials/s: 1.9x faster than planned
    clock["now"] += 600.0
    callback.built(64)                    # said once only
    callback.close()
    said = [line for line in capsys.readouterr().err.splitlines() if "first batch" in line]
    assert said == ["tune: the first batch ran at 2 trials/s, 1.9x faster than the plan's "
                    "1.07; re-estimated: the 2048 trials left take about 17.1 min"]
