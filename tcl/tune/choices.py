"""The compile choices ``tcl tune`` makes when the user names none (``--layout auto``, ``--conv
auto``, the defaults): each from what was measured, said with its reason in the plan and the run.

- Layout: ``nchwc`` for a network with convolutions (the zoo's ``conv`` op class: dense, not
  depthwise), ``nchw`` otherwise. Measured: resnet18 at 64 trials per task on a Zen 4 core,
  39.4 ms in nchwc against 54.5 in nchw (docs/bench-layouts.jsonl); on a Zen 3 core at 4 trials
  per task 150 against 270 ms; vgg16 and vit_b16 were tuned in nchwc on a Xeon core
  (docs/results.md, "The open dataset"). A network without convolutions has nothing to block.
- Convolution algorithm: ``DEFAULT_CONV``, direct: a tuned Winograd network cannot be built in
  TVM 0.27 (``tcl.tune.winograd.NOT_COMPILED``), whatever its kernels measure
  (docs/bench-winograd-layers.jsonl).
Math stays exact unless ``--fast-math`` is given (its measured error is in its help).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..config import Paths
from .layout import check_layout
from .winograd import check_conv

AUTO = "auto"
AUTO_HELP = "what was measured fastest for such networks, said with its reason in the plan"
LAYOUT_REASON = ("nchwc: the network has convolutions, and the blocked layout was measured "
                 "faster on every convolutional network tuned in both (resnet18 at 64 trials "
                 "per task on a Zen 4 core: 39.4 against 54.5 ms in nchw)")
NO_CONV_REASON = "nchw: the network has no convolution for the blocked layout to change"
NOT_EXTRACTED_REASON = ("nchw: the network's tasks are not extracted yet (`tcl zoo`), so whether "
                        "it has convolutions is not known")
DEFAULT_CONV = "direct"
CONV_REASON = ("direct: a tuned Winograd network cannot be built yet (TVM 0.27's compile_relax "
               "does not replay its kernels' traces); docs/results.md, \"Winograd\", has the "
               "per-layer measurement")


@dataclass(frozen=True)
class CompileChoices:
    """The layout and the 3x3 convolutions' algorithm a run uses, and why (``reasons``: a line
    for each choice made for the user; none for a choice the user named)."""

    layout: str
    conv: str
    reasons: tuple[str, ...] = ()


def chosen_lines(reasons) -> list[str]:
    """How the plan and the run say the choices made for the user (``CompileChoices.reasons``)."""
    return [f"chosen for you: {r}" for r in reasons]


def has_convolutions(paths: Paths, network_key: str) -> bool | None:
    """Whether the zoo's extraction of ``network_key`` holds a (dense) convolution task; None
    when the network is not extracted yet."""
    import polars as pl

    from ..zoo.extract import load_networks, load_tasks

    ids = load_networks(paths).filter(pl.col("network_key") == network_key)["task_id"]
    if ids.is_empty():
        return None
    classes = load_tasks(paths).filter(pl.col("task_id").is_in(ids.implode()))["op_class"]
    return "conv" in classes.to_list()


def choose(paths: Paths, network_key: str, layout: str = AUTO, conv: str = AUTO) -> CompileChoices:
    """``layout`` and ``conv``, each ``AUTO`` resolved as the module docstring says."""
    reasons = []
    convolutional = has_convolutions(paths, network_key) if AUTO in (layout, conv) else None
    if layout == AUTO:
        layout = "nchwc" if convolutional else "nchw"
        reasons.append(LAYOUT_REASON if convolutional else NO_CONV_REASON
                       if convolutional is False else NOT_EXTRACTED_REASON)
    if conv == AUTO:
        conv = DEFAULT_CONV
        if convolutional:   # nothing to say of an algorithm no layer of the network uses
            reasons.append(CONV_REASON)
    return CompileChoices(check_layout(layout), check_conv(conv), tuple(reasons))
