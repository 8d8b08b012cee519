"""The add-device run end to end on a device of this host (issue 23, point 4).

On a copy of a data root (``--data``, copied once to ``--work``; the original is only read):

1. the teacher: the continual sequence's first device's model (``continual.first``, trained
   from scratch on its full data), registered if the copy has none;
2. the reference: a full-data model of ``--profile`` (a built-in profile; its own records,
   trained from scratch the same way, with ``continual.first`` set to it), registered before the
   teacher so that the add-device run still takes the teacher as the newest model;
3. ``tcl device add DEVICE --target <the profile's target> --dry-run``: its answer time and
   estimate;
4. ``tcl device add DEVICE --target ...``: the add-device run as a user starts it; wall time of
   the command and its table of step times;
5. top-1 (and top-5, pairwise) on the new device's evaluation set (its measured held-out
   programs): the new model, the profile's full-data model and the teacher, on the same rows.

``--max-train-tasks`` / ``--max-holdout-tasks`` / ``--budget`` / ``--eval-programs`` make it
smaller (they override the params file in the copy). Resumable and idempotent: the copy, the
models and the device's measurements are reused; a finished run's JSON (``--results``) is
printed, not rerun (``--again`` removes it and the device's records and selections for a
fresh run; its earlier models stay registered).

    OMP_NUM_THREADS=1 python benchmarks/add_device.py --data data \
        --max-train-tasks 60 --max-holdout-tasks 40
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from _common import report_errors


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def prepare(args) -> Path:
    """The copy of the data root and its params file (the overrides applied); its path."""
    work = args.work.resolve()
    data = work / "data"
    if not data.exists():
        log(f"copying {args.data} to {data}")
        shutil.copytree(args.data, data.with_suffix(".tmp"), dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns(".cache", ".locks"))
        data.with_suffix(".tmp").rename(data)
    raw = yaml.safe_load(Path(args.params).read_text())
    raw["data"] = "data"
    if args.max_train_tasks is not None:
        raw["sample"]["max_train_tasks"] = args.max_train_tasks
    if args.max_holdout_tasks is not None:
        raw["sample"]["max_holdout_tasks"] = args.max_holdout_tasks
    if args.budget is not None:
        raw["select"]["budget"] = args.budget
    if args.eval_programs is not None:
        raw["add_device"]["eval_programs_per_task"] = args.eval_programs
    params_file = work / "params.yaml"
    write_text(params_file, yaml.safe_dump(raw, sort_keys=False), "params file")
    return params_file


def full_data_model(params_file: Path, device: str):
    """The registry entry of ``device``'s scratch model on its full data (trained if none)."""
    from dataclasses import replace

    from tcl.pipeline import stages
    from tcl.pipeline.continual import distill_device
    from tcl.features import featurize
    from tcl.pipeline.params import load_params
    from tcl.registry import ModelRegistry
    from tcl.dataset import holdout_task_ids

    params = load_params(params_file)
    params = replace(params, continual=replace(params.continual, sequence=(device,)))
    found = [e for e in ModelRegistry(params.paths).entries(device)
             if e.method == "scratch" and e.backbone == params.continual.backbone]
    if found:
        return found[-1]
    log(f"featurizing and training {device}'s full-data model")
    stages.run_featurize(params, progress=False)
    # the scores read every held-out task the device measured, not only the selected ones
    featurize(params.paths, task_ids=sorted(holdout_task_ids(params.paths)), progress=False)
    return distill_device(params, device, say=log).entry


def run_cli(params_file: Path, *argv: str) -> tuple[float, str]:
    """Wall seconds and stdout of ``tcl ARGV --params FILE``; its whole output is kept in
    ``<work>/tcl-<argv>.log`` (the progress lines among it)."""
    t0 = time.time()
    out = subprocess.run([sys.executable, "-m", "tcl.cli", *argv, "--params", str(params_file)],
                         cwd=params_file.parent, text=True, capture_output=True)
    secs = time.time() - t0
    name = "-".join(a for a in argv if not a.startswith("{"))
    write_text(params_file.parent / f"tcl-{name}.log", out.stdout + out.stderr, "command log")
    if out.returncode != 0:
        raise SystemExit(f"tcl {' '.join(argv)} failed ({out.returncode}):\n"
                         f"{out.stdout[-3000:]}\n{out.stderr[-3000:]}")
    return secs, out.stdout


def scores(params_file: Path, device: str, entries: dict) -> dict:
    """top-1/top-5/pairwise of each model on ``device``'s measured held-out programs."""
    import math

    from tcl.pipeline.continual import held_out_scores
    from tcl.pipeline.params import load_params
    from tcl.registry import ModelRegistry

    params = load_params(params_file)
    reg = ModelRegistry(params.paths)
    out = {}
    for name, (entry, head) in entries.items():
        model = reg.load(entry).for_device(head)
        mean = held_out_scores(params, model, device).filter(scope="mean").row(0, named=True)
        out[name] = {"model": entry.id, "head": head,
                     **{k: round(float(v), 4) for k, v in mean.items()
                        if (k.startswith("top") or k == "pairwise") and v is not None
                        and math.isfinite(v)}}
    return out


def bench(args) -> None:
    from tcl.store.devices import BUILTIN_DEVICES
    from tcl.pipeline.params import load_params
    from tcl.registry import ModelRegistry
    from tcl.store.records import RecordStore

    results = args.results.resolve()
    if results.exists() and not args.again:
        print(results.read_text())
        return
    params_file = prepare(args)
    params = load_params(params_file)
    if args.again:
        results.unlink(missing_ok=True)
        for folder in (params.paths.records_dir, params.paths.root / "selections"):
            shutil.rmtree(folder / f"device={args.device}", ignore_errors=True)
    profile = BUILTIN_DEVICES[args.profile]
    reference = full_data_model(params_file, args.profile)          # first: older than the
    teacher = full_data_model(params_file, params.continual.sequence[0])  # teacher
    resumed = bool(RecordStore(params.paths).files(args.device))
    target = json.dumps(profile.target)
    log(f"dry run of {args.device} (target {target})")
    dry_secs, dry = run_cli(params_file, "device", "add", args.device, "--target", target,
                            "--dry-run")
    log(f"dry run: {dry_secs:.1f} s\n{dry}")
    log(f"add-device run of {args.device}")
    wall, out = run_cli(params_file, "device", "add", args.device, "--target", target)
    table = out[out.index("time from the command"):] if "time from the command" in out else out
    log(f"add-device run: {wall:.0f} s\n{table}")
    new = ModelRegistry(params.paths).latest(args.device)
    quality = scores(params_file, args.device, {
        "new (add-device)": (new, args.device), f"{args.profile} full data": (reference,
                                                                           args.profile),
        f"teacher ({teacher.device})": (teacher, teacher.device)})
    load = os.getloadavg()
    record = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
              "device": args.device, "profile": args.profile, "target": profile.target,
              "resumed": resumed, "dry_run_secs": round(dry_secs, 1), "dry_run": dry,
              "wall_secs": round(wall, 1), "step_table": table, "n_records": new.n_records,
              "quality": quality, "load_average": [round(x, 2) for x in load],
              "params": {k: yaml.safe_load(params_file.read_text())[k]
                         for k in ("sample", "select", "add_device")}}
    write_text(results, json.dumps(record, indent=2) + "\n", "results file")
    print(json.dumps(record, indent=2))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", type=Path, default=Path("data"), help="the data root to copy")
    p.add_argument("--params", default="params.yaml")
    p.add_argument("--work", type=Path,
                   default=Path(tempfile.gettempdir()) / "tcl-bench-add-device",
                   help="where the copy of the data root goes (default: the temp directory)")
    p.add_argument("--device", default="bench-host")
    p.add_argument("--profile", default="cpu-sse42",
                   help="a built-in profile this host runs: the new device's target")
    p.add_argument("--max-train-tasks", type=int)
    p.add_argument("--max-holdout-tasks", type=int)
    p.add_argument("--budget", type=float, help="select.budget (a share or a count)")
    p.add_argument("--eval-programs", type=int, help="add_device.eval_programs_per_task")
    p.add_argument("--results", type=Path, default=Path("docs/bench-add-device.json"))
    p.add_argument("--again", action="store_true",
                   help="measure the device anew (its records in the copy are removed)")
    args = p.parse_args()
    args.data = args.data.resolve()
    return report_errors("add_device", lambda: bench(args))


if __name__ == "__main__":
    sys.exit(main())
