"""What a tuning run returns (``TuneResult``, also its ``summary.json``) and what ``tcl tune``
prints about its search at the end (``report_lines``)."""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from .timing import SPLIT


@dataclass
class TuneResult:
    network: str
    device: str
    model: str
    update: str
    seed: int
    trials: int                    # measured (MetaSchedule may stop early when spaces run out)
    tasks: int
    trials_per_task: dict[str, int]
    latency_ms: float              # the compiled network, end to end, mean of the repeats
    latency_std_ms: float
    torch_ms: float                # PyTorch eager on the same cores
    max_abs_err: float             # against PyTorch's outputs
    tune_s: float
    build_s: float                 # of tune_s: building candidates
    run_s: float                   # of tune_s: running them on the device
    compile_s: float
    records_added: int
    out: str
    curve: list[dict] = field(default_factory=list)
    # the model's pairwise accuracy and top-1 on what the search measured (tcl.online)
    online: dict = field(default_factory=dict)
    # where tune_s went: {part: {"s", "share"}} (time_split), the search's predict calls and
    # candidates scored, and the adapter's feature cache (tcl models only)
    time_split: dict = field(default_factory=dict)
    scoring: dict = field(default_factory=dict)
    # the evolutionary search's size: schedules scored per generation, and generations
    search: dict = field(default_factory=dict)
    # a run that continued an interrupted one (``resume_state``): its trials, tasks and tuning
    # wall time before; tune_s, time_split and online cover this process's part only
    resumed: dict = field(default_factory=dict)
    # onnxruntime on the same cores and threads (NaN: not installed, or not a zoo network)
    onnxruntime_ms: float = math.nan
    # how the network was compiled: the Relax pipeline, its data layout and the weight layout
    compile: dict = field(default_factory=dict)

    @property
    def overhead_share(self) -> float:
        """The share of tuning wall time spent neither building nor running kernels."""
        if not self.tune_s:
            return 0.0
        return max(0.0, self.tune_s - self.build_s - self.run_s) / self.tune_s


def versus_line(r: TuneResult, cores: int) -> str:
    """The compiled network against what the user would run instead, on the same cores:
    ``52.9 ms, 1.05x PyTorch eager (50.4 ms), 1.56x onnxruntime (33.8 ms), on 1 core``."""
    parts = [f"{r.latency_ms:.1f} ms"]
    for name, ms in (("PyTorch eager", r.torch_ms), ("onnxruntime", r.onnxruntime_ms)):
        if ms == ms:   # NaN: not timed
            parts.append(f"{r.latency_ms / ms:.2f}x {name} ({ms:.1f} ms)")
    if r.onnxruntime_ms != r.onnxruntime_ms and r.torch_ms == r.torch_ms:
        parts.append('onnxruntime not installed (pip install -e ".[baselines]")')
    return ", ".join(parts) + f", on {cores} core{'s' if cores > 1 else ''}"


def report_lines(r: TuneResult) -> list[str]:
    """What ``tcl tune`` prints at the end about the search: where the time went and how the
    model ranked what the search measured."""
    split = r.time_split
    lines = [f"time: {r.tune_s:.0f}s tuning = " + ", ".join(
        f"{k} {split[k]['s']:.1f}s ({split[k]['share']:.0%})" for k in SPLIT if k in split)]
    sc = r.scoring
    if sc.get("predict_calls"):
        line = (f"scoring: {sc['scored']} candidates in {sc['predict_calls']} predict calls "
                f"({sc['scored'] / sc['predict_calls']:.0f} a call)")
        cache = sc.get("feature_cache")
        if cache and cache.get("hit_rate") is not None:
            line += (f"; featurized once each: {cache['hit_rate']:.0%} cache hits "
                     f"({cache['hits']} of {cache['hits'] + cache['misses']}), about "
                     f"{cache['saved_s']:.1f}s saved")
        lines.append(line)
    for name, what in (("as_used", "as each round's model scored them"),
                       ("final", "by the final model")):
        q = r.online.get(name)
        if q:
            lines.append(f"online ranking ({q['candidates']} measured candidates, {q['tasks']} "
                         f"tasks, weighted like the network; {what}): pairwise "
                         f"{_fmt(q['pairwise'])}, top-1 {_fmt(q['top1'])}")
    return lines


def _fmt(x) -> str:
    return "-" if x is None else f"{x:.2f}"
