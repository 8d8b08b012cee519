"""The budget curve (issue 40, point 1): network latency against trials per task, per model.

For each (model setting, seed) one ``tcl tune`` run spends 64 trials per task (one round per
task: MetaSchedule's first round). The network is then compiled, and timed end to end on the
lane's core, from each budget's *prefix* of the run's database: every task's first ``b``
measured candidates, for b in ``--budgets``. Within a round MetaSchedule measures the model's
best-scored candidates first (``EvolutionarySearch``: the best ``b - b * eps`` in score order,
then the epsilon-greedy random picks), and the evolution does not depend on the round's size,
so a task's prefix is what a run of budget ``b`` measures for it whenever the model has learned
nothing from other tasks when the task is searched: tcl's model under the gradient scheduler
(its residual learns only after every task's first round), xgb-online under gradient (idem)
and random. Under round-robin, xgb-online (and tcl's residual) learns from earlier tasks' 64
trials instead of ``b``, so its prefix points flatter it: a run of budget ``b`` gets a slower
network (xgb-online at 4 trials per task: 135 ms, its prefix 72.5 on zen4-1c). ``--check`` runs
separate small-budget runs to compare with their prefix.

Tuning wall time at budget ``b`` is estimated from the run's split: its search time (the
evolution and the model, the same for any round size) plus building and running scaled to the
trials. The runs tune in place (``--data``), so their records join the store with source
``tune``: commit them.

    taskset -c 0 python benchmarks/budget_curve.py --device zen4-1c --network resnet18 --seeds 0
    taskset -c 1 python benchmarks/budget_curve.py --device zen4-1c --network resnet18 --seeds 1
    python benchmarks/budget_curve.py --summarize --plot docs/bench-budget-curve.png \\
        --frameworks docs/bench-frameworks-zen4.jsonl
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np

from _common import host_short, report_errors
from tcl.config import Paths, TclError, atomic_write, save_figure, write_text
from tcl.metrics import standard_error

# a setting's label -> (tcl tune's model, task scheduler, and its search: population and
# generations, None for tcl tune's defaults for the model: tcl 64 x 2, MetaSchedule's own
# 512 x 4); the update is the model's default (tcl: residual)
SETTINGS = {"tcl": ("latest", "gradient", None), "xgb-online": ("xgb-online", "gradient", None),
            "random": ("random", "gradient", None),
            "xgb-online-round-robin": ("xgb-online", "round-robin", None),
            "tcl-round-robin": ("latest", "round-robin", None),
            # issue 40 point 4: more of a small budget's search on the model (scoring a
            # candidate costs ~18 ms, measuring one ~1.4 s)
            "tcl-wide-search": ("latest", "gradient", (256, 4))}   # no commas: --settings splits
BUDGETS = (1, 2, 4, 8, 16, 32, 64)
MAIN_BUDGET = 64   # a curve's run spends at least this many trials per task; --check's fewer
RECORDS_FILE = "database_tuning_record.json"
WORKLOADS_FILE = "database_workload.json"
REPO = Path(__file__).resolve().parents[1]


def prefix_database(run_dir: Path, budget: int) -> Path:
    """A MetaSchedule JSON database holding each task's first ``budget`` measured candidates of
    the run (failures count: they were trials)."""
    out = run_dir / f"budget-{budget}" / "database"
    write_text(out / WORKLOADS_FILE, (run_dir / "database" / WORKLOADS_FILE).read_text(),
               "database file")
    seen: dict[int, int] = {}
    kept = []
    for line in (run_dir / "database" / RECORDS_FILE).read_text().splitlines():
        workload = json.loads(line)[0]
        seen[workload] = seen.get(workload, 0) + 1
        if seen[workload] <= budget:
            kept.append(line)
    write_text(out / RECORDS_FILE, "".join(x + "\n" for x in kept), "database file")
    return out


def budget_lib(run_dir: Path, budget: int, run_budget: int) -> Path:
    """The network compiled for ``budget``: the run's own at its full budget, else the one
    beside the budget's prefix database."""
    return run_dir / "network.so" if budget == run_budget else \
        run_dir / f"budget-{budget}" / "network.so"


def compile_from(database_dir: Path, inst, device, lib: Path, summary: dict) -> None:
    """The network compiled with the tuned schedules of ``database_dir``, as tcl tune compiled
    the run of ``summary`` (its layout, math and fusion: ``compile_choices``)."""
    from tcl.tune import compile_choices, compile_network, network_module
    from tcl.tvm_compat import meta_schedule

    ms = meta_schedule()
    target = device.tvm_target()
    choices = compile_choices(summary)
    mod = network_module(inst, inst.module(), inst.example(), target=target, **choices)
    database = ms.database.JSONDatabase(work_dir=str(database_dir))
    with atomic_write(lib, "compiled network") as tmp:
        compile_network(database, mod, target, choices["layout"],
                        choices["fuse"]).export_library(str(tmp))


def layout_tasks(paths: Paths, network: str, device_name: str, layout: str) -> int:
    """How many tasks MetaSchedule extracts from the network in ``layout`` (nchwc adds layout
    transforms: the zoo's count is nchw's)."""
    from tcl.store.devices import DeviceRegistry
    from tcl.tune import resolve_instance
    from tcl.tune import network_module, tunable_tasks

    inst, target = resolve_instance(paths, network), \
        DeviceRegistry(paths).get(device_name).tvm_target()
    mod = network_module(inst, inst.module(), inst.example(), layout, target)
    return len(tunable_tasks(mod, target))


def repo_relative(path: str | Path) -> str:
    """``path`` relative to the repository, or to the working directory (a lane run from a
    worktree on the main checkout's data), when it lies there: results files are committed."""
    path = Path(path).resolve()
    for root in (REPO, Path.cwd().resolve()):
        if path.is_relative_to(root):
            return str(path.relative_to(root))
    return str(path)


def budget_points(paths: Paths, run_dir: Path, budgets: list[int], run_budget: int) -> list[dict]:
    """Per budget: the prefix network's latency (mean, std ms), PyTorch eager's in the same
    sitting, the trials it holds and the estimated tuning wall time to measure them."""
    from tcl.store.devices import DeviceRegistry
    from tcl.tune import resolve_instance, time_compiled

    summary = json.loads((run_dir / "summary.json").read_text())
    inst = resolve_instance(paths, summary["network"])
    device = DeviceRegistry(paths).get(summary["device"])
    measuring = summary["build_s"] + summary["run_s"]
    search = summary["tune_s"] - measuring
    points = []
    for b in budgets:
        db = prefix_database(run_dir, b)
        trials = sum(1 for _ in (db / RECORDS_FILE).open())
        lib = budget_lib(run_dir, b, run_budget)
        if not lib.exists():
            compile_from(db, inst, device, lib, summary)
        _, mean, std, torch_ms, _ = time_compiled(lib, inst, inst.example(), device)
        points.append({"budget": b, "trials": trials, "latency_ms": round(mean, 4),
                       "latency_std_ms": round(std, 4), "torch_ms": round(torch_ms, 4),
                       "wall_s": round(search + measuring * trials / summary["trials"], 1)})
        print(f"  {run_dir.name} b={b}: {mean:.2f} ms (PyTorch {torch_ms:.2f})", file=sys.stderr)
    return points


def run(args) -> None:
    from dataclasses import asdict

    from tuning import seconds_per_record, training_records

    from tcl.registry import ModelRegistry
    from tcl.store.devices import host_identity
    from tcl.tune import plan_tuning, tune_network
    from tcl.tune.layout import run_suffix

    paths, results = Paths(Path(args.data).resolve()), Path(args.results)
    budgets = [int(b) for b in args.budgets.split(",")]
    done = set()
    if results.exists():
        done = {(r["setting"], r["seed"], r["run_budget"])
                for r in map(json.loads, results.read_text().splitlines())}
    tasks = plan_tuning(paths, args.network, args.device, "random", trials=10 ** 6).tasks if \
        args.layout == "nchw" else layout_tasks(paths, args.network, args.device, args.layout)
    runs = [(s, seed, args.run_budget) for seed in map(int, args.seeds.split(","))
            for s in filter(None, args.settings.split(","))]
    for item in filter(None, args.check.split(",")):   # "tcl:4": a separate run at budget 4
        setting, b = item.split(":")
        runs += [(setting, seed, int(b)) for seed in map(int, args.seeds.split(","))]
    for setting, seed, run_budget in runs:
        if (setting, seed, run_budget) in done:
            continue
        if setting not in SETTINGS:
            raise TclError(f"setting {setting!r}: expected one of {', '.join(SETTINGS)}")
        model, scheduler, search = SETTINGS[setting]
        label = setting
        if model == "latest" and args.tcl_model:   # e.g. a model that never saw the family
            model, label = args.tcl_model, f"{setting}-{Path(args.tcl_model).stem}"
            if (label, seed, run_budget) in done:
                continue
        population, generations = search or (None, None)
        out = Path(args.work) / (f"{args.network}-{args.device}-{label}-b{run_budget}-"
                                 f"s{seed}{run_suffix(args.layout)}")
        r = tune_network(paths, args.network, args.device, model, trials=tasks * run_budget,
                         seed=seed, scheduler=scheduler, population=population,
                         generations=generations, out=out, progress=False,
                         set_aside=True,   # an interrupted run: its records kept, started over
                         layout=args.layout)
        which = r.model
        if model == "latest":
            entry = ModelRegistry(paths).latest(args.device)
            n_data = entry.n_records if entry is not None else 0
        elif model == args.tcl_model:   # chain_model.py's record of what the model learned from
            n_data = json.loads(Path(model).with_suffix(".json").read_text())["records"]
        else:
            n_data = training_records(paths, args.device, model)
        row = {"setting": label, "seed": seed, "run_budget": run_budget, "layout": args.layout,
               "host": host_identity(), "model": which, "network": r.network,
               "device": r.device, "tasks": r.tasks, "tune_s": r.tune_s,
               "online": r.online, "data_records": n_data,
               "data_collection_s": n_data * seconds_per_record(paths, args.device),
               "points": budget_points(paths, out, [b for b in budgets if b <= run_budget],
                                         run_budget),
               "summary": {**{k: v for k, v in asdict(r).items()
                              if k not in ("curve", "online")}, "out": repo_relative(r.out)}}
        with results.open("a") as f:
            f.write(json.dumps(row) + "\n")
        print(f"{setting} seed {seed} (run budget {run_budget}): done in {r.tune_s:.0f} s",
              file=sys.stderr)


def retime_points(args) -> None:
    """Every point's network timed again (its ``network.so``), PyTorch eager beside it, in one
    sitting: for timings a busier host distorted. The first timing stays as ``first_ms``."""
    from tcl.store.devices import DeviceRegistry
    from tcl.tune import resolve_instance, time_compiled

    paths, results = Paths(Path(args.data).resolve()), Path(args.results)
    rows = [json.loads(x) for x in results.read_text().splitlines()]
    for r in rows:
        out = Path(args.work) / Path(r["summary"]["out"]).name
        inst = resolve_instance(paths, r["network"])
        device = DeviceRegistry(paths).get(r["device"])
        for p in r["points"]:
            lib = budget_lib(out, p["budget"], r["run_budget"])
            _, mean, std, torch_ms, _ = time_compiled(lib, inst, inst.example(), device)
            p.setdefault("first_ms", p["latency_ms"])
            p.setdefault("first_torch_ms", p["torch_ms"])
            p.update(latency_ms=round(mean, 4), latency_std_ms=round(std, 4),
                     torch_ms=round(torch_ms, 4))
            print(f"  {out.name} b={p['budget']}: {mean:.2f} ms (first {p['first_ms']:.2f}), "
                  f"PyTorch {torch_ms:.2f}", file=sys.stderr)
        r["retimed"] = True
    with atomic_write(results, "results file") as tmp:
        tmp.write_text("".join(json.dumps(r) + "\n" for r in rows))


def _ms(x: float, like: float | None = None) -> str:
    """A latency in ms to a tenth, below 10 ms (or ``like``'s) to a hundredth (bert_tiny runs
    in 2 ms)."""
    return f"{x:.2f}" if abs(x if like is None else like) < 10 else f"{x:.1f}"


def _mean_se(xs: list[float]) -> tuple[float, float]:
    return float(np.mean(xs)), (standard_error(xs) if len(xs) > 1 else math.nan)


def _mean_se_text(mean: float, se: float, fmt) -> str:
    """``mean ± se``; a single seed's value says so instead of a standard error."""
    return f"{fmt(mean)} (1 seed)" if math.isnan(se) else f"{fmt(mean)} ± {fmt(se, mean)}"


def curves(rows: list[dict], run_budget: int = MAIN_BUDGET) -> dict[str, dict[int, dict]]:
    """Per setting and budget (the curve's runs of at least ``run_budget`` trials per task, not
    ``--check``'s smaller ones): latency and wall time over seeds."""
    out: dict[str, dict[int, dict]] = {}
    for setting in dict.fromkeys(r["setting"] for r in rows):
        runs = [r for r in rows if r["setting"] == setting and r["run_budget"] >= run_budget]
        budgets = sorted({p["budget"] for r in runs for p in r["points"]})
        out[setting] = {}
        for b in budgets:
            pts = [p for r in runs for p in r["points"] if p["budget"] == b]
            lat, se = _mean_se([p["latency_ms"] for p in pts])
            # over PyTorch eager timed beside it: a sitting's load cancels out of the ratio
            rel, rel_se = _mean_se([p["latency_ms"] / p["torch_ms"] for p in pts])
            out[setting][b] = {"ms": lat, "se": se, "seeds": len(pts), "rel": rel, "rel_se": rel_se,
                               "wall_s": float(np.mean([p["wall_s"] for p in pts])),
                               "data_s": float(np.mean([r["data_collection_s"] for r in runs]))}
    return out


def time_to(curve: dict[int, dict], target_ms: float) -> tuple[int, float] | None:
    """The smallest budget whose mean latency is within ``target_ms``, and its wall time plus
    the device data's measurement time; None when no budget gets there."""
    for b in sorted(curve):
        if curve[b]["ms"] <= target_ms:
            return b, curve[b]["wall_s"] + curve[b]["data_s"]
    return None


def summarize(args) -> None:
    rows = [json.loads(x) for x in Path(args.results).read_text().splitlines()]
    c = curves(rows, args.run_budget)
    hosts = sorted({host_short(r["host"]) for r in rows})
    print(f"network {rows[0]['network']}, device {rows[0]['device']}, host {', '.join(hosts)}; "
          "latency ms, mean ± SE over seeds (tuning wall s, estimated)\n")
    settings = list(c)
    budgets = sorted({b for s in settings for b in c[s]})
    print("| trials per task | " + " | ".join(settings) + " |")
    print("|---" * (len(settings) + 1) + "|")
    for b in budgets:
        cells = [f"{_mean_se_text(c[s][b]['ms'], c[s][b]['se'], _ms)} ({c[s][b]['wall_s']:.0f} s)"
                 if b in c[s] else "-" for s in settings]
        print(f"| {b} | " + " | ".join(cells) + " |")
    print("\nThe same over PyTorch eager timed in the same sitting (each point's ratio, then the "
          "mean):\n")
    print("| trials per task | " + " | ".join(settings) + " |")
    print("|---" * (len(settings) + 1) + "|")
    for b in budgets:
        cells = [_mean_se_text(c[s][b]["rel"], c[s][b]["rel_se"], lambda x, like=None: f"{x:.2f}")
                 if b in c[s] else "-" for s in settings]
        print(f"| {b} | " + " | ".join(cells) + " |")
    torch = [p["torch_ms"] for r in rows for p in r["points"]]
    print(f"\nPyTorch eager in the same sittings: {_ms(np.median(torch))} ms (median of "
          f"{len(torch)})")
    if args.frameworks and Path(args.frameworks).exists():
        for line in Path(args.frameworks).read_text().splitlines():
            f = json.loads(line)
            if f.get("network", rows[0]["network"]) != rows[0]["network"]:
                continue
            ms = {k: "-" if f.get(k) is None else _ms(f[k])
                  for k in ("eager_ms", "torch_compile_ms", "onnxruntime_ms")}
            print(f"frameworks ({f.get('threads', 1)} thread, host {host_short(f.get('host'))}):"
                  f" eager {ms['eager_ms']}, torch.compile {ms['torch_compile_ms']}, "
                  f"onnxruntime {ms['onnxruntime_ms']} ms")
    checks = [r for r in rows if r["run_budget"] < args.run_budget]
    for r in checks:
        prefix = c[r["setting"]].get(r["run_budget"])
        print(f"check: {r['setting']} seed {r['seed']} run at {r['run_budget']} trials per task: "
              f"{r['points'][-1]['latency_ms']:.2f} ms (PyTorch {r['points'][-1]['torch_ms']:.2f}"
              f"); " + (f"the 64-trial runs' prefix {prefix['ms']:.2f} ± {prefix['se']:.2f} ms"
                        if prefix else "no 64-trial curve of this setting"))
    for setting, b in dict.fromkeys((r["setting"], r["run_budget"]) for r in checks):
        last = [r["points"][-1] for r in checks if (r["setting"], r["run_budget"]) == (setting, b)]
        ms, se = _mean_se([p["latency_ms"] for p in last])
        rel, rel_se = _mean_se([p["latency_ms"] / p["torch_ms"] for p in last])
        print(f"check: {setting} at {b} trials per task, {len(last)} seed(s): {ms:.2f} ± "
              f"{se:.2f} ms; {rel:.3f} ± {rel_se:.3f} of PyTorch eager in the same sittings")
    print_targets(c)
    if args.publish:
        publish(c, rows, Paths(Path(args.publish)))
    if args.plot:
        _plot(c, args.plot, rows[0]["network"], rows[0]["device"], hosts)


def publish(c: dict[str, dict[int, dict]], rows: list[dict], paths: Paths) -> None:
    """The curves into the data root's budget-curve file (``tcl.tune.expect``), where ``tcl
    tune --dry-run`` reads them; this network and device's earlier points are replaced."""
    from tcl.store.devices import DeviceRegistry
    from tcl.tune import CURVES_FILE, read_curves

    network, device = rows[0]["network"], rows[0]["device"]
    keep = [r for r in read_curves(paths) if (r["network"], r["device"]) != (network, device)]
    target = DeviceRegistry(paths).get(device).target
    torch = {b: float(np.median([p["torch_ms"] for r in rows for p in r["points"]
                                 if p["budget"] == b]))
             for b in {p["budget"] for r in rows for p in r["points"]}}   # every sitting's
    host = ", ".join(sorted({host_short(r["host"]) for r in rows}))
    new = [{"device": device, "target": target, "network": network, "setting": s,
            "budget": b, "latency_ms": round(v["ms"], 3),
            "se_ms": None if math.isnan(v["se"]) else round(v["se"], 3), "seeds": v["seeds"],
            "torch_ms": round(torch[b], 3), "host": host} for s, curve in c.items()
           for b, v in curve.items()]
    with atomic_write(paths.root / CURVES_FILE, "budget-curve file") as tmp:
        tmp.write_text("".join(json.dumps(r) + "\n" for r in keep + new))
    print(f"\n{len(new)} points written to {paths.root / CURVES_FILE}")


def print_targets(c: dict[str, dict[int, dict]]) -> None:
    if not any(s.startswith("tcl") for s in c) or 64 not in c.get("xgb-online", {}):
        return
    best = min((s for s in c if s.startswith("xgb-online")), key=lambda s: c[s][64]["ms"])
    final = c[best][64]["ms"]
    print(f"\nTargets, against xgb-online at 64 trials per task ({best}, its best setting: "
          f"{_ms(final)} ms):")
    for ours in (s for s in c if s.startswith("tcl") and 4 in c[s]):
        ratio = c[ours][4]["ms"] / final
        print(f"- {ours} at 4 trials per task within 10% of it: {ratio:.3f} "
              f"({'met' if ratio <= 1.10 else 'missed'})")
    # tcl against xgb-online under the same task scheduler
    for ours in (s for s in c if s.startswith("tcl")):
        ref = "xgb-online-round-robin" if "round-robin" in ours else "xgb-online"
        if ref not in c:
            continue
        for b in sorted(x for x in c[ours] if x <= 16 and x in c[ref]):
            r = c[ours][b]["ms"] / c[ref][b]["ms"]
            print(f"- at {b} trials per task, {ours} / {ref} = {r:.3f} "
                  f"({'met' if r <= 0.90 else 'missed'}: 10% faster is 0.900)")
    for ours in (s for s in c if s.startswith("tcl")):
        got, theirs = time_to(c[ours], 1.05 * final), time_to(c[best], 1.05 * final)
        if got and theirs:
            s = theirs[1] / got[1]
            print(f"- protocol: {ours} gets within 5% at {got[0]} trials per task in "
                  f"{got[1]:.0f} s (search + its device data), {best} at {theirs[0]} in "
                  f"{theirs[1]:.0f} s: speed-up {s:.2f} ({'met' if s >= 5 else 'missed'}: "
                  "target 5)")
        else:
            print(f"- protocol: {ours} {'never gets' if not got else 'gets'} within 5% of "
                  f"{_ms(final)} ms")


def _plot(c: dict[str, dict[int, dict]], out: str, network: str, device: str,
          hosts: list[str]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 4))
    for setting, curve in c.items():
        bs = sorted(curve)
        ax.errorbar(bs, [curve[b]["ms"] for b in bs],
                    yerr=[0 if math.isnan(curve[b]["se"]) else curve[b]["se"] for b in bs],
                    marker="o", capsize=3, label=setting)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("trials per task")
    ax.set_ylabel("network latency, ms")
    ax.set_title(f"{network} on {device} ({', '.join(hosts)})", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    save_figure(fig, out, "plot", dpi=100)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default="data")
    ap.add_argument("--network", default="resnet18")
    ap.add_argument("--device", default="zen4-1c")
    ap.add_argument("--settings", default=",".join(SETTINGS))
    ap.add_argument("--seeds", default="0,1")
    ap.add_argument("--budgets", default=",".join(map(str, BUDGETS)))
    ap.add_argument("--layout", default="nchw", help="tcl tune --layout of every run")
    ap.add_argument("--run-budget", type=int, default=MAIN_BUDGET,
                    help="trials per task of each run (budgets above 64 are the prefixes of "
                         "later rounds, e.g. 128,256 under round-robin); with --summarize, "
                         "runs of at least this many make the curves, smaller ones are checks")
    ap.add_argument("--check", default="", help="separate runs, e.g. tcl:4,tcl:16")
    ap.add_argument("--tcl-model", metavar="FILE",
                    help="the tcl settings tune with this model file instead of the registry's "
                         "(chain_model.py's; the rows' setting gets the file's stem: tcl-STEM)")
    ap.add_argument("--work", default="data/.cache/budget-curve")
    ap.add_argument("--results", default="docs/bench-budget-curve.jsonl")
    ap.add_argument("--summarize", action="store_true")
    ap.add_argument("--retime", action="store_true",
                    help="time every point's network again, in one sitting")
    ap.add_argument("--plot")
    ap.add_argument("--frameworks", help="with --summarize: benchmarks/frameworks.py's results")
    ap.add_argument("--publish", metavar="DATA",
                    help="with --summarize: write the curves into this data root, for tcl tune's "
                         "dry run")
    args = ap.parse_args(argv)
    job = summarize if args.summarize else retime_points if args.retime else run
    return report_errors("budget_curve", lambda: job(args))


if __name__ == "__main__":
    sys.exit(main())
