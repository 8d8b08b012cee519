"""What each device has and what is pending: one DuckDB query over the records, the registry.

Per device (every registered device and every device with records): its ok records and tasks,
the hosts that measured them, the newest measurement, its latest registered model and that
model's data snapshot, and what is pending:

- ``no model``: records but no registered model yet;
- ``N newer records``: ok records of the tasks the models train on, measured after the latest
  model's newest ``measured_at``;
- ``failed: ...``: the last add-device run measured nothing usable (``tcl.pipeline.add_device``);
- ``up to date``, or ``no records``.

Newer records of other tasks are no model's pending work; ``not_used`` counts them by why no
model trains on them (``task_uses``): held out (evaluation only), beyond
``sample.max_train_tasks``, tasks of networks outside ``zoo.networks`` (long-tail families,
user networks) or not in the zoo at all (by record source: imported logs, tuning runs).
"""
from __future__ import annotations


import polars as pl

from ..config import Paths
from ..registry import ModelRegistry
from ..store.catalog import Catalog
from ..store.devices import DeviceRegistry, failures
from ..train import holdout_task_ids
from ..zoo.extract import load_networks
from .params import Params
from .tasks import instances, training_tasks

TRAIN = "train"   # task_uses' use of the tasks the models train on


def task_uses(paths: Paths, params: Params | None = None) -> pl.DataFrame:
    """task_id, use, kind, name of every zoo task. use: ``train`` for the tasks the models
    train on, else why not: ``held out``, ``beyond max_train_tasks`` or ``outside zoo.networks``
    (kind: long-tail families, networks or user networks; name: the family or network).

    Without ``params`` every task of the zoo but the held-out ones counts as ``train``."""
    # lazy: the networks (torch) cost ~3 s at import; `tcl status` without params needs no zoo
    from ..zoo.networks import NETWORKS

    nets = load_networks(paths)
    held = holdout_task_ids(paths)
    train: set[str] | None = None
    wanted: set[str] = set()
    if params is not None:
        keys = [i.key for i in instances(params)]
        wanted = set(nets.filter(pl.col("network_key").is_in(keys))["task_id"].to_list())
        train = set(training_tasks(params)) if wanted else set()
    rows = []
    for task_id, networks in nets.group_by("task_id").agg(pl.col("network").unique().sort()) \
            .iter_rows():
        kind = name = None
        if task_id in held:
            use = "held out"
        elif train is None or task_id in train:
            use = TRAIN
        elif task_id in wanted:
            use = "beyond max_train_tasks"
        else:
            use, n = "outside zoo.networks", networks[0]
            spec = NETWORKS.get(n)
            kind = "user networks" if spec is None else \
                "long-tail families" if spec.long_tail else "networks"
            name = n if spec is None else spec.family_name
        rows.append({"task_id": task_id, "use": use, "kind": kind, "name": name})
    return pl.DataFrame(rows, schema={"task_id": pl.Utf8, "use": pl.Utf8, "kind": pl.Utf8,
                                      "name": pl.Utf8})


NOT_USED = {"held out": "of held-out tasks (evaluation only)",
            "beyond max_train_tasks": "of training networks' tasks beyond sample.max_train_tasks",
            "outside zoo.networks": "of tasks outside zoo.networks",
            "not in the zoo": "of tasks not in the zoo"}


def not_used_text(frame: pl.DataFrame) -> str:
    """Records no model trains on (use, kind, name per record) counted by reason, e.g. "1,340
    of tasks outside zoo.networks (long-tail families: swin_t 400, conformer 120, ...)"."""
    parts = []
    for use, text in NOT_USED.items():
        part = frame.filter(pl.col("use") == use)
        if part.is_empty():
            continue
        groups = []
        for (kind,), rows in part.filter(pl.col("kind").is_not_null()) \
                .group_by("kind", maintain_order=True):
            counts = rows.group_by("name").len().sort(["len", "name"], descending=[True, False])
            named = [f"{k} {n:,}" for k, n in counts.iter_rows()]
            groups.append(f"{kind}: {', '.join(named[:6])}{', ...' if len(named) > 6 else ''}")
        parts.append(f"{len(part):,} {text}" + (f" ({'; '.join(groups)})" if groups else ""))
    return "; ".join(parts)


def device_status(paths: Paths, params: Params | None = None) -> pl.DataFrame:
    """One row per device; see the module docstring. ``params`` (the params file of this data
    root) says which tasks the models train on; without it, every task of the zoo but the
    held-out ones."""
    cat = Catalog(paths, in_memory=True)
    try:
        # which host measured what: each host_cpu (tcl.store.devices.host_identity) with its records
        recs = cat.sql("""
            WITH per_host AS (
              SELECT device, string_agg(host_cpu || ': ' || n, '; ' ORDER BY host_cpu) AS hosts
              FROM (SELECT device, host_cpu, count(*) AS n FROM records GROUP BY ALL)
              GROUP BY device)
            SELECT device, count(*) FILTER (WHERE status = 'ok') AS ok_records,
                   count(*) AS records, count(DISTINCT task_id) AS tasks,
                   any_value(h.hosts) AS hosts, max(measured_at) AS newest
            FROM records JOIN per_host h USING (device) GROUP BY device ORDER BY device""")
        ok = cat.sql("SELECT device, task_id, split_part(source, ':', 1) AS source, "
                     "epoch_us(measured_at) AS at_us FROM records WHERE status = 'ok'")
    finally:
        cat.close()
    ok = ok.join(task_uses(paths, params), on="task_id", how="left")
    # A task outside the zoo (imported logs, tuning runs): no pipeline model trains on it when
    # the params are known; without them, counted as before (a model may have).
    ok = ok.with_columns(
        pl.when(pl.col("use").is_not_null()).then(pl.col("use"))
        .otherwise(pl.lit(TRAIN if params is None else "not in the zoo")).alias("use"),
        pl.when(pl.col("use").is_not_null()).then(pl.col("kind"))
        .otherwise(pl.lit("sources")).alias("kind"),
        pl.when(pl.col("use").is_not_null()).then(pl.col("name"))
        .otherwise(pl.col("source")).alias("name"))
    registry = ModelRegistry(paths)
    models = registry.frame()
    failed = failures(paths)
    names = sorted(set(DeviceRegistry(paths)._user_devices()) | set(recs["device"].to_list())
                   | set(failed))
    by_device = {r["device"]: r for r in recs.iter_rows(named=True)}
    rows = []
    for name in names:
        r = by_device.get(name, {})
        latest = None
        if not models.is_empty():
            mine = models.filter(pl.col("device") == name)
            latest = mine.row(-1, named=True) if not mine.is_empty() else None
        since = _newer(ok, name, latest["newest_measured_at"] if latest else None)
        newer = int((since["use"] == TRAIN).sum())
        if name in failed:
            pending = f"failed: {failed[name]['reason']}"
        elif not r:
            pending = "no records"
        elif latest is None:
            pending = "no model"
        elif newer:
            pending = f"{newer:,} newer records"
        else:
            pending = "up to date"
        unused = since.filter(pl.col("use") != TRAIN)
        rows.append({"device": name, "ok_records": r.get("ok_records", 0),
                     "tasks": r.get("tasks", 0), "hosts": r.get("hosts") or "",
                     "newest_record": r.get("newest"),
                     "model": latest["id"] if latest else None,
                     "method": latest["method"] if latest else None,
                     "model_data_until": latest["newest_measured_at"] if latest else None,
                     "pending": pending,
                     "not_used": not_used_text(unused)})
    return pl.DataFrame(rows, schema={
        "device": pl.Utf8, "ok_records": pl.Int64, "tasks": pl.Int64, "hosts": pl.Utf8,
        "newest_record": pl.Datetime("us", "UTC"), "model": pl.Utf8, "method": pl.Utf8,
        "model_data_until": pl.Datetime("us", "UTC"), "pending": pl.Utf8, "not_used": pl.Utf8})


def _newer(ok: pl.DataFrame, device: str, since) -> pl.DataFrame:
    """``device``'s ok records (with their tasks' use) measured after ``since`` (None: all)."""
    mine = ok.filter(pl.col("device") == device)
    if since is None:
        return mine
    cut = round(since.timestamp() * 1_000_000)   # zone names differ ('UTC', 'Etc/UTC')
    return mine.filter(pl.col("at_us") > cut)
