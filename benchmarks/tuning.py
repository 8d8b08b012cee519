"""Tuning real networks: time to latency with each cost model, against TenSet-MLP and PyTorch.

Protocol (issue 16, point 3). For each (network, device, model, seed), ``tcl.tune.tune_network``
runs MetaSchedule's own search with the same trial budget and search size, then compiles the
network and times it end to end (not the sum of task estimates), with PyTorch eager timed on
the same cores. Models: ``tcl`` (the device's registered continual model where distillation
made one, else its Mamba model: the row says which), ``tenset-mlp`` (trained on the device's
full data), ``xgb-online`` (MetaSchedule's default, online from scratch) and ``random`` (the
floor); ``--refit MODELS`` adds their online-refit mode (``--update refit``), ``--residual
MODELS`` their prior-plus-online-residual mode (``--update residual``); ``--no-frozen`` runs
those models in those modes only.

The runs tune in a copy of ``--data`` under ``--work`` (made once), so the tuning records of the
held-out networks never enter the reference store. Each row also carries the measurement time
of the device data its model learned from (records x the device's seconds per record, from the
store's timestamps): the paper's "faster tuning" counts that collection too.

Results: one JSON line per run in ``--results`` (the run's summary and its curve); a rerun skips
what is there. ``--summarize`` prints, per (network, device): final latency (mean ± SE over
seeds), PyTorch's, the trials and wall time each model took to reach TenSet-MLP's final estimate
on the curve (tasks' best latencies, weighted), the speed-up over TenSet-MLP without and with the
data collection, the search overhead and its split (search, featurize, predict: the run's
``time_split``), and how the model ranked: online, on the candidates the
search measured (``tcl.online``: as each round's model scored them, and the final model), next
to offline, on the device's collected records of the network's tasks (``tcl score``).
``--recurve`` recomputes stored curves and data costs from the runs' own files.

    python benchmarks/tuning.py --data data --networks resnet18,bert_tiny-b1-64 \\
        --devices cpu-sse42 --trials 92 --seeds 0,1 --population 64 --generations 1
    python benchmarks/tuning.py --summarize --results docs/bench-tuning.jsonl --plot docs/bench-tuning.png
"""
from __future__ import annotations

import argparse
import json
import math
import shutil
import sys
from dataclasses import asdict
from pathlib import Path

import numpy as np
import polars as pl

from _common import DEFAULT_SEARCH, host_short, report_errors, run_label, search_of
from tcl.config import Paths, TclError, save_figure, write_text
from tcl.metrics import standard_error as _se

MODELS = ("tcl", "tenset-mlp", "xgb-online", "random")


def tcl_model(paths: Paths, device: str) -> str:
    """The device's TCL model: the registry's latest continual model, else its Mamba model."""
    from tcl.registry import ModelRegistry

    return "continual" if ModelRegistry(paths).latest(device) is not None else "mamba"


# Consecutive measurements further apart than this were separate sessions: the gap is idle time.
SESSION_GAP_S = 300


def training_records(paths: Paths, device: str, model: str) -> int:
    """How many of ``device``'s measured records the model learned from before tuning: the
    training tasks' records for a kind trained on the device's full data, the registry entry's
    share for a continual model, none for MetaSchedule's online models."""
    from tcl.registry import ModelRegistry

    if model in ("xgb-online", "random"):
        return 0
    if model == "continual":
        return ModelRegistry(paths).latest(device).n_records
    info = json.loads(paths.train_info_file(device, model).read_text())   # what it fitted on
    return int(info["n_programs"] + info["n_valid_programs"])


def seconds_per_record(paths: Paths, device: str) -> float:
    """The device's measurement cost per record, from the store: the time between consecutive
    collected records (gaps over SESSION_GAP_S are idle time between sessions), over records."""
    from tcl.store.catalog import records

    frame = records(paths, device, ("measured_at", "source"))
    t = np.sort(frame.filter(pl.col("source") == "collect")["measured_at"]
                .dt.epoch("us").to_numpy() / 1e6)
    gaps = np.diff(t)
    return float(gaps[gaps < SESSION_GAP_S].sum() / len(t)) if len(t) > 1 else math.nan


def offline_ranking(paths: Paths, device: str, model: str, network_key: str) -> dict | None:
    """The model's pairwise accuracy and top-1 on the device's collected records of the tuned
    network's tasks, weighted like the network (``tcl score``); None for MetaSchedule's online
    models, which have no model before the search. A refit run is scored as it started."""
    from tcl.score import score_records

    if model in ("xgb-online", "random"):
        return None
    nets = score_records(paths, device, model, source="collect", networks=[network_key],
                         ks=(1,))["networks"].filter(pl.col("network_key") == network_key)
    if nets.is_empty():
        return None
    row = nets.row(0, named=True)
    return {k: None if row[k] is None else round(float(row[k]), 4) for k in ("pairwise", "top1")}


def isolated_root(data: Path, work: Path) -> Path:
    """A copy of the data root for the benchmark, made once: tuning adds records (source tune)
    for the held-out networks' tasks, and those must not enter the reference dataset."""
    copy = work / "data"
    if not copy.exists():
        shutil.copytree(data, work / "data.partial", ignore=shutil.ignore_patterns(".cache"))
        (work / "data.partial").rename(copy)
    return copy


def run(args) -> None:
    from tcl.store.devices import host_identity
    from tcl.tune import tune_network

    root = Path(args.data).resolve()
    if not args.in_place:
        root = isolated_root(root, Path(args.work).resolve())
    paths, results = Paths(root), Path(args.results)
    refit = set(filter(None, args.refit.split(",")))
    residual = set(filter(None, args.residual.split(",")))
    results.parent.mkdir(parents=True, exist_ok=True)
    done = set()
    if results.exists():
        for line in results.read_text().splitlines():
            r = json.loads(line)
            done.add((r["network_arg"], r["device"], r["model_arg"], r["update"], r["seed"],
                      search_of(r)))
    search = (args.population, args.generations, args.scheduler)
    # runs of another search get their own directory (the default's keep the old name)
    tag = "" if search[:2] == DEFAULT_SEARCH[:2] else f"-p{search[0]}g{search[1]}"
    tag += "" if args.scheduler == DEFAULT_SEARCH[2] else f"-{args.scheduler}"
    for seed in [int(s) for s in args.seeds.split(",")]:   # seed outermost: seed 0 of all first
        for network in args.networks.split(","):
            for device in args.devices.split(","):
                for model in args.models.split(","):
                    updates = (["refit"] if model in refit else []) + \
                        (["residual"] if model in residual else [])
                    if not (args.no_frozen and updates):
                        updates.insert(0, "none")
                    for update in updates:
                        key = (network, device, model, update, seed, search)
                        if key in done:
                            continue
                        which = tcl_model(paths, device) if model == "tcl" else model
                        # an interrupted run is set aside (its records kept) and starts over
                        out = Path(args.work) / f"{network}-{device}-{model}-{update}-s{seed}{tag}"
                        try:
                            r = tune_network(paths, network, device, which, trials=args.trials,
                                             update=update, seed=seed, out=out, progress=False,
                                             population=args.population,
                                             generations=args.generations,
                                             scheduler=args.scheduler, set_aside=True)
                        except Exception as e:  # noqa: BLE001 - one failed run: say so, go on
                            print(f"{network} {device} {model}/{update} seed {seed}: FAILED: "
                                  f"{type(e).__name__}: {e}", file=sys.stderr)
                            continue
                        try:
                            offline = offline_ranking(paths, device, which, r.network)
                        except TclError as e:   # the run stands; its offline figure is missing
                            print(f"{network} {device} {model}: no offline figures: {e}",
                                  file=sys.stderr)
                            offline = None
                        row = {"network_arg": network, "model_arg": model,
                               "host": host_identity(), **asdict(r),
                               "overhead_share": r.overhead_share, "offline": offline,
                               "data_records": (n := training_records(paths, device, which)),
                               "data_collection_s": n * seconds_per_record(paths, device),
                               "sequences": task_sequences(Path(r.out))}
                        with results.open("a") as f:
                            f.write(json.dumps(row) + "\n")
                        print(f"{network} {device} {model}/{update} seed {seed}: "
                              f"{r.latency_ms:.2f} ms (PyTorch {r.torch_ms:.2f}), "
                              f"{r.tune_s:.0f}s", file=sys.stderr)


def measured_in_order(run_dir: Path) -> list[tuple[int, float | None]]:
    """(workload, mean seconds or None when it failed) of every candidate the run measured, in
    the order measured (the run's database; workload i is task i)."""
    lines = (run_dir / "database" / "database_tuning_record.json").read_text().splitlines()
    out = []
    for line in lines:
        workload, record = json.loads(line)
        secs = [float(x) for x in (record[1] or [])]
        out.append((workload, float(np.mean(secs)) if secs and max(secs) < 1e9 else None))
    return out


def task_sequences(run_dir: Path) -> dict[str, list[float | None]]:
    """Per task (workload index, as text: JSON keys), its candidates' latencies in ms in the
    order the search measured them, None for a failure. Within a round MetaSchedule measures
    the model's best-scored candidates first (epsilon-greedy random picks interleaved), so a
    prefix of a task's sequence is what a smaller budget for that task would have measured."""
    out: dict[str, list[float | None]] = {}
    for workload, secs in measured_in_order(run_dir):
        out.setdefault(str(workload), []).append(None if secs is None else round(secs * 1e3, 5))
    return out


def replay_curve(run_dir: Path, curve: list[dict]) -> list[dict]:
    """The curve's estimates recomputed from the run's own files, with tcl.tune's rule (defined
    once every task had a round; tasks none of whose candidates ran are left out): the database
    holds every measured candidate in order (workload i is task i, the first round visits the
    tasks in order), and the task scheduler's log table gives each task's weight. Rows measured
    before that rule (every task had to have a latency) are brought to it with ``--recurve``."""
    log = next((run_dir / "work" / "logs").glob("*task_scheduler.log")).read_text()
    table = log[log.rindex(" ID |"):].splitlines()[2:]
    weights = {}
    for line in table:
        cells = [c.strip() for c in line.split("|")]
        if len(cells) < 4 or not cells[0].isdigit():
            break
        weights[int(cells[0])] = float(cells[3])
    records = measured_in_order(run_dir)
    out = []
    for point in curve:
        best: dict[int, float] = {}
        seen = set()
        for workload, secs in records[:point["trials"]]:
            seen.add(workload)
            if secs is not None:
                best[workload] = min(best.get(workload, math.inf), secs)
        done = all(t in seen for t in weights)
        estimate = sum(weights[t] * b for t, b in best.items()) * 1e3 if done else math.nan
        out.append({**point, "estimate_ms": estimate})
    return out


def recurve(results: Path, work: Path) -> None:
    """Rewrite each row's curve with replay_curve and its per-task sequences with
    task_sequences (from its run directory), and its data cost
    with training_records and seconds_per_record (from the benchmark's copy of the store)."""
    paths = Paths(work.resolve() / "data")
    rows = [json.loads(line) for line in results.read_text().splitlines() if line]
    for r in rows:
        r["curve"] = replay_curve(Path(r["out"]), r["curve"])
        r["sequences"] = task_sequences(Path(r["out"]))
        model = tcl_model(paths, r["device"]) if r["model_arg"] == "tcl" else r["model_arg"]
        r["data_records"] = training_records(paths, r["device"], model)
        r["data_collection_s"] = r["data_records"] * seconds_per_record(paths, r["device"])
    write_text(results, "".join(json.dumps(r) + "\n" for r in rows), "results file")
    print(f"recomputed the curves of {len(rows)} runs in {results}", file=sys.stderr)


def retime_rows(results: Path, work: Path, again: bool = False) -> None:
    """Time each finished run's compiled network and PyTorch again (``tcl.tune.retime``): for
    runs that shared their host, one after another on a quiet one. Each sitting is kept under
    ``retimes`` and the row's figures become the median over them (a host's drift between
    minutes moves single sittings by 10-20%); the run's own figures stay under ``as_tuned``.
    Rows retimed already are skipped unless ``again``: every row then gets one more sitting."""
    import os
    import time

    from tcl.tune import retime

    paths = Paths(work.resolve() / "data")
    rows = [json.loads(line) for line in results.read_text().splitlines() if line]
    for r in rows:
        if "as_tuned" in r and not again:
            continue
        got = retime(paths, r["out"])
        # rows and sittings from before onnxruntime was timed lack its figure: NaN there
        r.setdefault("as_tuned", {k: r.get(k, math.nan) for k in got})
        sittings = r.setdefault("retimes", [])
        sittings.append({**got, "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                         "load_1min": os.getloadavg()[0]})
        r.update({k: float(np.median([x[k] for x in sittings if k in x])) for k in got})
        write_text(results, "".join(json.dumps(x) + "\n" for x in rows),   # each as it comes
                   "results file")
        print(f"{r['network']} {r['device']} {r['model_arg']}/{r['update']} seed {r['seed']}: "
              f"{r['as_tuned']['latency_ms']:.2f} -> {got['latency_ms']:.2f} ms, median of "
              f"{len(sittings)} sittings {r['latency_ms']:.2f} (PyTorch "
              f"{r['as_tuned']['torch_ms']:.2f} -> {got['torch_ms']:.2f})", file=sys.stderr)


def _reach(curve: list[dict], target_ms: float) -> tuple[float, float]:
    """Trials and wall seconds at which the curve's estimate first reaches ``target_ms``."""
    for point in curve:
        est = point["estimate_ms"]
        if est is not None and est == est and est <= target_ms:
            return point["trials"], point["wall_s"]
    return math.nan, math.nan


def _f(x: float, spec: str) -> str:
    return "-" if x is None or x != x else format(x, spec)


def _ranking(runs: list[dict], which: str) -> str:
    """'pairwise, top-1' (means over the runs) of each run's ``online[which]`` (``which``:
    as_used or final) or, for ``which`` = offline, of its offline figures."""
    got = [r.get("offline") if which == "offline" else (r.get("online") or {}).get(which)
           for r in runs]
    got = [g for g in got if g]
    if not got:
        return "-"
    mean = [np.mean([g[k] for g in got if g[k] is not None] or [math.nan])
            for k in ("pairwise", "top1")]
    return f"{_f(mean[0], '.2f')}, {_f(mean[1], '.2f')}"


def _overhead_split(runs: list[dict]) -> str:
    """'search/featurize/predict' shares of the tuning wall time (means over the runs that
    report ``time_split``; predict includes model updates)."""
    got = [r["time_split"] for r in runs if r.get("time_split")]
    if not got:
        return "-"
    share = [np.mean([t[k]["share"] + (t["update"]["share"] if k == "predict" else 0)
                      for t in got]) * 100 for k in ("search", "featurize", "predict")]
    return "/".join(f"{x:.0f}" for x in share) + "%"


def per_task_best(runs: list[dict]) -> dict[str, float]:
    """Per task, the best latency (ms) each run measured, the median over the runs."""
    best: dict[str, list[float]] = {}
    for r in runs:
        for task, seq in r.get("sequences", {}).items():
            ok = [x for x in seq if x is not None]
            if ok:
                best.setdefault(task, []).append(min(ok))
    return {t: float(np.median(v)) for t, v in best.items()}


def trials_to_reach(sequences: dict[str, list[float | None]], target: dict[str, float]
                    ) -> tuple[int, int, int]:
    """(trials, tasks reached, tasks with a target): per task, the position in its measured
    sequence of the first candidate at least as fast as ``target``'s latency for it, summed
    over the tasks that reach it. With each task given that many trials, every reached task's
    best, so the network's estimate over them, is at least as good as the target's."""
    trials = reached = 0
    for task, goal in target.items():
        seq = sequences.get(task, [])
        hit = next((i + 1 for i, x in enumerate(seq) if x is not None and x <= goal), None)
        if hit is not None:
            trials, reached = trials + hit, reached + 1
    return trials, reached, len(target)


def best_reference(runs: list[dict], reference: str) -> tuple[list[dict], str]:
    """The reference's runs (frozen: no update mode) at its best search setting, the one with
    the lowest mean end-to-end latency, and that setting's label: tcl is raced against the
    reference as well as it runs here (xgb-online gains most from the round-robin scheduler at
    one round per task), not against its default. ([], "-") when the reference did not run."""
    by_search: dict[tuple, list[dict]] = {}
    for r in runs:
        if r["model_arg"] == reference and r["update"] == "none":
            by_search.setdefault(search_of(r) or DEFAULT_SEARCH, []).append(r)
    if not by_search:
        return [], "-"
    best = min(by_search, key=lambda s: np.mean([r["latency_ms"] for r in by_search[s]]))
    return by_search[best], run_label(reference, "none", "", best)


def summarize(results: Path, plot: str | None = None, reference: str = "xgb-online",
              frameworks: Path | None = None) -> None:
    """The table (per network, device and model), then the targets of issue 26, point 5,
    against ``reference`` at its best search setting (``best_reference``)."""
    rows = [json.loads(line) for line in results.read_text().splitlines() if line]
    if not rows:
        raise TclError(f"{results} holds no runs yet")
    print(f"| network | device | host | model | runs | trials | latency ms | PyTorch eager ms | trials to "
          f"{reference}'s final | wall s to it | per-task trials to {reference}'s best (tasks) | "
          "device data: records, h | speed-up, wall | speed-up, wall + data | search overhead | "
          "overhead: search/featurize/predict | online pairwise, top-1: as used | "
          "online: final model | offline (device records) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    groups: dict[tuple, list[dict]] = {}
    for r in rows:   # a host's timings are compared only with the same host's
        groups.setdefault((r["network_arg"], r["device"], r.get("host")), []).append(r)
    targets = []
    for (network, device, host), runs in groups.items():
        ref, ref_label = best_reference(runs, reference)
        # the reference's final latency on the curve (tasks' best, weighted), mean over its seeds
        target = np.mean([r["curve"][-1]["estimate_ms"] for r in ref]) if ref else math.nan
        ref_wall = np.nanmean([_reach(r["curve"], target)[1] for r in ref]) if ref else math.nan
        ref_data = np.mean([r["data_collection_s"] for r in ref]) if ref else math.nan
        ref_best = per_task_best(ref)
        by_model: dict[tuple, list[dict]] = {}
        for r in runs:
            by_model.setdefault((r["model_arg"], r["update"], search_of(r)), []).append(r)
        for (model, update, search), g in by_model.items():
            lat = [r["latency_ms"] for r in g]
            reach = np.array([_reach(r["curve"], target) for r in g])
            # runs that never reach the target count as not reaching it: the mean is over those
            # that did, and the count says how many
            hit = np.isfinite(reach[:, 1])
            trials = np.mean(reach[hit, 0]) if hit.any() else math.nan
            wall = np.mean(reach[hit, 1]) if hit.any() else math.nan
            data_s = float(np.mean([r["data_collection_s"] for r in g]))
            speed = ref_wall / wall if wall == wall and wall > 0 else math.nan
            speed_data = (ref_wall + ref_data) / (wall + data_s) if wall == wall else math.nan
            overhead = [r["overhead_share"] for r in g]
            reached = "" if hit.all() else f" ({hit.sum()}/{len(g)} reach)"
            per_task = [trials_to_reach(r.get("sequences", {}), ref_best) for r in g]
            task_trials = np.mean([p[0] for p in per_task]) if ref_best and per_task else math.nan
            task_cell = (f"{task_trials:.0f} ({np.mean([p[1] for p in per_task]):.0f}/"
                         f"{len(ref_best)})" if task_trials == task_trials else "-")
            ms = ".2f" if np.mean(lat) < 10 else ".1f"
            label = run_label(model, update, g[0]["model"], search)
            print(f"| {network} | {device} | {host_short(host)} | {label} | {len(g)} | "
                  f"{int(np.mean([r['trials'] for r in g]))} | "
                  f"{_f(np.mean(lat), ms)} ± {_f(_se(lat), ms)} | "
                  f"{_f(np.mean([r['torch_ms'] for r in g]), ms)} | {_f(trials, '.0f')}{reached} | "
                  f"{_f(wall, '.0f')} | {task_cell} | {g[0]['data_records']}, "
                  f"{data_s / 3600:.2f} | {_f(speed, '.2f')} | {_f(speed_data, '.2f')} | "
                  f"{np.mean(overhead):.0%} ± {_f(_se(overhead) * 100, '.0f')}% | "
                  f"{_overhead_split(g)} | {_ranking(g, 'as_used')} | {_ranking(g, 'final')} | "
                  f"{_ranking(g, 'offline')} |")
            if model == "tcl" and ref:
                ref_trials = np.mean([sum(len(s) for s in r.get("sequences", {}).values())
                                      or r["trials"] for r in ref])
                targets.append((g[0]["network"], device, host, label, ref_label,
                                np.mean(lat) / np.mean([r["latency_ms"] for r in ref]),
                                (task_trials + g[0]["data_records"]) / ref_trials
                                if task_trials == task_trials else math.nan,
                                (float(np.mean([p[1] for p in per_task])), len(ref_best))
                                if ref_best else None,
                                np.mean(lat), np.mean([r["torch_ms"] for r in g])))
    if targets:
        print_targets(targets, reference, frameworks)
    if plot:
        _plot(groups, plot)


def print_targets(targets: list[tuple], reference: str, frameworks: Path | None) -> None:
    """Issue 26's targets per tcl row: latency at equal trials against the reference, trials to
    its per-task best (plus the device records the model learned from) against its trials, and
    the tuned network against PyTorch eager (same run, same core) and onnxruntime
    (``frameworks``: benchmarks/frameworks.py's results, same host and core count)."""
    ort = {}
    if frameworks is not None and frameworks.exists():
        for line in frameworks.read_text().splitlines():
            if line:
                f = json.loads(line)
                ort[(f["network"], f["device"], f.get("host"))] = f.get("onnxruntime_ms")

    def verdict(x: float, limit: float) -> str:
        return "-" if x != x else f"{x:.3f} ({'met' if x <= limit else 'missed'})"

    print(f"\nTargets: tcl's latency / {reference}'s at equal trials (<= 1); (per-task trials to "
          f"{reference}'s best + device records) / {reference}'s trials (<= 1/3, and every task "
          "reaching it); "
          "tuned / PyTorch eager and tuned / onnxruntime (<= 1)\n")
    print(f"| network | device | host | model | {reference} at its best | latency / {reference} "
          f"| trials + data / {reference}'s | tuned / eager | tuned / onnxruntime |")
    print("|---|---|---|---|---|---|---|---|---|")
    for network, device, host, label, ref_label, ratio, trials, reached, lat, eager in targets:
        o = ort.get((network, device, host))   # onnxruntime timed on the same host only
        # met only when every task reaches the reference's best: the sum is over those that do
        every = reached is not None and reached[0] == reached[1]
        race = verdict(trials, 1 / 3 if every else -1)
        tasks = "no sequences" if reached is None else f"{reached[0]:.0f}/{reached[1]}"
        print(f"| {network} | {device} | {host_short(host)} | {label} | {ref_label} | "
              f"{verdict(ratio, 1)} | "
              f"{race}, tasks reached {tasks} | {verdict(lat / eager, 1)} | "
              f"{verdict(lat / o, 1) if o else '-'} |")


def _plot(groups: dict[tuple, list[dict]], out: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(groups), figsize=(4.5 * len(groups), 3.6), squeeze=False)
    colors: dict[str, str] = {}
    for ax, ((network, device, host), runs) in zip(axes[0], groups.items()):
        for r in runs:
            label = run_label(r["model_arg"], r["update"], "", search_of(r))
            color = colors.setdefault(label, f"C{len(colors)}")
            xs = [p["wall_s"] for p in r["curve"]]
            ys = [p["estimate_ms"] if p["estimate_ms"] is not None else math.nan
                  for p in r["curve"]]
            ax.plot(xs, ys, color=color, lw=1, alpha=0.8,
                    label=label if r["seed"] == min(x["seed"] for x in runs) else None)
        ax.set_title(f"{network} on {device}\n{host_short(host)}", fontsize=9)
        ax.set_xlabel("tuning wall time, s")
        ax.set_ylabel("best estimate, ms (tasks' best, weighted)")
        ax.set_yscale("log")
        ax.legend(fontsize=7)
    fig.tight_layout()
    save_figure(fig, out, "plot", dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default="data")
    ap.add_argument("--networks", default="resnet18,bert_tiny")
    ap.add_argument("--devices", default="cpu-avx2,cpu-sse42")
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--refit", default="tenset-mlp",
                    help="models (of --models) also run refit online (--update refit); '' none")
    ap.add_argument("--no-frozen", action="store_true",
                    help="models named by --refit or --residual run in those modes only, "
                         "not frozen (--update none) too")
    ap.add_argument("--residual", default="tcl",
                    help="models (of --models) also run as a prior with an online residual "
                         "model (--update residual); '' none")
    ap.add_argument("--trials", type=int, default=1500)
    ap.add_argument("--seeds", default="0,1")
    ap.add_argument("--population", type=int, default=512, help="tcl tune --population")
    ap.add_argument("--generations", type=int, default=4, help="tcl tune --generations")
    ap.add_argument("--scheduler", default="gradient", choices=("gradient", "round-robin"),
                    help="tcl tune --scheduler (MetaSchedule's default here: gradient)")
    ap.add_argument("--results", default="docs/bench-tuning.jsonl")
    ap.add_argument("--work", default="data/.cache/bench-tuning", help="tuning run directories")
    ap.add_argument("--in-place", action="store_true",
                    help="tune in --data itself, not in a copy under --work (adds its records)")
    ap.add_argument("--summarize", action="store_true")
    ap.add_argument("--plot", help="with --summarize: the curves as a PNG")
    ap.add_argument("--reference", default="xgb-online",
                    help="with --summarize: the model whose final latency the others race to")
    ap.add_argument("--frameworks", help="with --summarize: benchmarks/frameworks.py's "
                    "results, for the onnxruntime target")
    ap.add_argument("--recurve", action="store_true",
                    help="recompute the curves of --results from the runs' files, then stop")
    ap.add_argument("--retime", action="store_true",
                    help="time the runs' compiled networks and PyTorch again (a quiet host), "
                         "keeping the run's own figures in each row, then stop")
    ap.add_argument("--again", action="store_true",
                    help="with --retime: the rows retimed already too (one more sitting each; "
                         "a row's figures are the median over its sittings)")
    args = ap.parse_args(argv)
    if args.retime:
        return report_errors("tuning", lambda: retime_rows(
            Path(args.results), Path(args.work), args.again))
    if args.recurve:
        return report_errors("tuning", lambda: recurve(Path(args.results), Path(args.work)))
    if args.summarize:
        return report_errors("tuning", lambda: summarize(
            Path(args.results), args.plot, args.reference,
            Path(args.frameworks) if args.frameworks else None))
    return report_errors("tuning", lambda: run(args))


if __name__ == "__main__":
    sys.exit(main())
