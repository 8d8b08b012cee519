"""Figures of docs/results.md's continual-learning sections, from benchmarks/continual.py's rows
(one per backbone, order, seed, method and device), its noise-floor rows, and benchmarks/
cross_host.py's rows and output."""
from __future__ import annotations

import functools

import numpy as np

from _evidence import Sample, markdown_rows, number, paired, rows, welch

ISA_CAPS = {"tenset-mlp": ("bench-continual-0_1_2.jsonl", "bench-continual-3_4.jsonl"),
            "mamba": tuple(f"bench-continual-mamba-{s}.jsonl" for s in range(5))}
REAL_CHIPS = ("bench-continual-hosts-0_1_2.jsonl", "bench-continual-hosts-3_4.jsonl")
UNLABELLED = {"common": "bench-continual-unlabelled-common.jsonl",
              "wide": "bench-continual-unlabelled-wide.jsonl"}


def _rows(files) -> list[dict]:
    return [r for f in files for r in rows(f)]


def orders(rs: list[dict]) -> list[str]:
    return list(dict.fromkeys(r["order"] for r in rs))


def new_device(rs: list[dict], order: str, method: str, value: str = "top1") -> dict[int, float]:
    """Per seed, ``value`` of the later devices right after each is learned, averaged."""
    per: dict[int, list[float]] = {}
    for r in rs:
        if r["order"] == order and r["method"] == method and r["step"] > 0:
            per.setdefault(r["seed"], []).append(r[value])
    return {s: float(np.mean(v)) for s, v in per.items()}


def forgetting(rs: list[dict], order: str, method: str, value: str = "pairwise",
               stat: str = "overall") -> Sample:
    """Per seed, the forgetting of the order's earlier devices at its end (mean over them for
    ``overall``, the largest for ``worst``), over seeds."""
    per: dict[int, list[float]] = {}
    for r in rs:
        if r["order"] == order and r["method"] == method and "forgetting" in r:
            per.setdefault(r["seed"], []).append(r["forgetting"][value][stat])
    agg = max if stat == "worst" else np.mean
    return Sample.of([agg(v) for v in per.values()])


def noise_floor(name: str, value: str = "pairwise") -> dict:
    """Two seeds of one first-device model, the statistic forgetting is: ``overall``, |seed a
    minus seed b| per (device, pair), over those (devices and pairs: not seeds); ``worst``, per
    pair the largest class difference over classes and devices."""
    nz = rows(name)
    pairs: dict[tuple, list[float]] = {}
    for r in nz:
        pairs.setdefault(tuple(r["seeds"]), []).append(r["forgetting"][value]["worst"])
    return {"overall": Sample.of([abs(r["forgetting"][value]["overall"]) for r in nz],
                                 over="devices x seed pairs"),
            "worst": Sample.of([max(v) for v in pairs.values()], over="seed pairs"),
            "devices": len({r["device"] for r in nz}), "pairs": len(pairs)}


@functools.cache
def isa_caps() -> dict:
    """The ISA-cap sequences (one Zen 1 core's profiles), both backbones, 5 seeds."""
    out = {}
    for backbone, files in ISA_CAPS.items():
        rs = _rows(files)
        out[backbone] = {}
        for order in orders(rs):
            first = order.split(",")[0]
            top1 = {m: new_device(rs, order, m) for m in
                    ("scratch", "finetune", "multitask", "distill", "compress")}
            out[backbone][first] = {
                "top1": {m: Sample.of(v.values()) for m, v in top1.items()},
                "distill-finetune": paired(top1["distill"], top1["finetune"]),
                "distill-multitask": paired(top1["distill"], top1["multitask"]),
                "forget": {m: forgetting(rs, order, m) for m in
                           ("finetune", "multitask", "distill", "compress")},
                "forget_worst_top1": {m: forgetting(rs, order, m, "top1", "worst")
                                      for m in ("finetune", "distill", "compress")},
                "forget_worst": {m: forgetting(rs, order, m, "pairwise", "worst")
                                 for m in ("finetune", "distill", "compress")},
                "new_pairwise": {m: new_device(rs, order, m, "pairwise")
                                  for m in ("finetune", "multitask", "distill")}}
    return out


def growth(backbone: str) -> tuple[int, float]:
    """(parameters per added device, their share of a device's model) of the chained methods."""
    r = next(r for f in ISA_CAPS[backbone] for r in rows(f)
             if r["step"] > 0 and r["method"] == "distill")
    return r["params_per_device"], r["params_per_device"] / (r["params_shared"]
                                                            + r["params_per_device"])


@functools.cache
def unlabelled() -> dict:
    """cpu-sse42 then cpu-avx2 from 10%, the common and the wide unlabelled pool, 5 seeds:
    distill minus finetune on cpu-avx2."""
    out = {}
    for pool, name in UNLABELLED.items():
        rs = rows(name)
        order = orders(rs)[0]
        top1 = {m: new_device(rs, order, m) for m in ("finetune", "distill")}
        out[pool] = {"distill-finetune": paired(top1["distill"], top1["finetune"])}
    return out


@functools.cache
def real_chips() -> dict:
    """Zen 1 and Zen 4 cores, each at its ISA, both orders, 5 seeds: paired differences on the
    new device, forgetting of the first, and the noise floor of two seeds (same host)."""
    rs = _rows(REAL_CHIPS)
    out = {"floor": noise_floor("bench-continual-hosts-noise.jsonl")}
    for order in orders(rs):
        first = "Zen 1" if order.startswith("cpu-avx2-1c") else "Zen 4"
        get = {(m, v): new_device(rs, order, m, v) for m in ("finetune", "multitask", "distill")
               for v in ("top1", "pairwise")}
        out[first] = {f"{a}-{b} {v}": paired(get[(a, v)], get[(b, v)])
                      for a, b in (("distill", "multitask"), ("distill", "finetune"),
                                   ("finetune", "multitask")) for v in ("top1", "pairwise")}
        out[first]["forget"] = {m: forgetting(rs, order, m) for m in
                                ("finetune", "multitask", "distill", "compress")}
    return out


@functools.cache
def cross_host() -> dict:
    """Per pair of devices: the landscape's per-task Spearman median (benchmarks/cross_host.py's
    committed output, docs/bench-cross-host.txt: computed from the whole record store, minutes)
    and the transfer loss, paired by seed, from its rows."""
    land = {(r["device a"], r["device b"]): number(r["Spearman median"])
            for r in markdown_rows("bench-cross-host.txt", "Spearman median")}
    by_seed: dict[int, dict] = {}
    for r in rows("bench-cross-host.jsonl"):
        by_seed.setdefault(r["seed"], {})[r["device"]] = r["scores"]

    def loss(a: str, b: str, metric: str = "top1") -> Sample:
        return Sample.of([((by[b][b][metric] - by[a][b][metric])
                           + (by[a][a][metric] - by[b][a][metric])) / 2
                          for by in by_seed.values() if a in by and b in by])
    return {"spearman": land, "loss": loss}


def per_class(rs: list[dict], method: str, value: str, cls: str) -> Sample:
    """A method's forgetting of one operator class, both orders pooled: per (order, seed) the
    mean over the earlier devices, then over those."""
    per: dict[tuple, list[float]] = {}
    for r in rs:
        if r["method"] == method and "forgetting" in r and cls in r["forgetting"][value][
                "per_class"]:
            per.setdefault((r["order"], r["seed"]), []).append(
                r["forgetting"][value]["per_class"][cls])
    return Sample.of([float(np.mean(v)) for v in per.values()])


def class_floor(name: str, value: str, cls: str) -> float:
    """Two seeds' difference in one class: the mean over devices of |seed a - seed b|."""
    return float(np.mean([abs(r["forgetting"][value]["per_class"][cls]) for r in rows(name)
                          if cls in r["forgetting"][value]["per_class"]]))


# -- the pieces of docs/results.md these sections print ----------------------------------------

NOISE = "bench-continual-noise.jsonl"


def noise_floor_text() -> str:
    """'What this says' of "Forgetting against the noise floor" (issue 55 item 2)."""
    caps = isa_caps()["tenset-mlp"]
    orders_ = ("cpu-avx2", "cpu-avx512")
    floor = {v: noise_floor(NOISE, v) for v in ("top1", "pairwise")}
    worst = {v: floor[v]["worst"].values[0] for v in floor}

    def pair(method: str, key: str) -> str:
        return " and ".join(f"{caps[o][key][method].mean:.3f}" for o in orders_)
    below = all(caps[o][k][m].mean <= worst[v] for o in orders_ for m in ("distill", "compress")
                for k, v in (("forget_worst_top1", "top1"), ("forget_worst", "pairwise")))
    rs = _rows(ISA_CAPS["tenset-mlp"])
    classes = []
    for cls in ("dense", "batch_matmul"):
        for v in ("top1", "pairwise"):
            f, nz = per_class(rs, "finetune", v, cls), class_floor(NOISE, v, cls)
            classes.append(f"{cls} {v} {f.text()} against {nz:.3f} "
                           f"({'above' if f.mean > nz else 'not above'})")
    d1, d2 = (caps[o]["forget"]["distill"] for o in orders_)
    return (
        f"- **The worst class: one seed pair's value, no test.** Two seeds of one model differ "
        f"by up to {worst['top1']:.3f} top-1 and {worst['pairwise']:.3f} pairwise in their "
        f"worst class (the largest over classes and devices, the way forgetting's worst class "
        f"is taken), from one pair of seeds (n = 1). Distill's worst-class forgetting "
        f"({pair('distill', 'forget_worst_top1')} top-1, {pair('distill', 'forget_worst')} "
        f"pairwise) and compress's ({pair('compress', 'forget_worst_top1')}, "
        f"{pair('compress', 'forget_worst')}) are "
        f"{'at or below' if below else 'near, not all at or below,'} those single values.\n"
        f"- **Fine-tuning's worst class** is {pair('finetune', 'forget_worst_top1')} in top-1 and "
        f"{pair('finetune', 'forget_worst')} in pairwise accuracy, about twice those values. Per "
        f"class, against the class's own two-seed difference (mean over devices of one pair): "
        + "; ".join(classes) + ". These compare a 5-seed mean with one pair: indications, not "
        f"tests.\n"
        f"- **The mean over networks.** Two seeds differ by {floor['top1']['overall'].text()} "
        f"top-1 and {floor['pairwise']['overall'].text()} pairwise: one seed pair on each of "
        f"{floor['pairwise']['devices']} devices, so ± is over devices, not seeds, and the pairs "
        f"ran on this Zen 5 host while the forgetting ran on the Zen 1 host. Distill's pairwise "
        f"forgetting ({d1.text()} and {d2.text()}, 5 seeds) differs from zero in the first order "
        f"({d1.test()}; second: {d2.test()}) and not from the floor "
        f"({welch(d1, floor['pairwise']['overall'])}; "
        f"{welch(d2, floor['pairwise']['overall'])}): the mean forgetting figures above are "
        f"about one seed-to-seed difference in size, not shown to lie within it.")


def unlabelled_ratio() -> str:
    wide = rows(UNLABELLED["wide"])
    full = new_device(wide, orders(wide)[0], "full")   # all 5,431 programs labelled
    out = {}
    for pool, name in UNLABELLED.items():
        distill = new_device(rows(name), orders(rows(name))[0], "distill")
        out[pool] = Sample.of([distill[seed] / full[seed] for seed in full])
    word = "met" if any(x.mean >= 0.95 for x in out.values()) else "not met"
    return ("With the teacher's rankings on twice the candidates, distillation reaches "
            f"{out['wide'].text()} of the full-pool top-1 ({out['common'].text()} with the "
            f"common pool; the full pool: all 5,431 programs labelled). **Target 0.95: {word}**")


def unlabelled_margin() -> str:
    u = unlabelled()
    c, w = u["common"]["distill-finetune"], u["wide"]["distill-finetune"]
    hit = any(x.mean >= 0.05 and x.beyond() for x in (c, w))
    return (f"**Distill minus finetune: {c.text(sign=True)} (common; {c.test()}), "
            f"{w.text(sign=True)} (wide; {w.test()}). Target +0.05: "
            f"{'met' if hit else 'not met'}.**")


def _bold(s: Sample) -> str:
    text = s.text(sign=True)
    return f"**{text}**" if s.beyond() else text


def chips_table() -> str:
    rc, caps = real_chips(), isa_caps()["tenset-mlp"]
    lines = ["| order | distill - multitask, top-1 | distill - finetune, top-1 | distill - "
             "multitask, pairwise | distill - finetune, pairwise | finetune - multitask, "
             "pairwise |", "|---|---|---|---|---|---|"]
    for first in ("Zen 1", "Zen 4"):
        r = rc[first]
        order = "Zen 1 -> Zen 4" if first == "Zen 1" else "Zen 4 -> Zen 1"
        lines.append(f"| {order} | " + " | ".join(_bold(r[k]) for k in (
            "distill-multitask top1", "distill-finetune top1", "distill-multitask pairwise",
            "distill-finetune pairwise", "finetune-multitask pairwise")) + " |")
    for first, label in (("cpu-avx2", "ISA caps, cpu-avx2 first (above; 3 later devices)"),
                         ("cpu-avx512", "ISA caps, cpu-avx512 first")):
        c = caps[first]
        pw = c["new_pairwise"]
        lines.append(f"| {label} | {_bold(c['distill-multitask'])} | "
                     f"{_bold(c['distill-finetune'])} | "
                     f"{_bold(paired(pw['distill'], pw['multitask']))} | "
                     f"{_bold(paired(pw['distill'], pw['finetune']))} | |")
    return "\n".join(lines)


def chips_order() -> str:
    rc = real_chips()
    z1, z4 = rc["Zen 1"], rc["Zen 4"]

    def both(key: str) -> str:
        return (f"{z1[key].text(sign=True)} ({z1[key].test()}) and {z4[key].text(sign=True)} "
                f"({z4[key].test()})")

    def count(key: str) -> int:
        return sum(bool(z[key].beyond()) for z in (z1, z4))
    return (
        f"**On real chips the paper's ordering is not shown.** Distillation is ahead of "
        f"multi-task learning in pairwise accuracy in both orders ({both('distill-multitask pairwise')}"
        f") and of fine-tuning ({both('distill-finetune pairwise')}): beyond the noise in "
        f"{count('distill-multitask pairwise')} and {count('distill-finetune pairwise')} of the "
        f"two orders. In top-1 it is ahead of multi-task learning when Zen 4 comes first "
        f"({z4['distill-multitask top1'].text(sign=True)}, {z4['distill-multitask top1'].test()})"
        f" and level with fine-tuning ({both('distill-finetune top1')}). Multi-task learning "
        f"does not beat fine-tuning (pairwise {both('finetune-multitask pairwise')}; top-1, Zen 4 "
        f"first, fine-tuning ahead by {z4['finetune-multitask top1'].text(sign=True)}, "
        f"{z4['finetune-multitask top1'].test()}). So: distill ≥ fine-tune ≈ multitask in "
        f"pairwise accuracy, not distill > multitask > fine-tune. On the ISA caps of one chip "
        f"distill's pairwise margins point the same way (table above).")


def chips_forgetting() -> str:
    rc = real_chips()
    floor = rc["floor"]["overall"]
    cells, apart = [], []
    for m in ("finetune", "multitask", "distill", "compress"):
        got = [(f, welch(f, floor)) for f in (rc[first]["forget"][m]
                                              for first in ("Zen 1", "Zen 4"))]
        cells.append(f"{m} {got[0][0].text()} ({got[0][1]}) and {got[1][0].text()} "
                     f"({got[1][1]})")
        apart += [f"{m} ({'above' if f.mean > floor.mean else 'below'} it)"
                  for f, test in got if "beyond" in test]
    return (f"**Forgetting against two seeds of one model.** The floor is {floor.text()} "
            f"pairwise (over {rc['floor']['devices']} devices x {rc['floor']['pairs']} seed "
            f"pairs: {floor.n} values, same host). Pairwise forgetting of the first device, Zen 1 first and Zen 4 "
            f"first, each against that floor: " + "; ".join(cells) + ". The means put "
            "fine-tuning and multi-task above distill and compress, but by Welch's test only "
            + (", ".join(apart) or "none") + " differs from the floor.")


VERDICTS = {
    "continual.noise-floor": noise_floor_text,
    "continual.unlabelled-ratio": unlabelled_ratio,
    "continual.unlabelled-margin": unlabelled_margin,
    "continual.chips-table": chips_table,
    "continual.chips-order": chips_order,
    "continual.chips-forgetting": chips_forgetting,
}
