"""A tuning run's curve: the best network latency estimated from the tasks' best measured
latencies, weighted, against trials and wall time. ``progress_callback`` records it as the
search measures (and shows a progress line); ``write_curve`` writes ``curve.csv`` and
``curve.png`` at the end."""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np

from ..config import atomic_write, save_figure
from ..progress import Progress as Lines, replan
from ..tvm_compat import meta_schedule
from .resume import ResumeState
from .result import TuneResult


def progress_callback(total: int, weights: dict[int, float], show: bool,
                      tuned: list[int], before: ResumeState, curve_file: Path,
                      planned_rate: float | None = None):
    """A MetaSchedule measure callback: the tasks' best latencies as trials come in (the curve,
    each point also appended to ``curve_file`` so that a resumed run continues it) and a
    progress line with trials, the estimated network latency and the ETA. ``tuned`` maps the
    scheduler's task ids to the network's (a resumed run tunes a subset); ``before``: what the
    interrupted run had measured. ``planned_rate``: trials per second the dry run's estimate
    assumes; the first batch built at a pace more than 25% off it is said, with a new
    estimate."""
    from tqdm import tqdm

    ms = meta_schedule()
    from tvm.ir.utils import derived_object

    from ..online import run_latency   # lazy: MetaSchedule (~25 s), after meta_schedule()

    @derived_object
    class Progress(ms.measure_callback.PyMeasureCallback):
        def __init__(self):
            super().__init__()
            self.start = time.perf_counter() - before.wall_s
            self.best: dict[int, float] = dict(before.best)
            self.trials: dict[int, int] = dict(before.trials)
            self.curve: list[dict] = list(before.curve)
            # the replan is judged by builds: MetaSchedule's scheduler reports a task's results
            # only when it picks the task again, so the first results come after a whole round
            # (most of a short run) and count one task's candidates against all that time
            self.paced = False
            self.bar = tqdm(total=total, initial=before.measured, unit="trial",
                            desc="tune", disable=not show)
            # no terminal (a script, a CI log, nohup): a progress line every EVERY_S seconds,
            # counting candidates as they are built (``built``: the run's builder calls it)
            self.lines = None if show else Lines("tune (built)", total, unit="trials").__enter__()
            if self.lines is not None:
                self.lines.advance(before.measured)

        def built(self, n: int) -> None:
            if self.lines is not None:
                self.lines.advance(n)
            if planned_rate and not self.paced:   # the first batch built: the run's pace
                elapsed = time.perf_counter() - self.start - before.wall_s
                line = replan("tune", "trials", planned_rate, n / max(elapsed, 1e-9),
                              total - before.measured - n)
                if line:
                    self.bar.write(line, file=sys.stderr)
            self.paced = True

        def close(self) -> None:
            self.bar.close()
            if self.lines is not None:
                self.lines.__exit__(None, None, None)

        def apply(self, task_scheduler, task_id, measure_candidates, builder_results,
                  runner_results) -> None:
            task_id = tuned[task_id]
            for r in runner_results:
                latency = run_latency(r)
                if latency == latency:   # not NaN: the run succeeded
                    self.best[task_id] = min(self.best.get(task_id, np.inf), latency)
            self.trials[task_id] = self.trials.get(task_id, 0) + len(measure_candidates)
            n = sum(self.trials.values())
            # defined once every task has had its first round; a task none of whose candidates
            # ran (e.g. an embedding gather, which MetaSchedule's runner feeds random indices)
            # is left out of the sum, as it has no latency to add
            estimate = (sum(weights[t] * self.best[t] for t in weights if t in self.best) * 1e3
                        if all(t in self.trials for t in weights) else float("nan"))
            elapsed = time.perf_counter() - self.start
            self.curve.append({"trials": n, "wall_s": round(elapsed, 2),
                               "estimate_ms": estimate})
            with curve_file.open("a") as f:
                f.write(json.dumps(self.curve[-1]) + "\n")
            self.bar.update(len(measure_candidates))
            self.bar.set_postfix_str("best est. " + (f"{estimate:.2f} ms" if estimate == estimate
                                                     else f"- ({len(self.best)}/{len(weights)} tasks)"))

    return Progress()


def write_curve(result: TuneResult, out: Path) -> None:
    """``curve.csv`` and ``curve.png`` (against trials and wall time, with the compiled network's
    and PyTorch's latencies) in ``out``."""
    import polars as pl

    frame = pl.DataFrame(result.curve, schema={"trials": pl.Int64, "wall_s": pl.Float64,
                                               "estimate_ms": pl.Float64})
    with atomic_write(out / "curve.csv", "tuning curve") as tmp:
        frame.write_csv(tmp, float_precision=4)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.5))
    for ax, x in zip(axes, ("trials", "wall_s")):
        ax.plot(frame[x], frame["estimate_ms"], label="best estimate (tasks' best, weighted)")
        ax.axhline(result.latency_ms, color="k", ls="--", lw=1, label="compiled, end to end")
        if result.torch_ms == result.torch_ms:
            ax.axhline(result.torch_ms, color="r", ls=":", lw=1, label="PyTorch eager")
        ax.set_xlabel(x)
        ax.set_ylabel("ms")
        ax.set_yscale("log")
    axes[0].legend(fontsize=7)
    fig.suptitle(f"{result.network} on {result.device}: {result.model}", fontsize=9)
    fig.tight_layout()
    save_figure(fig, out / "curve.png", "tuning curve plot", dpi=100)
    plt.close(fig)
