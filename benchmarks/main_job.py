"""The README's main job, timed per stage, from a fresh clone (issue 24, point 2).

``git clone`` of the committed state (HEAD of ``--repo``) into a temporary directory, then
``python -m flows.pipeline --params params.yaml`` there with this interpreter (install
excluded: the existing venv, PYTHONPATH at the clone, a fresh PREFECT_HOME inside it). The flow
records each stage's start and end (``data/reports/pipeline-stages.json``); this script adds the
process's own wall time (the rest is start-up: imports, Prefect's temporary API), the fits' own
clocks per model kind (each model's ``.json``), and the load average sampled during the run (a
shared machine: other work on the same cores shows there). Prints the table and writes it to
``--out`` (text) and ``--json``.

    .venv/bin/python benchmarks/main_job.py [--repo .] [--out docs/bench-main-job.txt]
    .venv/bin/python benchmarks/main_job.py --stages-from docs/bench-main-job.json  # re-print
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

from _common import report_errors

from tcl.config import TclError, write_text
from tcl.store.devices import host_identity
from tcl.pipeline.params import load_params

ROOT = Path(__file__).resolve().parent.parent

LOAD_EVERY_S = 15


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _sample_load(samples: list[float], stop: threading.Event) -> None:
    while not stop.wait(LOAD_EVERY_S):
        samples.append(os.getloadavg()[0])


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def fit_seconds(models_dir: Path) -> dict[str, dict]:
    """Per model kind: how many fits and the sum of their own clocks (``train_secs``)."""
    kinds: dict[str, dict] = {}
    for f in sorted(models_dir.rglob("*.json")):
        try:
            info = json.loads(f.read_text())
        except (OSError, ValueError):
            continue
        if not isinstance(info, dict) or "train_secs" not in info or "kind" not in info:
            continue
        k = kinds.setdefault(info["kind"], {"fits": 0, "seconds": 0.0})
        k["fits"] += 1
        k["seconds"] = round(k["seconds"] + float(info["train_secs"]), 1)
    return kinds


def run_main_job(repo: Path, params: str, keep: Path | None) -> dict:
    """Clone ``repo`` and run the main job there; the run's facts (stages, total, load)."""
    base = keep or Path(tempfile.mkdtemp(prefix="tcl-main-job-"))
    clone = base / "clone"
    if clone.exists():
        raise TclError(f"{clone} exists: give --keep an empty or new directory")
    commit = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], check=True,
                            capture_output=True, text=True).stdout.strip()
    subprocess.run(["git", "clone", "--quiet", str(repo), str(clone)], check=True)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("PREFECT_") and k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(clone)   # the venv's editable install would import another tree
    log = base / "main-job.log"
    samples: list[float] = [os.getloadavg()[0]]
    stop = threading.Event()
    sampler = threading.Thread(target=_sample_load, args=(samples, stop), daemon=True)
    started = _now()
    print(f"main job: {clone} at {commit[:10]}, log {log}", flush=True)
    t0, cpu0 = time.perf_counter(), _children_cpu()
    sampler.start()
    with log.open("w") as fh:
        rc = subprocess.run([sys.executable, "-m", "flows.pipeline", "--params", params],
                            cwd=clone, env=env, stdout=fh, stderr=subprocess.STDOUT).returncode
    total, cpu = time.perf_counter() - t0, _children_cpu() - cpu0
    stop.set()
    sampler.join()
    if rc != 0:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-20:])
        raise TclError(f"the main job failed (exit {rc}) after {total:.0f} s; log {log}:\n{tail}")
    stages = json.loads(load_params(clone / params).paths.stages_file.read_text())["stages"]
    return {"command": f"python -m flows.pipeline --params {params}", "commit": commit,
            "started": started, "ended": _now(), "host": host_identity(),
            "cores": len(os.sched_getaffinity(0)), "python": platform.python_version(),
            "total_seconds": round(total, 1), "total_cpu_seconds": round(cpu, 1),
            "stages": stages,
            "fits": fit_seconds(clone / "data" / "models"),
            "load_average": {"min": min(samples), "mean": round(sum(samples) / len(samples), 2),
                             "max": max(samples), "every_s": LOAD_EVERY_S}}


def table(run: dict) -> str:
    """The per-stage table: stage, seconds, share of the total and, where recorded, CPU seconds
    (the stage's processes, pools included); start-up and total rows."""
    total, cores = run["total_seconds"], run.get("cores", 2)
    rows = [(s["stage"], s["seconds"], s.get("cpu_seconds")) for s in run["stages"]]
    rest_cpu = (run["total_cpu_seconds"] - sum(c for *_, c in rows)
                if run.get("total_cpu_seconds") is not None
                and all(c is not None for *_, c in rows) else None)
    rows.append(("start-up (imports, Prefect API)", total - sum(s for _, s, _ in rows), rest_cpu))
    rows.append(("total", total, run.get("total_cpu_seconds")))
    lines = [f"main job per stage: {run['command']}",
             f"commit {run['commit'][:10]}, {run['started']} .. {run['ended']}",
             f"host {run['host']}, {cores} cores; load average (1 min) during the run: "
             f"min {run['load_average']['min']:.2f}, mean {run['load_average']['mean']:.2f}, "
             f"max {run['load_average']['max']:.2f}",
             "",
             f"{'stage':<32} {'seconds':>8} {'share':>7} {'CPU s':>8}",
             f"{'-' * 32} {'-' * 8} {'-' * 7} {'-' * 8}"]
    lines += [f"{name:<32} {secs:>8.1f} {secs / total:>7.1%} "
              f"{'' if cpu is None else f'{cpu:.1f}':>8}" for name, secs, cpu in rows]
    lines[-1] += f"  ({total / 60:.1f} min)"
    if run.get("total_cpu_seconds") is not None:
        lines += ["", f"CPU seconds / {cores} cores: {run['total_cpu_seconds'] / cores:.0f} s "
                  f"({run['total_cpu_seconds'] / cores / 60:.1f} min): the wall time if every "
                  "core were ours and busy throughout"]
    if run.get("fits"):
        lines += ["", "fits (each fit's own clock, summed; they run in parallel):"]
        lines += [f"  {kind:<12} {f['fits']:>3} fits {f['seconds']:>8.1f} s"
                  for kind, f in sorted(run["fits"].items())]
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repo", type=Path, default=ROOT, help="the git repository to clone")
    ap.add_argument("--params", default="params.yaml", help="params file, in the clone")
    ap.add_argument("--keep", type=Path, default=None,
                    help="run in this directory (kept) instead of a temporary one")
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "bench-main-job.txt")
    ap.add_argument("--json", type=Path, default=ROOT / "docs" / "bench-main-job.json")
    ap.add_argument("--stages-from", type=Path, default=None,
                    help="re-print the table of a recorded run (this script's --json file)")
    args = ap.parse_args()

    def job() -> None:
        if args.stages_from:
            try:
                run = json.loads(args.stages_from.read_text())
                run["stages"], run["total_seconds"]
            except (OSError, ValueError, KeyError, TypeError) as e:
                raise TclError(f"{args.stages_from}: not a run this script recorded "
                               f"(expected its --json file): {e}") from None
            print(table(run), end="")
            return
        run = run_main_job(args.repo.resolve(), args.params, args.keep)
        text = table(run)
        print(text, end="")
        write_text(args.out, text, "main-job table")
        write_text(args.json, json.dumps(run, indent=2) + "\n", "main-job run file")

    return report_errors("main_job", job)


if __name__ == "__main__":
    sys.exit(main())
