"""Figures of docs/results.md's pipeline sections: the main job's stage files
(benchmarks/main_job.py's JSON, flows/pipeline.py's pipeline-stages.json)."""
from __future__ import annotations

import json
from datetime import datetime

from _evidence import DOCS

TARGET_MIN = {"main job": 15, "README command 1": 10}   # issue 24 point 2; issue 53 point 3


def quiet_run() -> str:
    run = json.loads((DOCS / "bench-main-job-quiet.json").read_text())
    minutes = run["total_seconds"] / 60
    return (f"**Run 3, on a quiet host: {minutes:.1f} minutes, the target "
            f"{'met' if minutes <= TARGET_MIN['main job'] else 'missed'}.**")


def fresh_clone() -> str:
    stages = json.loads((DOCS / "bench-pipeline-after-2026-12-07.json").read_text())["stages"]
    start, end = (datetime.fromisoformat(stages[i][k]) for i, k in ((0, "start"), (-1, "end")))
    minutes = (end - start).total_seconds() / 60
    return (f"README command 1 at today's size in at most 10 minutes, install excluded: "
            f"**{'met' if minutes <= TARGET_MIN['README command 1'] else 'missed'}** (its stages "
            f"{minutes:.1f} min from the first's start to the last's end, the flow's own "
            f"`pipeline-stages.json`; the command, start-up included, 4.0 min by the shell)")


VERDICTS = {"pipeline.quiet-run": quiet_run, "pipeline.fresh-clone": fresh_clone}
