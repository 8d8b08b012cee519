"""What each device has and what is pending: one DuckDB query over the records, the registry.

Per device (every registered device and every device with records): its ok records and tasks,
the hosts that measured them, the newest measurement, its latest registered model and that
model's data snapshot, and what is pending:

- ``no model``: records but no registered model yet;
- ``N newer records``: records measured after the latest model's newest ``measured_at``;
- ``failed: ...``: the last add-device run measured nothing usable (``tcl.add_device``);
- ``up to date``, or ``no records``.
"""
from __future__ import annotations

import json

import polars as pl

from .config import Paths, TclError
from .registry import ModelRegistry


def failures_file(paths: Paths):
    return paths.root / "device-failures.json"


def failures(paths: Paths) -> dict[str, dict]:
    f = failures_file(paths)
    if not f.exists():
        return {}
    try:
        return json.loads(f.read_text())
    except ValueError as e:
        raise TclError(f"{f} is not valid JSON ({e}); move it away") from None


def mark_failed(paths: Paths, device: str, reason: str) -> None:
    from .store.locks import locked
    from .store.records import now_utc

    with locked(paths, "devices", what="the device registry"):
        data = failures(paths)
        data[device] = {"reason": reason, "at": now_utc().isoformat()}
        failures_file(paths).write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")


def clear_failed(paths: Paths, device: str) -> None:
    from .store.locks import locked

    with locked(paths, "devices", what="the device registry"):
        data = failures(paths)
        if data.pop(device, None) is not None:
            failures_file(paths).write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")


def device_status(paths: Paths) -> pl.DataFrame:
    """One row per device; see the module docstring."""
    from .device import DeviceRegistry
    from .store.catalog import Catalog

    cat = Catalog(paths, in_memory=True)
    try:
        # which host measured what: each host_cpu (tcl.device.host_identity) with its records
        recs = cat.sql("""
            WITH per_host AS (
              SELECT device, string_agg(host_cpu || ': ' || n, '; ' ORDER BY host_cpu) AS hosts
              FROM (SELECT device, host_cpu, count(*) AS n FROM records GROUP BY ALL)
              GROUP BY device)
            SELECT device, count(*) FILTER (WHERE status = 'ok') AS ok_records,
                   count(*) AS records, count(DISTINCT task_id) AS tasks,
                   any_value(h.hosts) AS hosts, max(measured_at) AS newest
            FROM records JOIN per_host h USING (device) GROUP BY device ORDER BY device""")
    finally:
        cat.close()
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
        newer = 0
        if latest is not None and r:
            newer = _newer(paths, name, latest["newest_measured_at"])
        if name in failed:
            pending = f"failed: {failed[name]['reason']}"
        elif not r:
            pending = "no records"
        elif latest is None:
            pending = "no model"
        elif newer:
            pending = f"{newer} newer records"
        else:
            pending = "up to date"
        rows.append({"device": name, "ok_records": r.get("ok_records", 0),
                     "tasks": r.get("tasks", 0), "hosts": r.get("hosts") or "",
                     "newest_record": r.get("newest"),
                     "model": latest["id"] if latest else None,
                     "method": latest["method"] if latest else None,
                     "model_data_until": latest["newest_measured_at"] if latest else None,
                     "pending": pending})
    return pl.DataFrame(rows, schema={
        "device": pl.Utf8, "ok_records": pl.Int64, "tasks": pl.Int64, "hosts": pl.Utf8,
        "newest_record": pl.Datetime("us", "UTC"), "model": pl.Utf8, "method": pl.Utf8,
        "model_data_until": pl.Datetime("us", "UTC"), "pending": pl.Utf8})


def _newer(paths: Paths, device: str, since) -> int:
    """Ok records of ``device``'s training tasks measured after ``since`` (None: all of them).
    Held-out tasks' records are evaluation data: no model trains on them."""
    from .store.catalog import query
    from .train import holdout_task_ids

    frame = query(paths, f"SELECT task_id, measured_at FROM records WHERE device = "
                         f"'{device.replace(chr(39), '')}' AND status = 'ok'")
    if paths.networks_file.exists():
        frame = frame.filter(~pl.col("task_id").is_in(list(holdout_task_ids(paths))))
    if since is None:
        return len(frame)
    cut = round(since.timestamp() * 1_000_000)   # zone names differ ('UTC', 'Etc/UTC')
    return int((frame["measured_at"].dt.epoch("us") > cut).sum())
