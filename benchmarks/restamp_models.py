"""Re-key the committed models after a change that moved fitting code without changing what it
computes (a maintainer's tool, not a benchmark): without it every fresh clone retrains all of
them, because ``tcl.train.fit_key`` hashes the fitting code's source.

It refuses unless the change is only the code's: with the code digest of ``--old`` (a git
revision: its tcl/ is read from git, not checked out), every committed model's key must be the
one its training facts hold. Only then are the keys of today's code written into those facts.
The records, knobs, seeds and features version must match exactly, so a model fitted on other
records is never re-keyed.

    python benchmarks/restamp_models.py --params params.yaml --old b26b2e54
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from _common import report_errors


def _old_digest(revision: str) -> str:
    """``_code_digest()`` of ``revision``'s tcl/, computed in a process that imports it."""
    with tempfile.TemporaryDirectory() as tmp:
        archive = subprocess.run(["git", "archive", revision, "tcl"], check=True,
                                 capture_output=True, cwd=Path(__file__).parents[1]).stdout
        subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
        return subprocess.run([sys.executable, "-c", "from tcl.train import _code_digest; "
                               "print(_code_digest())"], cwd=tmp, check=True,
                              capture_output=True, text=True).stdout.strip()


def keys(params, digest: str | None = None) -> dict[tuple[str, str], list[str]]:
    """Each (device, kind)'s fit keys as the train stage computes them (``train_many``), with
    the code digest ``digest`` (None: today's)."""
    import tcl.train as train

    saved, asked = train._code_digest, {}
    if digest is not None:
        train._code_digest = lambda: digest

    def record(paths, device, kind, ks):
        asked[(device, kind)] = list(ks)
        return True   # nothing fits: only the keys are wanted

    saved_current, train._current = train._current, record
    try:
        train.train_many(params.paths, [(d, k, params.train.hyper_of(k)) for k in
                                        params.train.models for d in params.devices],
                         seeds=params.train.seed_list,
                         valid_fraction=params.train.valid_fraction,
                         sources=params.train.sources, say=lambda _: None)
    finally:
        train._code_digest, train._current = saved, saved_current
    return asked


def run(args) -> None:
    from tcl.config import TclError, write_text
    from tcl.pipeline.params import load_params

    params = load_params(args.params)
    paths = params.paths
    old, new = keys(params, _old_digest(args.old)), keys(params)
    stale = []
    for (device, kind), ks in old.items():
        for i, key in enumerate(ks):
            facts = json.loads(paths.train_info_file(device, kind, i).read_text())
            if facts.get("inputs") != key:
                stale.append(f"{device} {kind} s{i}")
    if stale:
        raise TclError(f"{len(stale)} model(s) were not the fits of {args.old}'s code on these "
                       f"records ({', '.join(stale[:5])}...): retrain them, do not re-key them")
    for (device, kind), ks in new.items():
        for i, key in enumerate(ks):
            f = paths.train_info_file(device, kind, i)
            facts = json.loads(f.read_text())
            facts["inputs"] = key
            write_text(f, json.dumps(facts, indent=2) + "\n", "training facts file")
    print(f"re-keyed {sum(map(len, new.values()))} models: {args.old}'s fitting code gave each "
          "its stored key, today's code gives the new one")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--params", default="params.yaml")
    parser.add_argument("--old", required=True, help="the git revision the models were fitted at")
    return report_errors("restamp_models", lambda: run(parser.parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
