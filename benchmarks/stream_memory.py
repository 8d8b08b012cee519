"""Peak memory of streaming training: write N synthetic program rows to Parquet (zstd, in chunks),
then train one epoch of the default Mamba model on ``ParquetStream`` batches of them in a fresh
process and report its peak RSS next to the data's size. The reader passes over every row; to keep
the run short only every ``--train-every``-th batch is a training step.

    .venv/bin/python benchmarks/stream_memory.py [--rows 1000000 10000000] [--tmp DIR]
"""
from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")   # shared cores: sleep, don't spin

import argparse  # noqa: E402
import dataclasses  # noqa: E402
import json  # noqa: E402
import resource  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024   # Linux: KiB


def write(path: str, rows: int, chunk: int) -> dict:
    """Rows in chunks: one synthetic pool re-labelled as new tasks each time (cheap to make)."""
    from tcl.models.nn import synthetic_programs, take
    from tcl.models.stream import write_parquet

    per_group = 64
    pool = synthetic_programs(n_groups=chunk // per_group, per_group=per_group, seed=0)
    groups = chunk // per_group
    n_chunks = -(-rows // chunk)
    logical = (pool.per_store.nbytes + pool.tokens.nbytes + 16 * len(pool)) * rows / len(pool)

    def chunks():
        for i in range(n_chunks):
            part = dataclasses.replace(pool, group=pool.group + i * groups)
            left = rows - i * chunk
            yield part if left >= chunk else take(part, np.arange(left))
    t = time.perf_counter()
    written = write_parquet(path, chunks(), row_group_size=8192)
    return {"rows": written, "logical_mb": logical / 2**20,
            "file_mb": os.path.getsize(path) / 2**20, "write_s": time.perf_counter() - t}


class Subsample:
    """Passes every batch of the stream through the reader, yields every ``every``-th."""

    def __init__(self, stream, every: int) -> None:
        self.stream, self.every = stream, every
        self.rows = self.batches = self.steps = 0

    def __iter__(self):
        for i, ps in enumerate(self.stream):
            self.rows += len(ps)
            self.batches += 1
            if i % self.every == 0:
                self.steps += 1
                yield ps


def train(path: str, every: int, threads: int) -> dict:
    import torch

    from tcl.models.mamba import MambaModel
    from tcl.models.stream import ParquetStream

    torch.set_num_threads(threads)
    base = rss_mb()
    batches = Subsample(ParquetStream(path, batch_size=512), every)
    t = time.perf_counter()
    MambaModel(device="cpu").fit_stream(batches, epochs=1)
    return {"rows_read": batches.rows, "batches": batches.batches, "steps": batches.steps,
            "train_s": time.perf_counter() - t, "rss_import_mb": base, "peak_rss_mb": rss_mb()}


def child(*args: str) -> dict:
    out = subprocess.run([sys.executable, __file__, *args], check=True, capture_output=True,
                         text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, nargs="+", default=[1_000_000, 10_000_000])
    ap.add_argument("--chunk", type=int, default=16384, help="rows generated per write")
    ap.add_argument("--train-every", type=int, default=40)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--tmp", default=None, help="directory for the Parquet files")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("_mode", nargs="*", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args._mode:   # child process: write PATH ROWS | train PATH
        mode, path = args._mode[0], args._mode[1]
        result = write(path, int(args._mode[2]), args.chunk) if mode == "write" else \
            train(path, args.train_every, args.threads)
        print(json.dumps(result))
        return
    tmp = Path(tempfile.mkdtemp(prefix="tcl-stream-", dir=args.tmp))
    print(f"Parquet files in {tmp}; threads {args.threads}; training step on every "
          f"{args.train_every}th batch of 512 programs; OMP_WAIT_POLICY "
          f"{os.environ['OMP_WAIT_POLICY']}; load average {os.getloadavg()[0]:.1f}\n")
    head = (f"{'rows':>11} {'parquet MB':>11} {'in-memory MB':>13} {'write s':>8} "
            f"{'read+train s':>13} {'rows/s':>8} {'steps':>6} {'RSS import MB':>14} "
            f"{'peak RSS MB':>12} {'RSS/parquet':>12}")
    lines = [head, "-" * len(head)]
    try:
        for rows in args.rows:
            path = str(tmp / f"rows-{rows}.parquet")
            w = child("--chunk", str(args.chunk), "write", path, str(rows))
            t = child("--train-every", str(args.train_every), "--threads", str(args.threads),
                      "train", path)
            assert t["rows_read"] == rows, t
            lines.append(f"{rows:11,d} {w['file_mb']:11,.0f} {w['logical_mb']:13,.0f} "
                         f"{w['write_s']:8.0f} {t['train_s']:13.0f} {rows / t['train_s']:8,.0f} "
                         f"{t['steps']:6d} {t['rss_import_mb']:14,.0f} {t['peak_rss_mb']:12,.0f} "
                         f"{t['peak_rss_mb'] / w['file_mb']:12.3f}")
            print(lines[-1] if len(lines) > 3 else "\n".join(lines), flush=True)
            if not args.keep:
                os.remove(path)
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    print("\nin-memory MB: the rows as float32 arrays (what loading them whole would take).")


if __name__ == "__main__":
    main()
