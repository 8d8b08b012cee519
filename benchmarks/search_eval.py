"""The search's own distribution as an offline evaluation set (issue 40, point 3).

The cost models are judged on random programs of the held-out networks' tasks, but the search
asks them to rank evolved candidates clustered near the fast region. This benchmark scores every
model kind on both sets of the same held-out tasks of one device:

- ``random``: the device's collected (random-sampled) records of those tasks;
- ``search``: its tuning records of those tasks (source ``tune``: the candidates MetaSchedule's
  evolutionary search proposed and measured during `tcl tune` runs of held-out networks).

Models, per kind and seed (``hyper`` of benchmarks/models.py; the same task split as the train
stage): ``scratch``, trained on the device's own records of the training tasks without tuning
records; ``scratch+tune``, the same with the tuning records of training tasks (the flywheel:
where none exist yet, the arm is skipped and the table says so); ``from DEVICE``, trained on
another device's records (``--transfer``), ``registry``, the device's newest registered model
(what `tcl tune --model latest` uses), where one is registered, and ``file``, each model file of
``--model-files`` (e.g. the registry's chain made again by chain_model.py, with and without the
tuning records). Metrics: TenSet's top-1 and pairwise accuracy, per held-out network, then their
mean; rows carry mean ± standard error over the seeds.

    python benchmarks/search_eval.py --device zen4-1c --transfer cpu-avx512 --seeds 0,1,2 \\
        --results docs/bench-search-eval.jsonl
    python benchmarks/search_eval.py --summarize --results docs/bench-search-eval.jsonl
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import polars as pl

from _common import host_short, report_errors
from models import hyper
from tcl.config import Paths, TclError

KINDS = ("xgb", "tenset-mlp", "mamba", "tlp")
SETS = ("random", "search")


def evaluation_sets(paths: Paths, device: str) -> dict:
    """{set: ProgramSet} over the held-out tasks that the device has tuning records of."""
    from tcl.dataset import SOURCES, holdout_task_ids, load_program_set, measured

    held = holdout_task_ids(paths)
    tuned = measured(paths, device, sources=["tuning"]).filter(pl.col("task_id").is_in(held))
    collected = measured(paths, device, sorted(set(tuned["task_id"].to_list())),
                         sources=[s for s in SOURCES if s != "tuning"])
    # the tasks both sets hold (a held-out network tuned in another layout has no random set)
    tasks = sorted(set(collected["task_id"].to_list()))
    if not tasks:
        raise TclError(f"device {device!r} has no tuning records of a held-out network's task "
                       "that it has random records of too: run `tcl tune --network resnet18 "
                       "--device DEVICE` first")
    tuned = tuned.filter(pl.col("task_id").is_in(tasks))
    sets = {"random": load_program_set(paths, device, tasks, records=collected),
            "search": load_program_set(paths, device, tasks, records=tuned)}
    for name, records in (("random", collected), ("search", tuned)):
        if len(sets[name]) < records.height:   # the features join drops unfeaturized programs
            raise TclError(f"{records.height - len(sets[name])} of the {name} set's "
                           f"{records.height} programs have no features: run `tcl featurize`")
    return sets


def training_split(paths: Paths, device: str, seed: int, tuning: bool):
    """(train, valid, tuning records in train) of the device's training tasks: every source of
    ``tcl.dataset.SOURCES`` but tuning, or all of them with ``tuning``."""
    from tcl.dataset import SOURCES, holdout_task_ids, load_program_set, training_records
    from tcl.train import split_tasks

    held = holdout_task_ids(paths)
    sources = list(SOURCES) if tuning else [s for s in SOURCES if s != "tuning"]
    learn = training_records(paths, device, sources, held=held)
    n_tune = training_records(paths, device, ["tuning"], held=held).height if tuning else 0
    train_ids, valid_ids = split_tasks(sorted(set(learn["task_id"].to_list())), 0.1, seed)
    load = (lambda ids: load_program_set(paths, device, ids, records=learn) if ids else None)
    return load(train_ids), load(valid_ids), n_tune


def score(model, sets: dict, paths: Paths) -> dict:
    """{set: {"top1", "pairwise", "n_tasks", "n_programs"}}, the mean over held-out networks."""
    from tcl.evaluate import evaluate
    from tcl.zoo.extract import load_networks, load_tasks

    nets, tasks = load_networks(paths), load_tasks(paths)
    out = {}
    for name, programs in sets.items():
        frame = evaluate({"m": model}, programs, None, nets, tasks)
        mean = frame.filter(pl.col("scope") == "mean").row(0, named=True)
        out[name] = {k: mean[k] for k in ("top1", "pairwise", "n_tasks", "n_programs")}
    return out


def run(args) -> None:
    from tcl.models import make_model
    from tcl.resolve import resolve_model
    from tcl.store.devices import host_identity

    paths, results = Paths(Path(args.data).resolve()), Path(args.results)
    done = set()
    if results.exists():
        done = {(r["arm"], r["model"], r["seed"]) for r in map(json.loads,
                                                                results.read_text().splitlines())}
    registry_done = any(arm == "registry" for arm, _, _ in done)
    sets = evaluation_sets(paths, args.device)
    print(f"{args.device}: random {len(sets['random'])} programs, search "
          f"{len(sets['search'])} programs", file=sys.stderr)
    base = {"device": args.device, "host": host_identity(),
            "at": time.strftime("%Y-%m-%dT%H:%MZ", time.gmtime())}

    def write(row: dict) -> None:
        with results.open("a") as f:
            f.write(json.dumps(base | row) + "\n")
        print(row, file=sys.stderr, flush=True)

    arms = [("scratch", args.device, False), ("scratch+tune", args.device, True)]
    arms += [(f"from {d}", d, False) for d in args.transfer.split(",") if d]
    for seed in map(int, args.seeds.split(",")):
        for arm, device, tuning in arms:
            split = None
            for kind in args.models.split(","):
                if (arm, kind, seed) in done:
                    continue
                split = split or training_split(paths, device, seed, tuning)
                train, valid, n_tune = split
                if tuning and not n_tune:
                    write({"arm": arm, "model": kind, "seed": seed,
                           "skipped": "no tuning records of a training task yet"})
                    continue
                model = make_model(kind, **hyper(kind, args.epochs, args.xgb_rounds, seed))
                start = time.perf_counter()
                model.fit(train, valid)
                write({"arm": arm, "model": kind, "seed": seed, "n_train": len(train),
                       "n_train_tune": n_tune, "train_s": round(time.perf_counter() - start, 1),
                       **score(model, sets, paths)})
    if not registry_done:
        found = resolve_model(paths, args.device, "continual", optional=True)
        if found is not None:
            write({"arm": "registry", "model": found.what, "seed": 0,
                   **score(found.model, sets, paths)})
    for f in filter(None, args.model_files.split(",")):   # e.g. chain_model.py's
        if ("file", Path(f).stem, 0) not in done:
            write({"arm": "file", "model": Path(f).stem, "seed": 0,
                   **score(resolve_model(paths, args.device, f).model, sets, paths)})


def summarize(results: Path) -> None:
    rows = [json.loads(x) for x in results.read_text().splitlines() if x]
    if not rows:
        raise TclError(f"{results} holds no rows yet")
    frame = pl.DataFrame([{"arm": r["arm"], "model": r["model"], "seed": r["seed"],
                           **{f"{s}_{m}": r[s][m] for s in SETS for m in ("top1", "pairwise")}}
                          for r in rows if "skipped" not in r])
    first = next(r for r in rows if "skipped" not in r)
    print(f"device {first['device']}, host {host_short(first['host'])}, held-out tasks "
          f"{first['random']['n_tasks']} (random: {first['random']['n_programs']} programs, "
          f"search: {first['search']['n_programs']})\n")
    print("| arm | model | seeds | random top-1 | search top-1 | random pairwise | "
          "search pairwise |")
    print("|---|---|---|---|---|---|---|")
    for (arm, model), g in frame.group_by("arm", "model", maintain_order=True):
        cells = []
        for col in ("random_top1", "search_top1", "random_pairwise", "search_pairwise"):
            x = g[col].to_numpy()
            se = x.std(ddof=1) / np.sqrt(len(x)) if len(x) > 1 else float("nan")
            cells.append(f"{x.mean():.3f}" + (f" ± {se:.3f}" if se == se else ""))
        print(f"| {arm} | {model} | {len(g)} | " + " | ".join(cells) + " |")
    for r in rows:
        if "skipped" in r:
            print(f"\n{r['arm']} {r['model']} seed {r['seed']}: skipped, {r['skipped']}")
            break


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default="data")
    ap.add_argument("--device", default="zen4-1c")
    ap.add_argument("--transfer", default="", help="other devices whose records train a model "
                    "scored on this device's sets (comma-separated)")
    ap.add_argument("--models", default=",".join(KINDS))
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--model-files", default="",
                    help="model files scored too (arm file), comma-separated: e.g. "
                         "chain_model.py's")
    ap.add_argument("--epochs", type=int, default=10, help="neural models' epochs")
    ap.add_argument("--xgb-rounds", type=int, default=1000)
    ap.add_argument("--results", default="docs/bench-search-eval.jsonl")
    ap.add_argument("--summarize", action="store_true")
    args = ap.parse_args(argv)
    if args.summarize:
        return report_errors("search_eval", lambda: summarize(Path(args.results)))
    return report_errors("search_eval", lambda: run(args))


if __name__ == "__main__":
    sys.exit(main())
