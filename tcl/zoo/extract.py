"""Tuning tasks of the zoo: torch.export -> Relax -> MetaSchedule task extraction, deduplicated.

A task's id is the structural hash of its IRModule, so the same operator at the same shapes is
one task however many networks run it; ``networks.parquet`` keeps each network's weight for it.
"""
from __future__ import annotations

import re
import time
import warnings
from typing import TYPE_CHECKING

import polars as pl

from ..config import Paths, TclError
from ..store.locks import locked
from ..store.records import read_parquet, task_id_of, write_parquet_atomic
from ..store.schemas import IMPORTED_TASKS_FIX, NETWORK_SCHEMA, TASK_SCHEMA, ZOO_FIX
from ..tvm_compat import meta_schedule

if TYPE_CHECKING:   # the networks import torch: see build_zoo
    from .networks import NetworkInstance

TARGET = {"kind": "llvm", "num-cores": 2}
_REDUCE = 2  # tvm.tirx.IterVar.CommReduce (a constant here, so the module imports without TVM)

OP_CLASSES = ("conv", "depthwise_conv", "dense", "batch_matmul", "pool", "reduction", "softmax",
              "norm", "injective", "other")


def task_module(workload_json: str):
    """The task's IRModule back from its ``workload_json``."""
    import tvm

    return tvm.ir.load_json(workload_json)


def relax_module(inst: NetworkInstance, model=None, example: tuple | None = None):
    """The network as a legalized and fused Relax module (what task extraction needs); of
    ``model`` on ``example`` inputs where given (tuning checks against the very same weights)."""
    from tvm import relax

    # Without legalization and fusion MetaSchedule finds no TIR functions to tune.
    return relax.get_pipeline("zero")(exported_module(inst, model, example))


def exported_module(inst: NetworkInstance, model=None, example: tuple | None = None):
    """The network as Relax imports it from torch.export (high-level operators, the weights
    bound as constants), before legalization: what a layout conversion works on."""
    import torch
    from tvm.relax.frontend.torch import from_exported_program

    model = model if model is not None else inst.module()
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # torch's pytree deprecation noise
        exported = torch.export.export(model, example if example is not None else inst.example())
        return from_exported_program(exported)


def extract_tasks(instance: NetworkInstance) -> list[dict]:
    """One row per distinct task of ``instance``: task_id, task_name, op_class, workload_json,
    flop, weight (how many times one inference runs it)."""
    import tvm

    ms = meta_schedule()
    try:
        mod = relax_module(instance)
    except Exception as e:  # conversion errors come from torch or TVM with long traces
        raise TclError(f"network {instance.key} did not convert to Relax: {_conversion_error(e)}") from e
    extracted = ms.relax_integration.extract_tasks(mod, tvm.target.Target(TARGET))
    rows: dict[str, dict] = {}
    for t in extracted:
        task = t.dispatched[0]
        tid = task_id_of(task)
        if tid in rows:  # structurally equal functions under two names: one task
            rows[tid]["weight"] += int(t.weight)
            continue
        rows[tid] = {**task_row(task, t.task_name), "weight": int(t.weight)}
    return list(rows.values())


def _conversion_error(e: Exception) -> str:
    """The first line of a torch.export / Relax frontend error, naming unsupported operators."""
    text = str(e).strip()
    found = re.search(r"Unsupported function types? \[(.*?)\]", text)
    if found:
        ops = found.group(1).replace("'", "")
        return (f"the Relax frontend has no converter for operator(s) {ops} (rewrite them with "
                "supported operators, or leave that part out of the model)")
    return f"{type(e).__name__}: {text.splitlines()[0] if text else ''}"


def task_row(task, task_name: str | None = None) -> dict:
    """task_id, task_name, op_class, workload_json and flop of one task's IRModule: the zoo's
    tasks and imported workloads alike. Without ``task_name`` the function's
    ``global_symbol`` names it (``imported_<id>`` when that is only "main")."""
    import tvm
    from tvm.s_tir.analysis import estimate_tir_flops

    tid = task_id_of(task)
    if task_name is None:
        symbols = [str(f.attrs["global_symbol"]) for f in task.functions.values()
                   if f.attrs is not None and "global_symbol" in f.attrs]
        task_name = next((s for s in symbols if s != "main"), f"imported_{tid[:8]}")
    try:
        flop = float(estimate_tir_flops(task))
    except Exception:  # some index expressions are not analysable; the count is optional
        flop = 0.0
    return {"task_id": tid, "task_name": task_name, "op_class": op_class(task, task_name),
            "workload_json": tvm.ir.save_json(task), "flop": flop}


# ---------------------------------------------------------------------------------------------
# Operator classes


def _ops(task_name: str) -> list[str]:
    """Relax operator names in a fused function's name: ``fused_conv2d3_add1_relu`` ->
    ``["conv2d", "add", "relu"]`` (TVM appends numbers to make names unique)."""
    name = task_name[len("fused_"):] if task_name.startswith("fused_") else task_name
    return [re.sub(r"\d+$", "", p) for p in name.split("_") if p]


def op_class(mod, task_name: str) -> str:
    """The class of the task's main computation, from its anchor block (the largest reduction)
    and the Relax operator names in ``task_name``."""
    from tvm.s_tir.analysis import find_anchor_sblock

    ops = set(_ops(task_name))
    try:
        anchor = find_anchor_sblock(mod)
    except Exception:  # ambiguous anchors (several equal reductions)
        anchor = None
    block = anchor.name_hint if anchor is not None else ""
    if "conv" in block:
        reduce = [iv for iv in anchor.iter_vars if iv.iter_type == _REDUCE]
        # A depthwise convolution reduces over one input channel per output channel.
        return "depthwise_conv" if reduce and int(reduce[0].dom.extent) == 1 else "conv"
    if "matmul" in block or "dense" in block:
        batched = sum(len(r.source.shape) >= 3 for r in anchor.reads) >= 2
        return "batch_matmul" if batched else "dense"
    if "softmax" in block or "softmax" in ops:
        return "softmax"
    if ops & {"layer", "batch", "group", "rms", "instance"} and "norm" in ops:
        return "norm"
    if "pool" in block or any("pool" in o for o in ops):
        return "pool"
    if anchor is not None:
        return "pool" if "mean" in ops and _global_pool(anchor) else "reduction"
    if ops & {"sort", "argsort", "topk", "cumsum", "where", "nonzero", "unique"}:
        return "other"
    return "injective"


def _global_pool(anchor) -> bool:
    """A mean over the two trailing axes of an NCHW tensor: global average pooling."""
    kinds = [iv.iter_type for iv in anchor.iter_vars]
    return len(kinds) == 6 and kinds[-2:] == [_REDUCE, _REDUCE] and all(
        int(iv.dom.extent) == 1 for iv in anchor.iter_vars[2:4])


# ---------------------------------------------------------------------------------------------
# The zoo tables


def load_tasks(paths: Paths) -> pl.DataFrame:
    """``zoo/tasks.parquet`` (empty with the right schema when the zoo was not built yet)."""
    f = paths.tasks_file
    if not f.exists():
        return pl.DataFrame(schema=TASK_SCHEMA)
    return read_parquet(f, "zoo tasks file", ZOO_FIX, schema=TASK_SCHEMA)


def load_imported_tasks(paths: Paths) -> pl.DataFrame:
    """``zoo/imported_tasks.parquet``: the workloads of imported databases that the zoo lacks
    (``tcl import``), in the zoo tasks' schema (empty when there are none)."""
    f = paths.imported_tasks_file
    if not f.exists():
        return pl.DataFrame(schema=TASK_SCHEMA)
    return read_parquet(f, "imported tasks file", IMPORTED_TASKS_FIX, schema=TASK_SCHEMA)


def load_networks(paths: Paths) -> pl.DataFrame:
    """``zoo/networks.parquet`` (empty with the right schema when the zoo was not built yet)."""
    f = paths.networks_file
    if not f.exists():
        return pl.DataFrame(schema=NETWORK_SCHEMA)
    return read_parquet(f, "zoo networks file", ZOO_FIX, schema=NETWORK_SCHEMA)


def build_zoo(paths: Paths, networks: list[str] | None = None,
              instances: list[NetworkInstance] | None = None) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Extract the tasks of every instance not yet in ``networks.parquet`` and add them.

    Both tables are rewritten atomically after each instance (tasks first, so every task_id in
    networks.parquet is in tasks.parquet), so an interrupted build keeps what it finished.
    Returns (tasks, networks), the whole tables.
    """
    # lazy: the networks import torch (~2 s); reading the zoo's tables needs none of it
    from .networks import zoo_instances

    todo = instances if instances is not None else zoo_instances(networks)
    tasks, nets = load_tasks(paths), load_networks(paths)
    done = set(nets["network_key"].unique().to_list())
    if all(i.key in done for i in todo):
        print(f"zoo: all instances already extracted ({len(tasks)} tasks)", flush=True)
        return tasks, nets
    # Concurrent builds on one data root take turns, so neither overwrites the other's tables.
    with locked(paths, "zoo", timeout=3600, what="the zoo"):
        return _extend_zoo(paths, todo)


def _extend_zoo(paths: Paths, todo: list[NetworkInstance]) -> tuple[pl.DataFrame, pl.DataFrame]:
    tasks, nets = load_tasks(paths), load_networks(paths)  # again, under the lock
    done = set(nets["network_key"].unique().to_list())
    todo = [i for i in todo if i.key not in done]
    for n, inst in enumerate(todo, 1):
        start = time.perf_counter()
        rows = extract_tasks(inst)
        known = set(tasks["task_id"].to_list())
        new = [{k: r[k] for k in TASK_SCHEMA} for r in rows if r["task_id"] not in known]
        tasks = pl.concat([tasks, pl.DataFrame(new, schema=TASK_SCHEMA)])
        nets = pl.concat([nets, pl.DataFrame(
            [{"network": inst.network, "batch": inst.batch, "input_shape": inst.input_shape,
              "network_key": inst.key, "task_id": r["task_id"], "weight": r["weight"],
              "holdout": inst.holdout} for r in rows], schema=NETWORK_SCHEMA)])
        write_parquet_atomic(tasks, paths.tasks_file, "zoo tasks file")
        write_parquet_atomic(nets, paths.networks_file, "zoo networks file")
        print(f"zoo [{n}/{len(todo)}] {inst.key}: {len(rows)} tasks ({len(new)} new), "
              f"{time.perf_counter() - start:.1f}s; {len(tasks)} unique tasks", flush=True)
    return tasks, nets


def class_quotas(counts: dict[str, int], limit: int) -> dict[str, int]:
    """How many of ``limit`` tasks each operator class gets: one per class first (in the order
    of ``counts``: the class of the heaviest task first), the rest in proportion to the square
    root of the class size, never more than the class has. Proportional shares would leave the
    few but heavy dense and batch-matmul tasks of transformers almost unsampled; equal shares
    would spend most picks on tiny classes.
    """
    quota = {c: 0 for c in counts}
    left = min(limit, sum(counts.values()))
    for c in list(counts)[:left]:
        quota[c] = 1
    left -= sum(quota.values())
    while left > 0:
        room = [c for c in counts if quota[c] < counts[c]]
        total = sum(counts[c] ** 0.5 for c in room)
        share = {c: left * counts[c] ** 0.5 / total for c in room}
        add = {c: min(int(share[c]), counts[c] - quota[c]) for c in room}
        if not any(add.values()):  # remainders: one to the class with the largest share
            add = {max(room, key=lambda c: (share[c], c)): 1}
        for c, n in add.items():
            quota[c] += n
            left -= n
    return quota


def select_tasks(paths: Paths, network_keys: list[str], max_train: int | None = None,
                 max_holdout: int | None = None) -> pl.DataFrame:
    """task_id, task_name, op_class, workload_json, weight, holdout of the networks' tasks,
    heaviest first, at most ``max_train`` / ``max_holdout`` of each split (None: all).

    A capped split is stratified by operator class (``class_quotas``), heaviest first within a
    class: the heaviest tasks alone are nearly all transformer dense/injective tasks, and a
    model trained on them has seen almost no convolution.

    Held-out tasks are those of any held-out network (even when a training network shares
    them), so no held-out task is ever trained on.
    """
    import duckdb

    limits = {True: max_holdout, False: max_train}
    # The two zoo tables alone: a catalog would also open every record file (seconds on the
    # committed dataset, and every dry run selects tasks).
    tasks = pl.concat([load_tasks(paths), load_imported_tasks(paths)], how="diagonal_relaxed")
    con = duckdb.connect(":memory:")
    try:
        con.register("wanted", pl.DataFrame({"network_key": network_keys},
                                            schema={"network_key": pl.Utf8}))
        con.register("networks", load_networks(paths))
        con.register("tasks", tasks)
        frame = con.sql("""
            WITH held AS (SELECT DISTINCT task_id FROM networks WHERE holdout),
            sel AS (
              SELECT task_id, sum(weight) AS weight, task_id IN (SELECT task_id FROM held) AS holdout
              FROM networks WHERE network_key IN (SELECT network_key FROM wanted)
              GROUP BY task_id)
            SELECT t.task_id, t.task_name, t.op_class, t.workload_json, s.weight, s.holdout,
                   row_number() OVER (PARTITION BY s.holdout, t.op_class
                                      ORDER BY s.weight DESC, s.task_id) AS rank
            FROM sel s JOIN (SELECT DISTINCT ON (task_id) * FROM tasks) t USING (task_id)
            ORDER BY s.holdout DESC, s.weight DESC, t.task_id""").pl()
    finally:
        con.close()
    keep = pl.lit(False)
    for holdout, limit in limits.items():
        cond = pl.col("holdout") == holdout
        if limit is not None:
            counts = dict(frame.filter(cond).group_by("op_class", maintain_order=True)
                          .len().iter_rows())
            quota = pl.col("op_class").replace_strict(class_quotas(counts, limit), default=0)
            cond = cond & (pl.col("rank") <= quota)
        keep = keep | cond
    frame = frame.filter(keep).drop("rank")
    if frame.is_empty():
        raise TclError(f"no tasks of the selected networks in {paths.zoo_dir}: extract the zoo "
                       "first (`tcl zoo` or the zoo stage)")
    return frame
