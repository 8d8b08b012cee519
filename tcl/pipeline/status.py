"""What each device has and what is pending: one DuckDB query over the records, the registry.

Per device (every registered device and every device with records): its ok records and tasks,
the hosts that measured them, the newest measurement, its latest registered model and that
model's data snapshot, and what is pending:

- ``no model``: records but no registered model yet;
- ``N newer records``: ok records the models learn from, measured after the latest model's
  newest ``measured_at``;
- ``failed: ...``: the last add-device run measured nothing usable (``tcl.pipeline.add_device``);
- ``model ...'s file ... is missing``: the latest model's file is gone (``ModelRegistry.stale``);
- ``up to date``, or ``no records``.

Newer records that no model learns from are no model's pending work; ``not_used`` counts them
by why (``record_uses``): held out (evaluation only), or from a source outside
``train.sources`` (the train stage's and the continual run's rule, ``tcl.dataset``).
"""
from __future__ import annotations


import polars as pl

from ..config import Paths
from ..registry import ModelRegistry
from ..store.catalog import Catalog
from ..store.devices import DeviceRegistry, failures
from ..dataset import SOURCES, holdout_task_ids, record_sources
from ..zoo.extract import load_networks
from .params import Params

TRAIN = "train"   # record_uses' use of the records the models learn from
OUTSIDE = "outside train.sources"
# How not_used names a record's source (tcl.dataset.SOURCES).
SOURCE_KINDS = {"reference": "reference networks", "families": "long-tail families",
                "user": "user networks", "imported": "imported logs", "tuning": "tuning runs"}


def record_uses(paths: Paths, frame: pl.DataFrame, params: Params | None = None) -> pl.DataFrame:
    """``frame`` (a task_id and a source per record) with use, kind and name. use: ``train``
    for the records the models learn from (a source of ``train.sources``, never a held-out
    task), else why not: ``held out``, or ``outside train.sources`` (kind: the record's source
    as ``SOURCE_KINDS`` names it; name: the task's family or network, or the log's source).

    Without ``params`` every record but the held-out tasks' counts as ``train``."""
    # lazy: the networks (torch) cost ~3 s at import; `tcl status` without params needs no zoo
    from ..zoo.networks import network_kind

    held = holdout_task_ids(paths)
    wanted = None if params is None else set(params.train.sources or SOURCES)
    network_of = dict(load_networks(paths).group_by("task_id")
                      .agg(pl.col("network").sort().first()).iter_rows())
    sources = record_sources(paths, frame) if wanted is not None else [None] * len(frame)
    uses, kinds, names = [], [], []
    for task, source, mine in zip(frame["task_id"], frame["source"], sources):
        kind = name = None
        if task in held:
            use = "held out"
        elif wanted is None or wanted & set(mine):
            use = TRAIN
        else:
            use, kind = OUTSIDE, SOURCE_KINDS[mine[0]]
            name = source.split(":")[0] if mine[0] in ("imported", "tuning") or \
                task not in network_of else network_kind(network_of[task])[1]
        uses.append(use), kinds.append(kind), names.append(name)
    return frame.with_columns(pl.Series("use", uses, pl.Utf8), pl.Series("kind", kinds, pl.Utf8),
                              pl.Series("name", names, pl.Utf8))


NOT_USED = {"held out": "of held-out tasks (evaluation only)",
            OUTSIDE: "of sources outside train.sources"}


def not_used_text(frame: pl.DataFrame) -> str:
    """Records no model trains on (use, kind, name per record) counted by reason, e.g. "1,340
    of sources outside train.sources (long-tail families: swin_t 400, conformer 120, ...)"."""
    parts = []
    for use, text in NOT_USED.items():
        part = frame.filter(pl.col("use") == use)
        if part.is_empty():
            continue
        groups = []
        order = list(SOURCE_KINDS.values())     # the records come in scan order: fix the groups'
        for (kind,), rows in sorted(part.filter(pl.col("kind").is_not_null()).group_by("kind"),
                                    key=lambda g: order.index(g[0][0])):
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
        ok = cat.sql("SELECT device, task_id, source, epoch_us(measured_at) AS at_us "
                     "FROM records WHERE status = 'ok'")
    finally:
        cat.close()
    ok = record_uses(paths, ok, params)
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
        elif registry.stale(latest["path"]):
            pending = (f"model {latest['id']}'s file {paths.root / latest['path']} is missing: "
                       "the next distillation makes it again")
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
