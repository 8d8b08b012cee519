"""What a budget buys: the expected network latency at a number of trials per task, from the
budget curves measured so far (``benchmarks/budget_curve.py --publish``), for ``tcl tune
--dry-run``.

The curves live in the data root (``CURVES_FILE``, one JSON line per device, network, model
setting and budget) so that they are committed with the records. A device without a curve of
its own borrows the closest device's: the same target, else the same LLVM CPU (``mcpu``), else
the same kind of target; the dry run names the device and the host the curve came from.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass

from ..config import Paths, TclError
from ..store.devices import Device, DeviceRegistry

CURVES_FILE = "budget-curves.jsonl"
# tcl tune's model -> the budget curve's setting; a trained kind or file is tcl's model
SETTING_OF = {"xgb-online": "xgb-online", "random": "random"}


@dataclass
class Expectation:
    latency_ms: float
    se_ms: float
    device: str             # whose curve
    setting: str
    host: str
    torch_ms: float         # PyTorch eager in the curve's sittings, same host and cores
    between: tuple[int, int]   # the measured budgets it lies between (equal: measured there)

    def describe(self, per_task: float) -> str:
        at = (f"measured at {self.between[0]}" if self.between[0] == self.between[1]
              else f"interpolated between {self.between[0]} and {self.between[1]}")
        return (f"expected latency at {per_task:.3g} trials per task: about {self.latency_ms:.1f} "
                f"ms (± {self.se_ms:.1f}; the budget curve of {self.device}, {self.setting}, "
                f"{at}; host {self.host}); PyTorch eager there: {self.torch_ms:.1f} ms")


def read_curves(paths: Paths) -> list[dict]:
    """Every published budget-curve point; none when the file does not exist."""
    f = paths.root / CURVES_FILE
    if not f.exists():
        return []
    try:
        rows = [json.loads(line) for line in f.read_text().splitlines() if line.strip()]
        for r in rows:
            r["budget"], r["latency_ms"] = int(r["budget"]), float(r["latency_ms"])
    except (ValueError, KeyError, TypeError) as e:
        raise TclError(f"{f}: not a budget-curve file ({type(e).__name__}: {e}); each line "
                       "needs device, network, setting, budget, latency_ms") from e
    return rows


def closeness(device: Device, target: dict) -> int:
    """How close a curve's device (its ``target``) is to ``device``: 3 the same target, 2 the
    same LLVM CPU, 1 the same target kind, 0 unrelated."""
    mine = device.target
    if target == mine:
        return 3
    if target.get("mcpu") and target.get("mcpu") == mine.get("mcpu"):
        return 2
    return 1 if target.get("kind") == mine.get("kind") else 0


def expected_latency(paths: Paths, device_name: str, network_key: str, model: str,
                     per_task: float) -> Expectation | None:
    """The latency the closest device's budget curve gives ``model``'s setting at ``per_task``
    trials per task (linear in log2 of the budget between measured points, the nearest end
    outside them); None without a curve for the network."""
    device = DeviceRegistry(paths).get(device_name)
    setting = SETTING_OF.get(model, "tcl")
    rows = [r for r in read_curves(paths)
            if r["network"] == network_key and r["setting"] == setting]
    if not rows:
        return None
    targets = {r["device"]: r.get("target", {}) for r in rows}
    best = max(targets, key=lambda d: (d == device_name, closeness(device, targets[d])))
    points = sorted((r for r in rows if r["device"] == best), key=lambda r: r["budget"])
    lo = max((p for p in points if p["budget"] <= per_task), key=lambda p: p["budget"],
             default=points[0])
    hi = min((p for p in points if p["budget"] >= per_task), key=lambda p: p["budget"],
             default=points[-1])
    if lo["budget"] == hi["budget"]:
        w = 0.0
    else:
        w = (math.log2(per_task) - math.log2(lo["budget"])) / \
            (math.log2(hi["budget"]) - math.log2(lo["budget"]))

    def mix(key: str) -> float:
        return (1 - w) * float(lo.get(key) or 0.0) + w * float(hi.get(key) or 0.0)

    return Expectation(mix("latency_ms"), mix("se_ms"), best, setting, lo.get("host", "-"),
                       mix("torch_ms"), (lo["budget"], hi["budget"]))
