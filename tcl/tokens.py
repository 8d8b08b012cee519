"""What a cost model reads of a program, computed from its trace alone (``tcl.features``
computes and caches it; the models and ``ProgramSet`` read it):

- per-store features: MetaSchedule's ``PerStoreFeature``, ``PER_STORE_WIDTH`` values per buffer
  store;
- trace tokens: one token per schedule instruction that changes the program: a vocabulary id
  for its kind (annotations by key) and up to ``TOKEN_VALUES`` numbers (its sampled decision or
  numeric arguments), each as sign(x) * log2(1 + |x|).

Plain Python and numpy, so the model registry imports it without the store or TVM.
"""
from __future__ import annotations

import json
import math
from typing import Any

import numpy as np

PER_STORE_WIDTH = 164   # MetaSchedule's PerStoreFeature: values per buffer store
TOKEN_VALUES = 7
TOKEN_WIDTH = 1 + TOKEN_VALUES

# Instructions that only look things up (no effect on the program) are not tokens.
LOOKUPS = {"GetSBlock", "GetLoops", "GetChildBlocks", "GetProducers", "GetConsumers",
           "GetOutputBlocks", "EnterPostproc"}
# Fixed vocabulary so a saved model reads any later trace the same way. 0 = padding, 1 = unknown.
VOCAB = ["<pad>", "<unk>",
         "SamplePerfectTile", "SamplePartitionedTile", "SampleCategorical", "SampleComputeLocation",
         "Split", "LoopPartition", "Fuse", "Merge", "Reorder", "ReorderBlockIterVar", "Parallel",
         "Vectorize", "Unroll", "Bind", "AddUnitLoop",
         "CacheRead", "CacheWrite", "CacheInplace", "ReIndex", "ReadAt", "WriteAt",
         "ComputeAt", "ReverseComputeAt", "ComputeInline", "ReverseComputeInline",
         "DecomposeReduction", "DecomposePadding", "RFactor", "StorageAlign", "SetScope",
         "TransformLayout", "TransformBlockLayout", "SetAxisSeparator", "PadEinsum",
         "Blockize", "Tensorize", "RollingBuffer",
         "Annotate:meta_schedule.tiling_structure", "Annotate:meta_schedule.parallel",
         "Annotate:meta_schedule.vectorize", "Annotate:meta_schedule.unroll_explicit",
         "Annotate:meta_schedule.unroll_implicit", "Annotate:pragma_auto_unroll_max_step",
         "Annotate:pragma_unroll_explicit", "Annotate:meta_schedule.cooperative_fetch",
         "Annotate:meta_schedule.auto_tensorize", "Annotate:meta_schedule.thread_extent_low_inclusive",
         "Annotate:meta_schedule.thread_extent_high_inclusive", "Annotate:<other>",
         "Unannotate:meta_schedule.parallel", "Unannotate:meta_schedule.vectorize",
         "Unannotate:meta_schedule.unroll_explicit", "Unannotate:meta_schedule.unroll_implicit",
         "Unannotate:<other>"]
VOCAB_INDEX = {k: i for i, k in enumerate(VOCAB)}


def _slog(x: float) -> float:
    return math.copysign(math.log2(1.0 + abs(x)), x)


def _numbers(obj: Any) -> list[float]:
    """Numeric leaves of a JSON value, in order (bools count as 0/1; strings are skipped)."""
    if isinstance(obj, bool):
        return [float(obj)]
    if isinstance(obj, (int, float)):
        return [float(obj)]
    if isinstance(obj, list):
        return [v for item in obj for v in _numbers(item)]
    return []


def _kind(name: str, attrs: list) -> str:
    if name in ("Annotate", "Unannotate"):
        key = f"{name}:{attrs[0] if attrs else ''}"
        return key if key in VOCAB_INDEX else f"{name}:<other>"
    return name


def trace_tokens(trace_json: str | list) -> np.ndarray:
    """(n_tokens, TOKEN_WIDTH) float32 tokens of a trace in its plain-JSON form."""
    insts, decisions = json.loads(trace_json) if isinstance(trace_json, str) else trace_json
    decided = {int(i): d for i, d in decisions}
    rows = []
    for index, (name, inputs, attrs, _outputs) in enumerate(insts):
        if name in LOOKUPS:
            continue
        kind = _kind(name, attrs)
        if index in decided:
            decision = decided[index]
            if name == "SampleCategorical":  # the decision indexes the candidate values
                decision = attrs[0][int(decision)]
            values = _numbers(decision)
        else:
            values = _numbers(inputs) + _numbers(attrs if name not in ("Annotate",) else attrs[1:])
        values = [_slog(v) for v in values[:TOKEN_VALUES]]
        rows.append([float(VOCAB_INDEX.get(kind, 1))] + values + [0.0] * (TOKEN_VALUES - len(values)))
    if not rows:
        return np.zeros((0, TOKEN_WIDTH), np.float32)
    return np.asarray(rows, np.float32)
