"""Continual learning across devices: five methods on the same data, splits and subsets.

Protocol (issue 13, point 6). A device order (``--orders``) over the reference devices; every
device's data is its measured programs of the pipeline's tasks (``--params``), restricted to
the programs every device of the order measured, so the devices differ only in their labels.

- The first device: a model trained on its whole training pool (10% of the tasks kept for early
  stopping), method "scratch"; every method's chain starts from this same model.
- Each later device: ``--share`` of its training pool, picked by RDU (``tcl.samplers``, per task)
  with the first device's model as the cold-start model (embedding and uncertainty): the same
  subset for every method. 10% of the subset's tasks are kept for early stopping. The pool's
  other programs are the unlabelled candidates (features only) that distillation may read.
- Methods (``tcl.continual``): scratch (the subset alone), finetune, multitask (heads per device,
  all devices' data so far: the first device's full pool and the later subsets), distill,
  compress. Each method's chain feeds its own next step (its model is the next teacher).
- Scored with ``tcl.evaluate`` on each device's held-out networks: the new device right after it
  is learned (top-1, top-5, pairwise); at the end of the order every earlier device again, and
  forgetting = its score right after its own step minus its score with the final model
  (``tcl.metrics.forgetting_summary``: overall, per operator class, worst class). A scratch model
  serves one device, so it has no forgetting.

One JSON line per (backbone, order, seed, method, device) in ``--results``; a (backbone, order,
seed) that is there already is skipped, so an interrupted run resumes.

Noise floor (``--noise-floor``, issue 23 point 3): per device that is ever an earlier device,
the first device's model ("scratch" on the whole training pool) is trained with two seeds of a
pair (``--seed-list`` 0 1 2 3: pairs (0, 1), (2, 3)), and the same per-class difference as
forgetting (``forgetting_summary``, seed a minus seed b) is taken between the two. Two equally
good models differ by this much without any forgetting, so a method's worst class is a finding
only where it exceeds the worst class of this difference. One JSON line per (backbone, device,
pair) with ``"kind": "noise"`` in ``--noise-results``; ``--summarize`` puts the per-class
forgetting beside it.

    OMP_NUM_THREADS=1 python benchmarks/continual.py --data data --seeds 5
    python benchmarks/continual.py --summarize --plot docs/bench-continual.png
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

import numpy as np
import polars as pl

from _common import mean_se, pipeline_task_ids

ORDERS = ("cpu-avx2,cpu-sse42,cpu-avx2-1c,cpu-avx512", "cpu-avx512,cpu-sse42,cpu-avx2,cpu-avx2-1c")
METHODS = ("scratch", "finetune", "multitask", "distill", "compress")


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


class Data:
    """Per device: the training pool and the held-out set (ProgramSets with task ids)."""

    def __init__(self, args, devices: list[str]) -> None:
        from tcl.config import Paths
        from tcl.dataset import holdout_task_ids, load_program_set

        self.paths = Paths(args.data.resolve())
        tasks = pipeline_task_ids(self.paths.root, args.params)
        held = holdout_task_ids(self.paths) & tasks
        self.nets = pl.read_parquet(self.paths.networks_file)
        self.tasks = pl.read_parquet(self.paths.tasks_file)
        loaded = {d: load_program_set(self.paths, d, sorted(tasks)) for d in devices}
        common = set.intersection(*[set(ps.program_ids.astype(str)) for ps in loaded.values()])
        self.train, self.held, self.wide = {}, {}, {}
        for d, ps in loaded.items():
            ids = ps.program_ids.astype(str)
            tids = ps.task_ids.astype(str)
            keep = np.isin(ids, list(common))
            is_held = np.isin(tids, list(held))
            self.train[d] = relabel(ps.subset(np.flatnonzero(keep & ~is_held)))
            # every measured training-task program of the device, common or not (--wide-pool)
            self.wide[d] = relabel(ps.subset(np.flatnonzero(~is_held)))
            self.held[d] = ps.subset(np.flatnonzero(keep & is_held))
        log("data: " + ", ".join(f"{d} {len(self.train[d])} train / {len(self.held[d])} held-out"
                                 for d in devices))

    def evaluate(self, model, device: str) -> pl.DataFrame:
        from tcl.evaluate import evaluate

        return evaluate({"m": model.for_device(device)}, self.held[device], None, self.nets,
                        self.tasks)


def relabel(ps):
    """Groups 0..k-1 by task, labels within these programs (what the device measured)."""
    from dataclasses import replace

    from tcl.metrics import labels

    _, group = np.unique(ps.task_ids.astype(str), return_inverse=True)
    return replace(ps, group=group.astype(np.int64),
                   labels=labels(ps.latency, group).astype(np.float32))


def split(ps, seed: int, fraction: float = 0.1):
    """(fit, valid) by tasks, as the train stage splits."""
    from tcl.train import split_tasks

    fit_ids, valid_ids = split_tasks(sorted(set(ps.task_ids.astype(str))), fraction, seed)
    pick = lambda ids: relabel(ps.subset(np.flatnonzero(  # noqa: E731
        np.isin(ps.task_ids.astype(str), ids)))) if ids else None
    return pick(fit_ids), pick(valid_ids)


def fit_scratch(device: str, pool, seed: int, settings):
    """A model of ``device`` alone on its whole ``pool`` (10% of the tasks kept for early
    stopping, split by ``seed``): a chain's first model, the "full" rows, the noise floor's
    pairs, the cross-host models. Returns the model, its DeviceData and the fit's seconds."""
    from tcl.continual import DeviceData, make_distiller

    fit, valid = split(pool, seed)
    own = DeviceData(device, fit, valid, unlabelled(pool))
    start = time.perf_counter()
    model = make_distiller("scratch").fit(None, own, settings)
    return model, own, time.perf_counter() - start


def unlabelled(ps):
    from dataclasses import replace

    return replace(ps, labels=None)


def mean_row(frame: pl.DataFrame) -> dict:
    row = frame.filter(pl.col("scope") == "mean").row(0, named=True)
    return {k: float(row[k]) for k in ("top1", "top5", "pairwise") if row.get(k) is not None}


def run_unit(data: Data, backbone: str, order: list[str], seed: int, args, hyper: dict
             ) -> list[dict]:
    from tcl.continual import DeviceData, Settings, make_distiller
    from tcl.metrics import forgetting_summary
    from tcl.samplers import Pool, make_sampler, parse_budget

    settings = Settings(backbone, hyper, args.kd_new, args.kd_old, args.ewc, seed)
    first = order[0]
    base, first_data, secs = fit_scratch(first, data.train[first], seed, settings)
    first_eval = data.evaluate(base, first)
    rows = [{"method": m, "device": first, "step": 0, "secs": round(secs, 2),
             **mean_row(first_eval), "n_labelled": len(data.train[first])} for m in args.methods]
    log(f"{backbone} {order} seed {seed}: {first} full pool {len(first_data.labelled)} programs, "
        f"{secs:.0f} s, top1 {rows[0]['top1']:.3f}")
    chains = {m: base for m in args.methods}
    right_after = {m: {first: first_eval} for m in args.methods}
    history = [first_data]
    for step, device in enumerate(order[1:], start=1):
        pool_ps = data.wide[device] if args.wide_pool else data.train[device]
        k = parse_budget(args.share, len(data.train[device]))   # the same count either way
        sampler = make_sampler(args.sampler)
        ids = sampler.select(Pool(unlabelled(pool_ps)), k, model=base, seed=seed)
        picked = pool_ps.subset(np.flatnonzero(np.isin(pool_ps.program_ids.astype(str), ids)))
        sub_fit, sub_valid = split(picked, seed)
        new = DeviceData(device, sub_fit, sub_valid, unlabelled(pool_ps))
        for m in args.methods:
            start = time.perf_counter()
            teacher = None if m == "scratch" else chains[m]
            model = make_distiller(m).fit(teacher, new, settings, history)
            secs = time.perf_counter() - start
            ev = data.evaluate(model, device)
            chains[m] = model if m != "scratch" else chains[m]
            right_after[m][device] = ev
            n = model.n_parameters()
            rows.append({"method": m, "device": device, "step": step, "secs": round(secs, 2),
                         **mean_row(ev), "n_labelled": len(picked), "params_shared": n["shared"],
                         "params_per_device": n["per_device"], "params_total": n["total"]})
            log(f"  {device} {m}: top1 {rows[-1]['top1']:.3f} pairwise "
                f"{rows[-1]['pairwise']:.3f} ({secs:.0f} s)")
        history.append(new)
    if args.full_rows:   # the later devices' own full-pool models: the 10% model's reference
        for step, device in enumerate(order[1:], start=1):
            full = data.wide[device] if args.wide_pool else data.train[device]
            model, _, fit_secs = fit_scratch(device, full, seed, settings)
            rows.append({"method": "full", "device": device, "step": step,
                         "secs": round(fit_secs, 2),
                         **mean_row(data.evaluate(model, device)), "n_labelled": len(full)})
            log(f"  {device} full pool ({len(full)} programs): top1 {rows[-1]['top1']:.3f}")
    # forgetting: each earlier device, right after its step vs with the chain's final model
    for m in args.methods:
        if m == "scratch":
            continue
        final = chains[m]
        for device in order[:-1]:
            f = forgetting_summary(right_after[m][device], data.evaluate(final, device))
            row = next(r for r in rows if r["method"] == m and r["device"] == device)
            row["forgetting"] = f
    return rows


def overrides(pairs: list[str]) -> dict:
    from _common import parse_value

    out = {}
    for pair in pairs:
        key, _, value = pair.partition("=")
        out[key] = parse_value(value)
    return out


def load_hyper(params_file: str) -> dict:
    import yaml

    raw = yaml.safe_load(Path(params_file).read_text())
    return raw["train"]["hyper"]


def _done(path: Path, key) -> set:
    """The keys of the rows a resumable results file already holds (``key(row)`` each)."""
    if not path.exists():
        return set()
    return {key(json.loads(line)) for line in path.read_text().splitlines() if line.strip()}


def main_run(args) -> None:
    done = _done(args.results, lambda r: (r["backbone"], r["order"], r["seed"]))
    orders = [o.split(",") for o in args.orders]
    data = Data(args, sorted(set(d for o in orders for d in o)))
    hyper_all = load_hyper(args.params)
    for seed in (args.seed_list if args.seed_list else range(args.seeds)):
        for backbone in args.backbones:
            for order in orders:
                key = (backbone, ",".join(order), seed)
                if key in done:
                    continue
                hyper = {**hyper_all.get(backbone, {}), **overrides(args.set)}
                rows = run_unit(data, backbone, order, seed, args, hyper)
                with open(args.results, "a") as fh:
                    for r in rows:
                        fh.write(json.dumps({"backbone": backbone, "order": ",".join(order),
                                             "seed": seed, "share": args.share,
                                             "pool": "wide" if args.wide_pool else "common",
                                             "sampler": args.sampler, **r}) + "\n")


def main_noise(args) -> None:
    """Per-class differences between two seeds of one model (the noise floor of forgetting)."""
    from tcl.continual import Settings
    from tcl.metrics import forgetting_summary

    done = _done(args.noise_results, lambda r: (r["backbone"], r["device"], tuple(r["seeds"])))
    devices = sorted({d for o in args.orders for d in o.split(",")[:-1]})
    data = Data(args, devices)
    hyper_all = load_hyper(args.params)
    seeds = list(args.seed_list if args.seed_list else range(args.seeds))
    for a, b in zip(seeds[0::2], seeds[1::2]):
        for backbone in args.backbones:
            hyper = {**hyper_all.get(backbone, {}), **overrides(args.set)}
            for device in devices:
                if (backbone, device, (a, b)) in done:
                    continue
                evals, secs = [], 0.0
                for seed in (a, b):
                    model, _, fit_secs = fit_scratch(
                        device, data.train[device], seed,
                        Settings(backbone, hyper, args.kd_new, args.kd_old, args.ewc, seed))
                    secs += fit_secs
                    evals.append(data.evaluate(model, device))
                f = forgetting_summary(evals[0], evals[1])
                log(f"noise {backbone} {device} seeds {a},{b}: top1 {f['top1']['overall']:+.3f}"
                    f" worst class {f['top1']['worst']:+.3f}, pairwise "
                    f"{f['pairwise']['overall']:+.3f} worst {f['pairwise']['worst']:+.3f}")
                with open(args.noise_results, "a") as fh:
                    fh.write(json.dumps({"kind": "noise", "backbone": backbone, "device": device,
                                         "seeds": [a, b], "secs": round(secs, 2),
                                         "top1": [mean_row(e)["top1"] for e in evals],
                                         "forgetting": f}) + "\n")


def noise_table(rows: list[dict], noise: list[dict]) -> list[str]:
    """Per-class forgetting (mean over seeds and earlier devices) beside the noise floor: the
    per-class difference between two seeds of one model, as |a - b| (mean) and its worst class
    (per pair, the largest signed difference over classes and devices, as forgetting's)."""
    out = ["\n#### Forgetting per operator class against the noise floor (two seeds of one "
           "model: per-class seed a minus seed b; `noise`: mean absolute difference; "
           "`noise worst`: per pair the largest difference over classes and devices, as "
           "forgetting's worst class is taken)\n"]
    for value in ("top1", "pairwise"):
        for backbone in sorted({r["backbone"] for r in noise}):
            nz = [r for r in noise if r["backbone"] == backbone]
            classes = sorted({c for r in nz for c in r["forgetting"][value]["per_class"]})
            methods = [m for m in METHODS if any(
                "forgetting" in r and r["method"] == m and r["backbone"] == backbone
                for r in rows)]
            out.append(f"\n{backbone}, {value} (forgetting: mean ± standard error over seeds, "
                       "each seed's value the mean over the order's earlier devices; both "
                       "orders pooled)\n")
            out.append("| class | noise | " + " | ".join(methods) + " |")
            out.append("|---|---|" + "---|" * len(methods))
            for c in classes:
                noise_c = [abs(r["forgetting"][value]["per_class"][c]) for r in nz
                           if c in r["forgetting"][value]["per_class"]]
                cells = []
                for m in methods:
                    per_seed: dict = {}
                    for r in rows:
                        if r.get("method") == m and r["backbone"] == backbone and \
                                "forgetting" in r and c in r["forgetting"][value]["per_class"]:
                            per_seed.setdefault((r["order"], r["seed"]), []).append(
                                r["forgetting"][value]["per_class"][c])
                    cells.append(mean_se([float(np.mean(v)) for v in per_seed.values()]))
                out.append(f"| {c} | {np.mean(noise_c):.3f} | " + " | ".join(cells) + " |")
            pairs: dict = {}
            for r in nz:
                pairs.setdefault(tuple(r["seeds"]), []).append(r["forgetting"][value]["worst"])
            worst = [max(v) for v in pairs.values()]
            overall = [abs(r["forgetting"][value]["overall"]) for r in nz]
            out.append(f"| noise worst class (over classes and devices, per pair) | "
                       f"{mean_se(worst)} | |")
            out.append(f"| noise overall (mean over networks) | {mean_se(overall)} | |")
    return out


# -- summary -------------------------------------------------------------------------------------
def summarize(args) -> str:
    rows = [json.loads(line) for f in [args.results, *args.more] if f.exists()
            for line in f.read_text().splitlines() if line.strip()]
    out = [f"Results: {args.results} ({len(rows)} rows). Mean ± standard error over seeds "
           "(n=5 unless marked)."]
    frame = pl.DataFrame([{k: v for k, v in r.items() if k != "forgetting"} for r in rows])
    for (backbone, order), part in frame.group_by("backbone", "order", maintain_order=True):
        later = part.filter(pl.col("step") > 0)
        devices = later["device"].unique(maintain_order=True).to_list()
        out.append(f"\n#### {backbone}, order {order.replace(',', ' -> ')}: the new device "
                   f"right after it is learned (top-1 / pairwise)\n")
        out.append("| method | " + " | ".join(devices) + " | mean top-1 | mean pairwise |")
        out.append("|---|" + "---|" * (len(devices) + 2))
        for m in (*METHODS, "full"):
            mp = later.filter(pl.col("method") == m)
            if mp.is_empty():
                continue
            cells = [mean_se(mp.filter(pl.col("device") == d)["top1"].to_list()) for d in devices]
            per_seed = mp.group_by("seed").agg(pl.col("top1").mean(), pl.col("pairwise").mean())
            out.append(f"| {m} | " + " | ".join(cells) + f" | {mean_se(per_seed['top1'].to_list())}"
                       f" | {mean_se(per_seed['pairwise'].to_list())} |")
        first = part.filter(pl.col("step") == 0)
        out.append(f"\nFirst device ({first['device'][0]}, full pool): top-1 "
                   f"{mean_se(first.filter(pl.col('method') == METHODS[0])['top1'].to_list())}")
    # the targets, paired by seed (mean top-1 over an order's later devices)
    out.append("\n#### Targets, paired by seed (difference of the mean top-1 over the later "
               "devices; target: distill - multitask >= 0.02, distill - finetune >= 0.05)\n")
    out.append("| backbone | order | distill - multitask | distill - finetune | "
               "compress - distill | compress - multitask | compress - finetune |")
    out.append("|---|---|---|---|---|---|---|")
    pairs = [("distill", "multitask"), ("distill", "finetune"), ("compress", "distill"),
             ("compress", "multitask"), ("compress", "finetune")]
    for (backbone, order), part in frame.filter(pl.col("step") > 0).group_by(
            "backbone", "order", maintain_order=True):
        wide = part.group_by("seed", "method").agg(pl.col("top1").mean()).pivot(
            on="method", index="seed", values="top1")
        cells = [mean_se((wide[a] - wide[b]).drop_nulls().to_list())
                 if {a, b} <= set(wide.columns) else "" for a, b in pairs]
        if "full" in wide.columns:   # --full-rows: the 10% models against the full pool's
            cells += [f"{m} / full {mean_se((wide[m] / wide['full']).drop_nulls().to_list())}"
                      for m in ("distill", "finetune") if m in wide.columns]
        out.append(f"| {backbone} | {order.split(',')[0]} first | " + " | ".join(cells) + " |")
    # forgetting
    out.append("\n#### Forgetting at the end of the order (earlier devices: right after their "
               "own step minus with the final model; > 0 forgot)\n")
    out.append("| backbone | order | method | top-1 mean | top-1 worst class | pairwise mean | "
               "pairwise worst class |")
    out.append("|---|---|---|---|---|---|---|")
    groups: dict = {}
    for r in rows:
        if "forgetting" not in r:
            continue
        g = groups.setdefault((r["backbone"], r["order"], r["method"]), {})
        s = g.setdefault(r["seed"], {"t": [], "tw": [], "p": [], "pw": [], "twc": [], "pwc": []})
        f = r["forgetting"]
        s["t"].append(f["top1"]["overall"])
        s["p"].append(f["pairwise"]["overall"])
        s["tw"].append(f["top1"]["worst"])
        s["pw"].append(f["pairwise"]["worst"])
        s["twc"].append(f["top1"]["worst_class"])
        s["pwc"].append(f["pairwise"]["worst_class"])
    for (backbone, order, m), seeds in groups.items():
        def per_seed(key, agg):
            return [agg([x for x in s[key] if x is not None]) for s in seeds.values()]
        worst_t = max((c for s in seeds.values() for c in s["twc"] if c), default="",
                      key=lambda c: sum(s["twc"].count(c) for s in seeds.values()))
        worst_p = max((c for s in seeds.values() for c in s["pwc"] if c), default="",
                      key=lambda c: sum(s["pwc"].count(c) for s in seeds.values()))
        out.append(f"| {backbone} | {order.split(',')[0]} first | {m} | "
                   f"{mean_se(per_seed('t', np.mean))} | {mean_se(per_seed('tw', max))} "
                   f"({worst_t}) | {mean_se(per_seed('p', np.mean))} | "
                   f"{mean_se(per_seed('pw', max))} ({worst_p}) |")
    noise = [json.loads(line) for f in args.noise_more if f.exists()
             for line in f.read_text().splitlines() if line.strip()]
    if noise:
        out += noise_table(rows, noise)
    # parameters and time
    out.append("\n#### Parameters and training time per later device\n")
    out.append("| backbone | method | shared | per device | growth per device | seconds |")
    out.append("|---|---|---|---|---|---|")
    later = frame.filter((pl.col("step") > 0) & (pl.col("method") != "full"))
    for (backbone, m), part in later.group_by("backbone", "method", maintain_order=True):
        r = part.row(0, named=True)
        growth = r["params_per_device"] / (r["params_shared"] + r["params_per_device"])
        per = "—" if m == "scratch" else f"{r['params_per_device']}"
        out.append(f"| {backbone} | {m} | {r['params_shared']} | {per} | "
                   f"{'— (one model per device)' if m == 'scratch' else f'{growth:.2%}'} | "
                   f"{mean_se(part['secs'].to_list())} |")
    text = "\n".join(out)
    if args.plot:
        plot(frame, args.plot)
    return text


def plot(frame: pl.DataFrame, path: Path) -> None:
    import matplotlib

    from tcl.config import save_figure

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    later = frame.filter(pl.col("step") > 0)
    keys = later.select("backbone", "order").unique(maintain_order=True).rows()
    fig, axes = plt.subplots(1, len(keys), figsize=(5 * len(keys), 3.8), squeeze=False)
    for ax, (backbone, order) in zip(axes[0], keys):
        part = later.filter((pl.col("backbone") == backbone) & (pl.col("order") == order))
        devices = part["device"].unique(maintain_order=True).to_list()
        width = 0.8 / len(METHODS)
        for i, m in enumerate(METHODS):
            mp = part.filter(pl.col("method") == m)
            if mp.is_empty():
                continue
            means = [mp.filter(pl.col("device") == d)["top1"].mean() for d in devices]
            ses = [(mp.filter(pl.col("device") == d)["top1"].std() or 0) /
                   math.sqrt(max(mp.filter(pl.col("device") == d).height, 1)) for d in devices]
            ax.bar(np.arange(len(devices)) + i * width, means, width, yerr=ses, label=m)
        ax.set_xticks(np.arange(len(devices)) + 0.4 - width / 2, devices, fontsize=8)
        ax.set_ylabel("top-1, held-out networks")
        ax.set_title(f"{backbone}: {order.split(',')[0]} first", fontsize=9)
        ax.set_ylim(0, 1)
    axes[0][0].legend(fontsize=7, loc="lower left")
    fig.tight_layout()
    save_figure(fig, path, "plot", dpi=120)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, default=Path("data"))
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--results", type=Path, default=Path("docs/bench-continual.jsonl"))
    ap.add_argument("--orders", nargs="+", default=list(ORDERS))
    ap.add_argument("--backbones", nargs="+", default=["tenset-mlp", "mamba"])
    ap.add_argument("--methods", nargs="+", default=list(METHODS))
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--seed-list", type=int, nargs="+",
                    help="only these seeds (split a run over processes)")
    ap.add_argument("--share", type=float, default=0.1)
    ap.add_argument("--sampler", default="rdu", help="picks each later device's subset")
    ap.add_argument("--wide-pool", action="store_true",
                    help="a later device's pool (what the sampler picks from and distillation "
                    "reads unlabelled) is all its measured training-task programs, not only "
                    "those every device measured; the labelled count stays --share of the "
                    "common pool (issue 23 point 2: unlabelled programs are free)")
    ap.add_argument("--full-rows", action="store_true",
                    help="also train each later device's model on its whole pool (method "
                    "'full'): the reference for the 10%% model")
    ap.add_argument("--kd-new", type=float, default=1.0)
    ap.add_argument("--kd-old", type=float, default=1.0)
    ap.add_argument("--ewc", type=float, default=10.0)
    ap.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE",
                    help="override a backbone hyperparameter (smoke runs: epochs=2)")
    ap.add_argument("--more", type=Path, nargs="*", default=[],
                    help="with --summarize: further results files (runs split over processes)")
    ap.add_argument("--noise-floor", action="store_true",
                    help="train two seeds of each earlier device's model and record their "
                    "per-class differences (the noise floor of forgetting) in --noise-results")
    ap.add_argument("--noise-results", type=Path,
                    default=Path("docs/bench-continual-noise.jsonl"))
    ap.add_argument("--summarize", action="store_true")
    ap.add_argument("--plot", type=Path)
    args = ap.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    args.noise_more = [args.noise_results]
    if args.summarize:
        print(summarize(args))
        return
    import torch

    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    main_noise(args) if args.noise_floor else main_run(args)


if __name__ == "__main__":
    main()
