"""Figures of docs/results.md's tuning sections on the Zen 1, Zen 5 and Xeon hosts: what
benchmarks/tuning.py and benchmarks/frameworks.py print from their committed rows (their tables
are the one place that arithmetic lives)."""
from __future__ import annotations

import functools
import re

from _evidence import DOCS, markdown_rows, number, printed, rows

FOUR = "bench-tuning.jsonl"                 # 4 trials per task, Zen 1, 2026-12-01/02
XEON = "bench-tuning-64-xeon.jsonl"         # 64 trials per task, Intel Xeon, 2026-12-05/06
XEON_FRAMEWORKS = "bench-frameworks-xeon.jsonl"
RESNET_DAY1 = "bench-tuning-64-resnet18.jsonl"   # the Xeon's first day, one seed
BERT_ZEN5 = "bench-tuning-64.jsonl"         # bert_tiny, Zen 5, one seed
ISA_FRAMEWORKS = "bench-frameworks-isa.jsonl"


@functools.cache
def summary(name: str, reference: str = "xgb-online", frameworks: str | None = None) -> str:
    """benchmarks/tuning.py --summarize of ``docs/<name>``."""
    import tuning

    return printed(tuning.summarize, DOCS / name, None, reference,
                   DOCS / frameworks if frameworks else None)


def runs(name: str, reference: str = "xgb-online", frameworks: str | None = None) -> list[dict]:
    """The summary's table of runs (one row per network, device and model setting)."""
    return markdown_rows(None, "runs", summary(name, reference, frameworks))


def targets(name: str, frameworks: str | None = None) -> list[dict]:
    """The summary's table of issue 26's targets, one row per tcl setting."""
    return markdown_rows(None, "tuned / eager", summary(name, "xgb-online", frameworks))


def _cell(text: str) -> float | None:
    return None if text.startswith("-") else number(text)


def four_trials() -> dict:
    """At 4 trials per task against TenSet-MLP's final estimate (Zen 1): the search alone and
    with the device data's measuring time."""
    got = runs(FOUR, reference="tenset-mlp")

    def col(model: str, column: str, network: str | None = None) -> list[float]:
        return [v for r in got if r["model"].split(" ")[0] == model
                and (network is None or r["network"] == network)
                and (v := _cell(r[column])) is not None]
    return {"search": {n: col("tcl", "speed-up, wall", n) for n in ("resnet18", "bert_tiny-b1-64")},
            "with_data": col("tcl", "speed-up, wall + data"),
            "online": col("xgb-online", "speed-up, wall + data") + col("random",
                                                                       "speed-up, wall + data"),
            "rows": got}


def setting(label: str) -> str:
    """A run's label without its search size and model file: 'tcl (residual), round-robin'."""
    return re.sub(r" \d+x\d+| \[.*\]", "", label)


def latency(got: list[dict], network: str, device: str, model: str) -> str:
    """A run row's latency cell ('590.0 ± 9.8')."""
    return next(r["latency ms"] for r in got if r["network"] == network and r["device"] == device
                and setting(r["model"]) == model)


def xeon() -> dict:
    """At 64 trials per task on the Xeon host: the targets per tcl setting and search cost."""
    got = runs(XEON, frameworks=XEON_FRAMEWORKS)
    tg = targets(XEON, XEON_FRAMEWORKS)

    def overhead(match) -> list[float]:
        return [number(r["search overhead"]) for r in got if match(r["model"])]
    raw = rows(XEON)
    minutes = {s: [r["tune_s"] / 60 for r in raw if r["network"] == "resnet18-b1-224"
                   and r["model_arg"] == "tcl"
                   and (r["search"]["population"], r["search"]["generations"]) == s]
               for s in ((64, 2), (512, 4))}
    ratio = [number(r["latency / xgb-online"]) for r in tg]
    return {
        "targets": tg,
        "latency_ratio": ratio,
        "race": race(tg)["ratio"],
        "every_task": [r for r, done in zip(tg, race(tg)["all"]) if done],
        "overhead_64x2": overhead(lambda m: "64x2" in m),
        "overhead_512x4_tcl": overhead(lambda m: m.startswith("tcl") and "x2" not in m),
        "overhead_512x4_xgb": overhead(lambda m: m.startswith("xgb-online")),
        "minutes": minutes,
        "runs": got}


def xeon_ceiling() -> dict:
    """The tuned networks against PyTorch and onnxruntime on the Xeon, per tcl setting: ranges
    over the settings of the targets table (onnxruntime: the latest frameworks row)."""
    tg = targets(XEON, XEON_FRAMEWORKS)
    latest = {}
    for r in rows(XEON_FRAMEWORKS):   # the last row per network and device is the latest day
        latest[(r["network"], r["device"])] = r

    def pick(network: str, device: str, column: str) -> list[float]:
        return [number(r[column]) for r in tg if r["network"] == network and r["device"] == device]

    def vs_compile(network: str, device: str) -> list[float]:
        comp = latest[(network, device)]["torch_compile_ms"]
        return [number(r["latency ms"]) / comp for r in runs(XEON, frameworks=XEON_FRAMEWORKS)
                if r["network"] == network and r["device"] == device
                and r["model"].startswith("tcl")]
    out = {}
    for net in ("resnet18-b1-224", "bert_tiny-b1-64"):
        for dev in ("cpu-sse42", "cpu-avx2-1c"):
            out[(net, dev)] = {"eager": pick(net, dev, "tuned / eager"),
                               "onnxruntime": pick(net, dev, "tuned / onnxruntime"),
                               "compile": vs_compile(net, dev)}
    return out


# -- the pieces of docs/results.md these sections print ----------------------------------------

def _span(values, digits: int = 2, unit: str = "") -> str:
    lo, hi = min(values), max(values)
    one = f"{lo:.{digits}f}"
    return one + unit if one == f"{hi:.{digits}f}" else f"{one}-{hi:.{digits}f}{unit}"


def _reached(cell: str) -> tuple[int, int]:
    done, of = cell.split("reached ")[1].split("/")
    return int(done), int(of)


def race(tg: list[dict]) -> dict:
    """The 1/3 race of a targets table: per row the tasks that reach the reference's per-task
    best (of how many), whether any row has them all, and the ratios."""
    cells = [r["trials + data / xgb-online's"] for r in tg]
    reached = [_reached(c) for c in cells]
    return {"done": [a for a, _ in reached], "of": [b for _, b in reached],
            "all": [a == b for a, b in reached], "ratio": [number(c) for c in cells]}


def _word(ok: bool) -> str:
    return "**met**" if ok else "**missed**"


def zen5_latency() -> str:
    tg = {(r["device"], setting(r["model"])): number(r["latency / xgb-online"])
          for r in targets(BERT_ZEN5, ISA_FRAMEWORKS)}
    ok = all(v <= 1 for v in tg.values())
    return (f"tcl's latency ≤ xgb-online's at equal trials: {_word(ok)} on the means on both "
            f"devices, by little: {tg[('cpu-sse42', 'tcl')]:.3f} (frozen) and "
            f"{tg[('cpu-sse42', 'tcl (residual)')]:.3f} (residual) on cpu-sse42, "
            f"{tg[('cpu-avx2-1c', 'tcl')]:.3f} and {tg[('cpu-avx2-1c', 'tcl (residual)')]:.3f} "
            f"on cpu-avx2-1c. One seed a setting, so no difference is decidable")


def zen5_race() -> str:
    got = race(targets(BERT_ZEN5, ISA_FRAMEWORKS))
    return ("tcl reaches xgb-online's final in ≤ 1/3 of its trials (per task: the position of "
            "the first candidate as fast as xgb-online's best for it, plus the 274-275 records "
            f"the distilled model learned from): {_word(any(got['all']))}. tcl's candidates "
            f"reach xgb-online's per-task best on only {_span(got['done'], 0)} of the "
            f"{got['of'][0]} timed tasks within 64 trials")


def zen5_onnx() -> str:
    tg = targets(BERT_ZEN5, ISA_FRAMEWORKS)
    ratio = {d: [number(r["tuned / onnxruntime"]) for r in tg if r["device"] == d]
             for d in ("cpu-avx2-1c", "cpu-sse42")}
    ok = any(v <= 1 for vs in ratio.values() for v in vs)
    return (f"tuned bert_tiny ≤ onnxruntime: {_word(ok)}, {_span(ratio['cpu-avx2-1c'])}x on "
            f"cpu-avx2-1c, {_span(ratio['cpu-sse42'])}x on cpu-sse42")


def zen5_overhead() -> str:
    share = [number(r["search overhead"]) for r in runs(BERT_ZEN5, frameworks=ISA_FRAMEWORKS)]
    return (f"**Search overhead (point 3): {'met' if max(share) < 10 else 'missed'}, "
            f"{_span(share, 0)}% of tuning wall time** (target under 10%)")


def day1_summary() -> str:
    return summary(RESNET_DAY1).strip()


def day1_latency() -> str:
    tg = targets(RESNET_DAY1)
    ratio = [(setting(r["model"]) + (" 128x2" if "128x2" in r["model"] else ""), r["device"],
              number(r["latency / xgb-online"])) for r in tg]
    ahead = [v for _, _, v in ratio if v <= 1]
    behind = [f"{m} on {d}, {v:.3f}" for m, d, v in ratio if v > 1]
    return (f"**tcl is ahead of xgb-online at equal trials in {len(ahead)} of {len(ratio)} rows**"
            f" ({_span(ahead)}), the lean search (128x2) included, and random is slowest on both "
            f"devices; one seed each, so not decidable. Behind: " + "; ".join(behind))


def day1_targets() -> str:
    tg = targets(RESNET_DAY1)
    ratio = [number(r["latency / xgb-online"]) for r in tg]
    got = race(tg)
    eager = [number(r["tuned / eager"]) for r in tg]
    return (f"**Targets** (one seed a row): latency <= xgb-online met "
            f"{sum(v <= 1 for v in ratio)}/{len(ratio)}; the 1/3 race "
            f"{'met' if any(got['all']) else 'missed'} ({_span(got['ratio'])}, "
            f"{_span(got['done'], 0)} of {got['of'][0]} tasks reach xgb-online's "
            f"per-task best); tuned resnet18 <= PyTorch eager "
            f"{'met' if min(eager) <= 1 else 'missed'} by {_span([(v - 1) * 100 for v in eager], 1)}%"
            f" (was 2-3.6x slower at 4 trials per task); onnxruntime not timed on this host yet")


def xeon_targets_table() -> str:
    text = summary(XEON, frameworks=XEON_FRAMEWORKS)
    return text[text.index("| network | device | host | model | xgb-online at its best"):].strip()


def xeon_latency() -> str:
    tg = targets(XEON, XEON_FRAMEWORKS)
    rows_ = [(r["network"], r["device"], r["model"].split(" [")[0],
              number(r["latency / xgb-online"])) for r in tg]
    ahead = [r for r in rows_ if r[3] <= 1]
    slower = [(r[3] - 1) * 100 for r in rows_ if r[3] > 1]
    return (f"**tcl's latency ≤ xgb-online's at equal trials: {'missed' if slower else 'met'} as "
            f"a strict target; no row's difference is decidable (1-2 seeds a row).** Met in "
            f"{len(ahead)} of {len(rows_)} rows ({_span([r[3] for r in ahead], 3)}: "
            + "; ".join(f"{n.split('-')[0]} {m} on {d}" for n, d, m, _ in ahead)
            + f"); missed by {_span(slower, 1)}% elsewhere")


def xeon_race() -> str:
    got = race(targets(XEON, XEON_FRAMEWORKS))
    every = sum(got["all"])
    return (f"**tcl reaches xgb-online's final in ≤ 1/3 of its trials: "
            f"{'missed everywhere' if not every else f'met in {every} rows'}.** The trials + "
            f"device records ratio is {_span(got['ratio'])}, under 1/3 in "
            f"{sum(v < 1 / 3 for v in got['ratio'])} rows, but in "
            f"{'no run' if not every else f'only {every} runs'} does every task reach "
            f"xgb-online's per-task best within 64 trials ({_span(got['done'], 0)} of "
            f"{_span(got['of'], 0)} tasks do)")


def xeon_onnx() -> str:
    c = xeon_ceiling()
    b1, bs = c[("bert_tiny-b1-64", "cpu-avx2-1c")], c[("bert_tiny-b1-64", "cpu-sse42")]
    ok = min(b1["onnxruntime"] + bs["onnxruntime"]) <= 1
    return (f"**Tuned bert_tiny ≤ onnxruntime: {'met' if ok else 'missed'}**, "
            f"{_span(b1['onnxruntime'])}x on cpu-avx2-1c and {_span(bs['onnxruntime'])}x on "
            f"cpu-sse42")


def xeon_eager() -> str:
    c = xeon_ceiling()
    rs, r1 = c[("resnet18-b1-224", "cpu-sse42")], c[("resnet18-b1-224", "cpu-avx2-1c")]
    both = rs["eager"] + r1["eager"]
    return (f"**Tuned resnet18 ≤ PyTorch eager on the same core: "
            f"{'met' if min(both) <= 1 else 'missed'} by "
            f"{_span([(v - 1) * 100 for v in both], 0)}%** ({_span(rs['eager'])} on cpu-sse42, "
            f"{_span(r1['eager'])} on cpu-avx2-1c")


def xeon_overhead() -> str:
    x = xeon()
    got = x["runs"]

    def share(match) -> list[float]:
        return [number(r["search overhead"]) for r in got if match(r["model"])]
    rr128 = share(lambda m: "128x2, round-robin" in m)
    gr128 = share(lambda m: "128x2" in m and "round-robin" not in m)
    return (f"**Search overhead under 10%: {'met' if max(x['overhead_64x2']) < 10 else 'missed'}"
            f"** by the lean search: 64 x 2 takes {_span(x['overhead_64x2'], 0)}% of tuning wall "
            f"time on all four cells, 128 x 2 with round-robin {_span(rr128, 0)}%, 128 x 2 with "
            f"gradient {_span(gr128, 0)}%. MetaSchedule's 512 x 4 takes "
            f"{_span(x['overhead_512x4_tcl'], 0)}% for tcl's models and "
            f"{_span(x['overhead_512x4_xgb'], 0)}% for xgb-online")


VERDICTS = {
    "tuning.zen5-latency": zen5_latency,
    "tuning.zen5-race": zen5_race,
    "tuning.zen5-onnx": zen5_onnx,
    "tuning.zen5-overhead": zen5_overhead,
    "tuning.day1-summary": day1_summary,
    "tuning.day1-latency": day1_latency,
    "tuning.day1-targets": day1_targets,
    "tuning.xeon-targets": xeon_targets_table,
    "tuning.xeon-latency": xeon_latency,
    "tuning.xeon-race": xeon_race,
    "tuning.xeon-onnx": xeon_onnx,
    "tuning.xeon-eager": xeon_eager,
    "tuning.xeon-overhead": xeon_overhead,
}
