"""Figures of docs/results.md's Zen 4 sections (device zen4-1c): the budget curves
(benchmarks/budget_curve.py's rows), the layouts and fast-math sittings (benchmarks/layouts.py's
rows) and the frameworks on the same core (benchmarks/frameworks.py's rows)."""
from __future__ import annotations

import functools

from _evidence import DOCS, Sample, markdown_rows, number, paired, printed, rows

RESNET = "bench-budget-curve.jsonl"              # resnet18, 64 trials per task, its --check runs
SEARCH_SIZE = "bench-search-size.jsonl"          # separate runs of 4 trials per task, seeds 0-3
TUNE_RECORDS = "bench-budget-curve-tune-records.jsonl"   # runs of 16, with / without
BERT = "bench-budget-curve-bert-tiny.jsonl"
NCHWC = "bench-budget-curve-nchwc-s0.jsonl"
NCHWC_256 = "bench-budget-curve-nchwc-rr256.jsonl"
FRAMEWORKS = "bench-frameworks-zen4.jsonl"


@functools.cache
def curve(name: str, run_budget: int = 64) -> dict[str, dict[int, dict]]:
    """Per setting and budget: latency (mean, SE over seeds), its ratio to PyTorch eager in the
    same sitting, the estimated wall time and the device data's seconds (budget_curve.curves)."""
    import budget_curve

    return budget_curve.curves(rows(name), run_budget)


def per_seed(name: str, setting: str, budget: int, key: str = "latency_ms",
             runs_of: int | None = None) -> dict[int, float]:
    """Per seed, the point at ``budget`` of the curve's runs (64 trials per task or more) or,
    with ``runs_of``, of the runs of that many trials per task (a --check run, or a curve of
    16); ``key`` 'rel': over PyTorch eager in the same sitting."""
    out = {}
    for r in rows(name):
        if r["setting"] != setting or (r["run_budget"] != runs_of if runs_of
                                       else r["run_budget"] < 64):
            continue
        p = next((p for p in r["points"] if p["budget"] == budget), None)
        if p is not None:
            out[r["seed"]] = p["latency_ms"] / p["torch_ms"] if key == "rel" else p[key]
    return out


def run_seconds(name: str, setting: str, run_budget: int) -> dict[int, float]:
    """Per seed, the measured tuning time of the separate runs of ``run_budget``."""
    return {r["seed"]: r["tune_s"] for r in rows(name)
            if r["setting"] == setting and r["run_budget"] == run_budget}


def best_64(name: str) -> tuple[str, float]:
    """xgb-online's best setting at 64 trials per task and its mean latency."""
    c = curve(name)
    best = min((s for s in c if s.startswith("xgb-online")), key=lambda s: c[s][64]["ms"])
    return best, c[best][64]["ms"]


def within_5(name: str, setting: str, goal: float) -> int | None:
    """The smallest budget whose mean latency is within 5% of ``goal``; None: never."""
    c = curve(name)[setting]
    return next((b for b in sorted(c) if c[b]["ms"] <= 1.05 * goal), None)


def frameworks(network: str, name: str = FRAMEWORKS) -> dict:
    """The latest one-thread row of ``network`` (PyTorch eager, torch.compile, onnxruntime)."""
    got = [r for r in rows(name) if r["network"] == network and r.get("threads", 1) == 1]
    return got[-1]


@functools.cache
def sittings(name: str) -> dict[str, dict]:
    """benchmarks/layouts.py --summarize of ``docs/<name>``, per run: its median latency (ms)
    and ratios to the first run, PyTorch eager and onnxruntime (medians over every sitting)."""
    import layouts

    text = printed(layouts.summarize, DOCS / name)
    out = {}
    for r in markdown_rows(None, "run", text):
        ratio = next(k for k in r if k.startswith("vs ") and k not in ("vs eager",
                                                                       "vs onnxruntime"))
        out[r["run"]] = {"ms": number(r["network ms (sittings)"]), "vs": number(r[ratio]),
                         "eager": number(r["vs eager"]), "ort": number(r["vs onnxruntime"]),
                         "tuning_s": number(r["tuning s"])}
    out["_header"] = text.splitlines()[0]
    return out


def budget_ratio(name: str, ours: str, theirs: str, budgets, key: str = "ms") -> dict[int, float]:
    """Per budget, ``ours`` over ``theirs`` (mean latency, or with key 'rel' the mean ratio to
    PyTorch eager in the same sitting)."""
    c = curve(name)
    return {b: c[ours][b][key] / c[theirs][b][key] for b in budgets
            if b in c[ours] and b in c[theirs]}


def paired_points(name: str, a: str, b: str, budget: int, runs_of: int | None = None) -> Sample:
    """a - b at ``budget``, paired by seed."""
    x, y = (per_seed(name, s, budget, runs_of=runs_of) for s in (a, b))
    return Sample.of([x[s] - y[s] for s in sorted(x.keys() & y.keys())])


def protocol_bound(name: str = BERT, ours: str = "tcl-no-bert-tune",
                   subset_only: str = "tcl-no-bert") -> dict:
    """The TenSet/TLP protocol for bert_tiny: xgb-online's best setting's time to within 5% of
    its 64-trial latency over tcl's (search + device data). The rows price every device record
    at the collector's rate; the tuning records came from a tuning run, not a collection, so
    the raw files bound the speed-up from above: the subset's measuring time alone (the
    records of ``subset_only``, the same subset) with the tuning records taken as free."""
    best, goal = best_64(name)
    c = curve(name)
    b_ours, b_best = within_5(name, ours, goal), within_5(name, best, goal)
    theirs = c[best][b_best]["wall_s"] + c[best][b_best]["data_s"]
    search = c[ours][b_ours]["wall_s"]
    subset = c[subset_only][b_ours]["data_s"]
    n_subset = next(r["data_records"] for r in rows(name) if r["setting"] == subset_only)
    n_all = next(r["data_records"] for r in rows(name) if r["setting"] == ours)
    return {"budget": b_ours, "theirs_s": theirs, "search_s": search, "subset_s": subset,
            "priced_s": c[ours][b_ours]["data_s"], "bound": theirs / (search + subset),
            "as_priced": theirs / (search + c[ours][b_ours]["data_s"]),
            "search_only": theirs / search, "n_subset": n_subset, "n_tuning": n_all - n_subset}


def layer_ratios(run: str, name: str = "bench-layer-table.jsonl") -> dict[str, float]:
    """Per layer, TVM's time over onnxruntime's (benchmarks/layer_table.py's table) of the
    profiled run whose directory ends with ``run``."""
    import layer_table

    row = next(r for r in rows(name) if r["run"].endswith(run))
    return {r["layer"]: number(r["TVM / ort"])
            for r in markdown_rows(None, "TVM / ort", layer_table.format_table(row))
            if r["TVM / ort"] != "-"}


def sitting_median(name: str, key: str, label: str | None = None) -> float:
    """The median over a sittings file's rows (one run's with ``label``) of ``key``
    (latency_ms, torch_ms, onnxruntime_ms), as benchmarks/layouts.py takes it."""
    import statistics

    return statistics.median(r[key] for r in rows(name) if label is None or r["label"] == label)


def threads(network: str, n: int) -> dict:
    """The frameworks on the Zen 4 core at ``n`` threads (docs/bench-frameworks-zen4-threads)."""
    return next(r for r in rows("bench-frameworks-zen4-threads.jsonl")
                if r["network"] == network and r["threads"] == n)


# -- the pieces of docs/results.md these sections print ----------------------------------------

def _word(ok: bool, how: str = "") -> str:
    return f"**{'met' if ok else 'missed'}{how}**"


def _listing(items) -> str:
    """'4', '4 and 8', '1, 2 and 4'; 'none'."""
    items = [str(i) for i in items]
    return "none" if not items else items[0] if len(items) == 1 else \
        ", ".join(items[:-1]) + " and " + items[-1]


def _pct(ratio: float) -> str:
    return f"{abs(ratio - 1):.0%}"


def rr256() -> str:
    ms = curve(NCHWC_256)["xgb-online-round-robin"][256]["ms"]
    ort = sitting_median("bench-layouts.jsonl", "onnxruntime_ms")
    ok = ms <= ort
    return (f"**Target: tuned resnet18 ≤ onnxruntime at 256 trials per task or fewer: "
            f"{'met' if ok else 'missed'}, by {_pct(ms / ort)}** ({ms:.1f} against {ort:.1f} ms, "
            f"one seed, onnxruntime from the same day's quiet sittings rather than this one)")


def point4() -> str:
    lay = sittings("bench-layouts.jsonl")
    nchwc_tcl = curve(NCHWC)["tcl"][64]
    c256 = curve(NCHWC_256)["xgb-online-round-robin"]
    ort = sitting_median("bench-layouts.jsonl", "onnxruntime_ms")
    eager = sitting_median("bench-layouts.jsonl", "torch_ms")
    exact = sittings("bench-bert-tiny-zen4.jsonl")["tcl"]
    exact_ort = sitting_median("bench-bert-tiny-zen4.jsonl", "onnxruntime_ms")
    fast = sittings("bench-bert-tiny-zen4-fastmath.jsonl")["fastmath"]
    fast_ort = sitting_median("bench-bert-tiny-zen4-fastmath.jsonl", "onnxruntime_ms")
    two = sittings("bench-layouts-2c.jsonl")["nchwc-2c"]
    two_ort = sitting_median("bench-layouts-2c.jsonl", "onnxruntime_ms")
    bert2 = sittings("bench-bert-tiny-zen4-2c.jsonl")["fastmath-2t"]
    gain = c256[256]["ms"] / c256[64]["ms"]
    r1, r2 = threads("resnet18-b1-224", 1), threads("resnet18-b1-224", 2)
    b1, b2 = threads("bert_tiny-b1-128", 1), threads("bert_tiny-b1-128", 2)
    best_ort = min(lay["nchwc"]["ms"], c256[128]["ms"], c256[256]["ms"]) / ort
    return (
        f"**Targets (point 4)**, at the native ISA, one thread (one seed each: no test):\n"
        f"- tuned resnet18 ≤ PyTorch eager at 64 trials per task: "
        f"{_word(lay['nchwc']['eager'] <= 1, ' with nchwc')}. xgb-online gives "
        f"{lay['nchwc']['eager']:.2f}x ({lay['nchwc']['ms']:.1f} against {eager:.1f} ms, medians "
        f"of the same sittings); tcl's model {nchwc_tcl['rel']:.2f}x ({nchwc_tcl['ms']:.1f} ms, "
        f"over PyTorch eager in its own sitting: the nchwc budget curve below). The default "
        f"layout misses: {lay['nchw']['eager']:.2f}x.\n"
        f"- tuned resnet18 ≤ onnxruntime at 256 trials per task or fewer: "
        f"{_word(best_ort <= 1)}, by {_pct(lay['nchwc']['ms'] / ort)} at 64 trials per task "
        f"({lay['nchwc']['ms']:.1f} against {ort:.1f} ms), {_pct(c256[128]['ms'] / ort)} at 128 "
        f"({c256[128]['ms']:.1f}) and {_pct(c256[256]['ms'] / ort)} at 256 "
        f"({c256[256]['ms']:.1f}): the paragraph \"More trials\" above.\n"
        f"- tuned bert_tiny ≤ onnxruntime: {_word(exact['ms'] <= exact_ort)} in the default "
        f"(exact) math, by {_pct(exact['ms'] / exact_ort)} ({exact['ms']:.2f} against "
        f"{exact_ort:.2f} ms); {_word(fast['ms'] <= fast_ort, ' with `--fast-math`')}, "
        f"{fast['ms'] / fast_ort:.2f}x ({fast['ms']:.2f} against {fast_ort:.2f} ms: the "
        f"fast-math section below, whose per-layer table found the cause). At 2 ms, the VM's "
        f"per-call overhead and the 14 of 23 tasks whose space holds one program (1 trial each) "
        f"leave little for the search to win.\n"
        f"- At 2 threads (`zen4-2c`, both cores): tuned resnet18 (nchwc, xgb-online, 64 trials "
        f"per task) is {two['ms']:.1f} ms, **{two['eager']:.2f}x PyTorch eager: "
        f"{'met' if two['eager'] <= 1 else 'missed'}**; against onnxruntime ({two_ort:.1f} ms) "
        f"it is {two['ort']:.2f}x at 64 trials per task, and no 2-thread run went to 256 "
        f"({_word(two['ort'] <= 1, ' as far as measured')}; the one-thread curve gained "
        f"{1 - gain:.0%} from 64 to 256, which would leave {two['ort'] * gain:.2f}x). bert_tiny "
        f"with fast math: {bert2['ms']:.2f} ms, **{bert2['ort']:.2f}x onnxruntime: "
        f"{'met' if bert2['ort'] <= 1 else 'missed'}** (below). onnxruntime scales to 2 threads "
        f"({r1['onnxruntime_ms'] / r2['onnxruntime_ms']:.2f}x on resnet18, "
        f"{b1['onnxruntime_ms'] / b2['onnxruntime_ms']:.2f}x on bert_tiny); PyTorch eager does "
        f"on resnet18 ({r1['eager_ms'] / r2['eager_ms']:.2f}x) and "
        f"{'slows down' if b2['eager_ms'] > b1['eager_ms'] else 'speeds up'} on bert_tiny.")


def fastmath_target(name: str, run: str, how: str) -> str:
    """Point 4's target with fast math, at one or two threads: the run's median over its
    sittings against onnxruntime's."""
    got = sittings(name)[run]
    word = "met" if got["ort"] <= 1 else "missed"
    return (f"**Target (point 4), {how}: tuned bert_tiny ≤ onnxruntime: {word} with fast "
            f"math**, {got['ort']:.2f}x ({got['ms']:.2f} against "
            f"{sitting_median(name, 'onnxruntime_ms'):.2f} ms, the same sittings)")


def fastmath_exact() -> str:
    r = sittings("bench-bert-tiny-zen4-fastmath.jsonl")["exact"]
    return (f"The exact default {'misses' if r['ort'] > 1 else 'meets it'} by "
            f"{_pct(r['ort'])}")


def width_two() -> str:
    two = sittings("bench-layouts-2c.jsonl")["nchwc-2c"]
    one = sittings("bench-layouts-width-fusion.jsonl")["nchwc"]
    r1, r2 = threads("resnet18-b1-224", 1), threads("resnet18-b1-224", 2)
    return (f"**At two threads** the tuned resnet18 {'beats' if two['eager'] < 1 else 'trails'} "
            f"PyTorch eager ({two['eager']:.2f}x, the target's first point) and "
            f"{'misses' if two['ort'] > 1 else 'meets'} onnxruntime by {_pct(two['ort'])} at 64 "
            f"trials per task. onnxruntime scales "
            f"{r1['onnxruntime_ms'] / r2['onnxruntime_ms']:.2f}x from one thread to two; the tuned "
            f"network {one['ms'] / two['ms']:.2f}x ({one['ms']:.2f} to {two['ms']:.2f} ms)")


def curve_targets() -> str:
    c = curve(RESNET)
    ref = c["xgb-online"][64]["ms"]
    r4 = c["tcl"][4]["ms"] / ref
    faster = budget_ratio(RESNET, "tcl", "xgb-online", (1, 2, 4, 8, 16))
    reach = within_5(RESNET, "tcl", ref)
    xgb_reach = within_5(RESNET, "xgb-online", ref)
    speed = ((c["xgb-online"][xgb_reach]["wall_s"] + c["xgb-online"][xgb_reach]["data_s"])
             / (c["tcl"][reach]["wall_s"] + c["tcl"][reach]["data_s"])) if reach else None
    return (
        f"**Targets** (against xgb-online at 64 trials per task, {ref:.1f} ms; its round-robin "
        f"setting, its best on the Xeon host, was not run here for time; 2 seeds a side, so no "
        f"difference is decidable: the verdicts compare means):\n"
        f"- tcl at 4 trials per task within 10% of it: {_word(r4 <= 1.10)}, "
        f"{c['tcl'][4]['ms']:.1f} / {ref:.1f} = {r4:.2f}.\n"
        f"- tcl at least 10% faster than xgb-online at every budget up to 16: "
        f"{_word(all(v <= 0.9 for v in faster.values()))} at "
        f"{sum(v <= 0.9 for v in faster.values())} of {len(faster)}: "
        + ", ".join(f"{v:.2f} ({b})" for b, v in faster.items()) + ". The transferred model "
        f"ranks the first candidates; MetaSchedule's default scheduler gives its online XGBoost "
        f"nothing to learn from before every task had its first round, so below 64 trials per "
        f"task xgb-online picks like random.\n"
        f"- the TenSet/TLP protocol (tcl's search time plus its 251 records' measurement, to get "
        f"within 5% of {ref:.1f} ms, over xgb-online's time to get there): "
        + (f"{_word(speed >= 5)}, {speed:.2f}. tcl gets there only at {reach} trials per task, "
           f"as xgb-online does at {xgb_reach}" if speed else f"{_word(False)}: tcl never "
           "gets within 5%"))


def nchwc_targets() -> str:
    tcl4 = curve(NCHWC)["tcl"][4]["ms"]
    ref = curve(RESNET)["xgb-online"][64]["ms"]
    same = sittings("bench-layouts.jsonl")["nchwc"]["ms"]
    return (f"With nchwc, tcl at 4 trials per task ({tcl4:.1f} ms) is {tcl4 / ref:.2f}x "
            f"xgb-online's 64-trial network in the default layout ({ref:.1f}). That "
            f"{'meets' if tcl4 / ref <= 1.10 else 'misses'} point 2's first target as a user "
            f"sees it: 16x fewer measurements for the same latency. But the gain is the "
            f"layout's, not the model's. Against xgb-online in the same layout at 64 trials per "
            f"task ({same:.1f} ms, the layouts table) it is {tcl4 / same:.2f}x: "
            f"{_word(tcl4 / same <= 1.10)}")


def rr_verdict() -> str:
    """Small budgets against xgb-online round-robin's own runs (issue 55 item 3)."""
    c = curve(RESNET)
    best = "xgb-online-round-robin"
    own = Sample.of(per_seed(SEARCH_SIZE, "tcl", 4, runs_of=4).values())
    xgb = {b: per_seed(RESNET, best, b, runs_of=b)[0] for b in (4, 8, 16)}
    ratios = {4: own.mean / xgb[4], 8: c["tcl"][8]["ms"] / xgb[8], 16: c["tcl"][16]["ms"] / xgb[16]}
    met = [b for b, v in ratios.items() if v <= 0.9]
    return (
        f"**tcl against xgb-online round-robin's own runs of that budget (one run each, so no "
        f"difference is decidable; the verdicts compare means): at 4 trials per task tcl's own "
        f"runs of 4 trials per task (the wider-search section's default arm, {own.n} seeds) give "
        f"{own.text(1)} against {xgb[4]:.1f} ms, {ratios[4]:.2f}x; at 8 its 64-trial runs' "
        f"prefix (what a run of 8 measures under tcl's gradient scheduler) gives "
        f"{ratios[8]:.2f}x ({c['tcl'][8]['ms']:.1f} against {xgb[8]:.1f}); at 16 "
        f"{ratios[16]:.2f}x ({c['tcl'][16]['ms']:.1f} against {xgb[16]:.1f}). The target's \"10% "
        f"faster\" is met at {_listing(met)} and missed at "
        f"{_listing([b for b in ratios if b not in met])}.** The 64-trial runs' "
        f"4-trial prefix ({c['tcl'][4]['ms']:.1f} ± {c['tcl'][4]['se']:.1f} ms, other sittings) "
        f"would read {c['tcl'][4]['ms'] / xgb[4]:.2f}x; the separate runs are the like-for-like "
        f"comparison")


def rr_targets() -> str:
    c = curve(RESNET)
    best, goal = best_64(RESNET)
    r4 = c["tcl"][4]["ms"] / goal
    reach = [s for s in ("tcl", "tcl-round-robin") if within_5(RESNET, s, goal) is not None]
    return (f"**Against that bar the first and third targets are "
            f"{'missed' if r4 > 1.10 and not reach else 'not both missed'}.** At 4 trials per "
            f"task tcl is {r4:.2f}x it ({c['tcl'][4]['ms']:.1f} ms; target 1.10). "
            f"{'Neither tcl setting gets' if not reach else ', '.join(reach) + ' gets'} within 5% "
            f"of {goal:.1f} ms, so the protocol's speed-up is not defined (missed)")


def rr_wall() -> str:
    own = per_seed(SEARCH_SIZE, "tcl", 4, runs_of=4)
    own_s = run_seconds(SEARCH_SIZE, "tcl", 4)
    xgb_s = {b: run_seconds(RESNET, "xgb-online-round-robin", b)[0] for b in (4, 8, 16)}
    rr_ms = per_seed(RESNET, "tcl-round-robin", 4, runs_of=4)[0]
    rr_s = run_seconds(RESNET, "tcl-round-robin", 4)[0]
    return (f"its own runs took {xgb_s[4]:.0f} s at 4 trials per task and "
            f"{min(xgb_s[8], xgb_s[16]):.0f}-{max(xgb_s[8], xgb_s[16]):.0f} s at 8 and 16. tcl's "
            f"own 4-trial runs took {min(own_s.values()):.0f}-{max(own_s.values()):.0f} s "
            f"({len(own)} seeds, {min(own.values()):.1f}-{max(own.values()):.1f} ms), and tcl "
            f"round-robin's {rr_s:.0f} s ({rr_ms:.1f} ms)")


def wide_target() -> str:
    wide = Sample.of(per_seed(SEARCH_SIZE, "tcl-wide-search", 4, runs_of=4).values())
    _, goal = best_64(RESNET)
    return (f"Against the target (within 10% of xgb-online round-robin's {goal:.1f} ms at 64 "
            f"trials per task), the wider search's {wide.mean:.1f} ms is "
            f"{wide.mean / goal:.2f}x: {_word(wide.mean / goal <= 1.10)}, as before")


def records_lift() -> str:
    c = curve(TUNE_RECORDS, 16)
    diffs = {b: paired_points(TUNE_RECORDS, "tcl-with-tune", "tcl-no-tune", b, runs_of=16)
             for b in sorted(c["tcl-with-tune"])}
    both = [b for b, d in diffs.items() if all(v < 0 for v in d.values)]
    b4 = c["tcl-with-tune"][4]["ms"], c["tcl-no-tune"][4]["ms"]
    ev = rows("bench-search-eval-tune-records.jsonl")

    def arm(name: str, model: str, key: str = "pairwise") -> dict[int, float]:
        return {r["seed"]: r["search"][key] for r in ev if r["arm"] == name
                and r["model"] == model and "search" in r}
    mlp = paired(arm("scratch+tune", "tenset-mlp"), arm("scratch", "tenset-mlp"))
    chain = {m: next(r["search"] for r in ev if r["arm"] == "file" and r["model"] == m)
             for m in ("no-tune", "with-tune")}
    return (f"**The tuning records lift the curve.** With them the network is faster in both "
            f"seeds at {'every budget' if len(both) == len(diffs) else ', '.join(map(str, both))}"
            f": {b4[1] - b4[0]:.0f} ms ({1 - b4[0] / b4[1]:.0%}) at 4 trials per task. With two "
            f"seeds no difference is decidable (paired differences "
            + ", ".join(f"{d.text(1)} ms at {b}" for b, d in diffs.items()) + "). On the search "
            f"set the distilled model's top-1 rises from {chain['no-tune']['top1']:.2f} to "
            f"{chain['with-tune']['top1']:.2f} and its pairwise from "
            f"{chain['no-tune']['pairwise']:.3f} to {chain['with-tune']['pairwise']:.3f} (one "
            f"model each: no test); the scratch kinds gain pairwise (TenSet-MLP "
            f"{mlp.text(sign=True)}, {mlp.test()}) more than top-1")


def records_target() -> str:
    c = curve(TUNE_RECORDS, 16)
    _, goal = best_64(RESNET)
    r4, r16 = c["tcl-with-tune"][4]["ms"] / goal, c["tcl-with-tune"][16]["ms"] / goal
    return (f"with the tuning records tcl reaches {c['tcl-with-tune'][4]['ms']:.1f} ms at 4 "
            f"trials per task, {r4:.2f}x (target 1.10: {_word(r4 <= 1.10)}, from "
            f"{curve(RESNET)['tcl'][4]['ms'] / goal:.2f}x), and {c['tcl-with-tune'][16]['ms']:.1f}"
            f" ms at 16, {r16:.2f}x")


def bert_targets() -> str:
    """bert_tiny's targets (issue 55 items 4 and 5: the protocol's pricing, and verdicts that
    flip with the normalisation or rest on two seeds)."""
    c = curve(BERT)
    best, goal = best_64(BERT)
    at4 = {s: c[s][4]["ms"] / goal for s in ("tcl-no-bert", "tcl-no-bert-tune")}
    budgets = (1, 2, 4, 8, 16)

    def met_at(ours: str, key: str) -> str:
        r = budget_ratio(BERT, ours, "xgb-online", budgets, key)
        met = [b for b, v in r.items() if v <= 0.9]
        return (f"met at {_listing(met)}, missed at {_listing([b for b in r if b not in met])} ("
                + ", ".join(f"{v:.2f}" for v in r.values()) + ")")

    def every(ours: str, key: str) -> bool:
        return all(v <= 0.9 for v in budget_ratio(BERT, ours, "xgb-online", budgets, key).values())
    p = protocol_bound()
    return (
        f"**Targets** (against xgb-online round-robin at 64 trials per task, {goal:.2f} ms; its "
        f"default scheduler {c['xgb-online'][64]['ms']:.2f}). Two seeds a setting: no "
        f"difference between settings is decidable, so each verdict compares means, and where "
        f"two normalisations disagree the verdict is open:\n"
        f"- tcl at 4 trials per task within 10% of it: {_word(min(at4.values()) <= 1.10)}. "
        f"tcl-no-bert {c['tcl-no-bert'][4]['ms']:.2f} ms ({at4['tcl-no-bert']:.2f}x), "
        f"tcl-no-bert-tune {c['tcl-no-bert-tune'][4]['ms']:.2f} ({at4['tcl-no-bert-tune']:.2f}x).\n"
        f"- tcl at least 10% faster than xgb-online (default) at every budget up to 16, with the "
        f"tuning records: in milliseconds {met_at('tcl-no-bert-tune', 'ms')}; over PyTorch eager "
        f"in the same sitting, which takes a sitting's load out, "
        f"{met_at('tcl-no-bert-tune', 'rel')}. Without them: in milliseconds "
        f"{met_at('tcl-no-bert', 'ms')}; over eager {met_at('tcl-no-bert', 'rel')}. "
        f"The target asks for every budget: with the tuning records "
        f"{_word(every('tcl-no-bert-tune', 'ms'))} in milliseconds and "
        f"{_word(every('tcl-no-bert-tune', 'rel'))} over eager, and the two disagree on which "
        f"budgets pass, at 8 and at 16.\n"
        f"- the TenSet/TLP protocol: {_word(p['bound'] >= 5)}. tcl-no-bert-tune gets within 5% "
        f"of {goal:.2f} ms only at {p['budget']} trials per task, after {p['search_s']:.0f} s of "
        f"search, against xgb-online round-robin's {p['theirs_s']:.0f} s. Its device data: the "
        f"{p['n_subset']}-program subset ({p['subset_s']:.0f} s of collection) and the "
        f"{p['n_tuning']:,} tuning records of resnet18-b4-224, which a tuning run measured, not "
        f"the collector: the results file prices them at the collector's rate "
        f"({p['priced_s']:.0f} s for all {p['n_subset'] + p['n_tuning']:,}, a speed-up of "
        f"{p['as_priced']:.2f}), which is not what they cost. Taken as free, the speed-up is at "
        f"most {p['bound']:.2f}; with that tuning run's own time (1,261 s, as the run reported "
        f"it; its summary was not committed) about "
        f"{p['theirs_s'] / (p['search_s'] + p['subset_s'] + 1261):.2f}. Counting the search "
        f"alone, tcl reaches that latency in {p['search_s']:.0f} s against "
        f"{p['theirs_s']:.0f} ({p['search_only']:.1f}x). tcl-no-bert never gets within 5%.")


VERDICTS = {
    "zen4.rr256": rr256,
    "zen4.point4": point4,
    "zen4.fastmath-two": lambda: fastmath_target("bench-bert-tiny-zen4-2c.jsonl", "fastmath-2t",
                                                 "two threads"),
    "zen4.fastmath-one": lambda: fastmath_target("bench-bert-tiny-zen4-fastmath.jsonl",
                                                 "fastmath", "one thread"),
    "zen4.fastmath-exact": fastmath_exact,
    "zen4.width-two": width_two,
    "zen4.curve-targets": curve_targets,
    "zen4.nchwc-targets": nchwc_targets,
    "zen4.rr-verdict": rr_verdict,
    "zen4.rr-targets": rr_targets,
    "zen4.rr-wall": rr_wall,
    "zen4.wide-target": wide_target,
    "zen4.records-lift": records_lift,
    "zen4.records-target": records_target,
    "zen4.bert-targets": bert_targets,
}


def search_versions() -> str:
    """The search-distribution set is not one set: it grows with every tuning run (issue 55
    item 6); the same registry model's figures on its two committed versions."""
    first, second = rows("bench-search-eval.jsonl"), rows("bench-search-eval-tune-records.jsonl")

    def registry(got) -> tuple[str, dict]:
        r = next(r for r in got if r["arm"] == "registry")
        return r["model"].split(" ")[1], r["search"]
    m1, s1 = registry(first)
    m2, s2 = registry(second)
    assert m1 == m2, "the two versions' registry rows name different models"
    return (f"Model changes are judged by the search top-1 and pairwise from now on, within one "
            f"version of the set only: the set grows with every tuning run ({s1['n_programs']:,} "
            f"programs in this section's file, {s2['n_programs']:,} in the next section's), and "
            f"the same registry model ({m1}) scores {s1['top1']:.3f} search top-1 on the first "
            f"and {s2['top1']:.3f} on the second. A model whose data hold resnet18-b4-224's tuning "
            f"records (the next section's `with` arms) has the held-out resnet18's own "
            f"convolutions, at batch 4, in its training data")


VERDICTS["search.versions"] = search_versions
