"""What the neural cost models share: batching, the LambdaRank and pointwise losses, one training
loop (in memory or streamed), prediction and the single-file save format.

A model is a ``CostNet`` (the network: reads a ``Batch``, returns one score per program)
wrapped in a ``NeuralCostModel`` (the ``CostModel`` interface). Subclasses only say how to build
their net.
"""
from __future__ import annotations

import copy
import math
from abc import abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, ClassVar, Iterable, Iterator

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .. import progress
from ..config import TclError
from ..features import FEATURE_VIEWS, feature_view, program_sizes, view_rows, view_width
from ..metrics import pairwise_accuracy
from ..tokens import TOKEN_WIDTH, VOCAB
from .base import PER_STORE_WIDTH, CostModel, ProgramSet
from .checkpoint import read_checkpoint, write_checkpoint

TRAIN_DEFAULTS: dict[str, Any] = {
    "loss": "lambdarank",   # or "mse" (pointwise, on the labels)
    "lr": 7e-4,             # TenSet's Adam settings
    "weight_decay": 1e-6,
    "batch_size": 512,      # programs per training step (whole groups where they fit)
    "epochs": 50,
    "grad_clip": 0.5,
    "patience": 10,         # epochs without a better validation score before stopping
    "stop_metric": "pairwise",   # validation score: pairwise accuracy (higher), or "loss" (lower)
    "lr_schedule": "constant",   # or "cosine": anneal lr to 0 over ``epochs`` (per epoch)
    "infer_batch": 4096,    # programs per scoring step
    "infer_rows": 4096,     # padded rows (programs x sequence length) per scoring step
    "seed": 0,
}


@dataclass
class Batch:
    """Programs as flat rows plus where each row goes: row i of ``stores`` is position
    ``store_pos[i]`` of program ``store_prog[i]``. Only the inputs the net needs are filled."""

    n: int
    group: Tensor
    labels: Tensor | None
    stores: Tensor | None = None       # (S, 164; 223 for features "both"), normalized
    store_prog: Tensor | None = None
    store_pos: Tensor | None = None
    n_stores: Tensor | None = None     # (n,) after truncation
    token_ids: Tensor | None = None    # (T,) vocabulary ids
    token_vals: Tensor | None = None   # (T, TOKEN_WIDTH - 1), normalized
    token_prog: Tensor | None = None
    token_pos: Tensor | None = None
    n_tokens: Tensor | None = None


def padded(rows: Tensor, prog: Tensor, pos: Tensor, n: int, length: int) -> Tensor:
    """Scatter flat rows into a zero-padded (n, length, width) tensor."""
    out = rows.new_zeros(n, max(length, 1), rows.shape[1])
    out[prog, pos] = rows
    return out


def length_mask(lengths: Tensor, length: int) -> Tensor:
    """(n, length) bool, True on real (non-padding) positions."""
    return torch.arange(max(length, 1), device=lengths.device) < lengths[:, None]


def ragged_rows(offsets: np.ndarray, index: np.ndarray, cap: int
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Rows of programs ``index`` (at most ``cap`` each, the first ones), vectorized.
    Returns (row indices, program of each row, position of each row, rows per program)."""
    starts = offsets[index]
    lengths = np.minimum(offsets[index + 1] - starts, cap)
    first = np.cumsum(lengths) - lengths
    prog = np.repeat(np.arange(len(index)), lengths)
    pos = np.arange(int(lengths.sum())) - first[prog]
    return starts[prog] + pos, prog, pos, lengths


def group_batches(group: np.ndarray, size: int, rng: np.random.Generator | None = None
                  ) -> list[np.ndarray]:
    """Program indices in batches of at most ``size`` that keep each group whole where it fits
    (LambdaRank compares programs within a group). With ``rng``: groups and members shuffled."""
    if rng is None:
        order = np.argsort(group, kind="stable")
    else:  # random group order, random order inside each group
        _, inverse = np.unique(group, return_inverse=True)
        group_rank = rng.permutation(inverse.max() + 1)[inverse]
        order = np.lexsort((rng.random(len(group)), group_rank))
    g = group[order]
    cuts = np.flatnonzero(g[1:] != g[:-1]) + 1   # where a new group starts
    batches, start, n = [], 0, len(order)
    while start < n:
        # end at the last group start that fits; a group larger than ``size`` is split
        i = np.searchsorted(cuts, start + size, side="right") - 1
        end = int(cuts[i]) if i >= 0 and cuts[i] > start else min(start + size, n)
        batches.append(order[start:end])
        start = end
    return batches


def lambdarank_loss(scores: Tensor, labels: Tensor, group: Tensor, sigma: float = 1.0) -> Tensor:
    """LambdaRank (NDCG-weighted pairwise logistic loss, the form of TenSet's and TLP's
    ``LambdaRankLoss``) computed within each group and summed over groups. A group with one
    program, or with all labels equal, has no ordered pair and contributes 0."""
    _, g = torch.unique(group, return_inverse=True)
    n_groups = int(g.max()) + 1
    # padded (group, member) matrices, members in predicted order (descending score)
    by_score = torch.argsort(scores.detach(), descending=True, stable=True)
    order = by_score[torch.argsort(g[by_score], stable=True)]
    g_sorted = g[order]
    counts = torch.bincount(g_sorted, minlength=n_groups)
    start = torch.cumsum(counts, 0) - counts
    member = torch.arange(len(order), device=scores.device) - start[g_sorted]
    width = int(counts.max())
    valid = torch.zeros(n_groups, width, dtype=torch.bool, device=scores.device)
    valid[g_sorted, member] = True
    s = scores.new_zeros(n_groups, width)
    s[g_sorted, member] = scores[order]
    y = scores.new_zeros(n_groups, width)
    y[g_sorted, member] = labels[order].to(scores.dtype)

    inv_d = 1.0 / torch.log2(torch.arange(width, device=scores.device, dtype=scores.dtype) + 2.0)
    gain = torch.pow(2.0, y) - 1.0                                   # padding: label 0, gain 0
    ideal = torch.sort(gain, dim=1, descending=True).values
    max_dcg = (ideal * inv_d).sum(1, keepdim=True).clamp(min=1e-10)
    g_norm = gain / max_dcg
    weight = ((inv_d[:, None] - inv_d[None, :]).abs()
              * (g_norm[:, :, None] - g_norm[:, None, :]).abs())
    pairs = valid[:, :, None] & valid[:, None, :] & (y[:, :, None] > y[:, None, :])
    diff = s[:, :, None] - s[:, None, :]
    losses = -weight * F.logsigmoid(sigma * diff) / math.log(2.0)
    return losses[pairs].sum()


def pointwise_loss(scores: Tensor, labels: Tensor, group: Tensor) -> Tensor:
    return F.mse_loss(scores, labels.to(scores.dtype))


LOSSES = {"lambdarank": lambdarank_loss, "mse": pointwise_loss}
# training options that take one of a few named values (checked when a model is made)
CHOICES = {"loss": tuple(LOSSES), "stop_metric": ("pairwise", "loss"),
           "lr_schedule": ("constant", "cosine")}
# Numeric hyperparameters of every neural model: (type, low, high); a bound of None is open.
# One table, so `tcl params` and `tcl train` refuse the same values with the same message.
RANGES: dict[str, tuple[type, float | None, float | None]] = {
    "lr": (float, 1e-8, 10.0), "weight_decay": (float, 0.0, 1.0), "grad_clip": (float, 1e-6, None),
    "batch_size": (int, 1, 1 << 20), "epochs": (int, 1, 100_000), "patience": (int, 1, 100_000),
    "infer_batch": (int, 1, 1 << 22), "infer_rows": (int, 1, 1 << 26), "seed": (int, 0, None),
    "d_model": (int, 1, 4096), "n_layers": (int, 1, 64), "d_state": (int, 1, 1024),
    "d_conv": (int, 1, 64), "expand": (float, 0.1, 16.0), "max_stores": (int, 1, 4096),
    "max_tokens": (int, 1, 4096), "hidden": (int, 1, 1 << 16), "d_embed": (int, 1, 4096),
    "heads": (int, 1, 64), "res_blocks": (int, 0, 64), "decoder": (int, 1, 1 << 16),
}


def check_ranges(config: dict[str, Any], owner: str) -> None:
    """Refuse a hyperparameter outside ``RANGES`` (lists, like TLP's ``hidden``, per item)."""
    for key, value in config.items():
        if key not in RANGES:
            continue
        kind, low, high = RANGES[key]
        for v in (value if isinstance(value, (list, tuple)) else [value]):
            ok_type = not isinstance(v, bool) and (isinstance(v, int) if kind is int
                                                   else isinstance(v, (int, float)))
            if not ok_type or (low is not None and v < low) or (high is not None and v > high):
                span = f"[{low}, {high if high is not None else 'inf'}]"
                raise TclError(f"{owner}: {key} must be {'an integer' if kind is int else 'a number'}"
                               f" in {span}, got {value!r}")


class CostNet(nn.Module):
    """A network scoring a ``Batch``. ``needs`` names the inputs it reads ("stores", "tokens");
    the input scales (TenSet-style per-column max normalization) are buffers, saved with it.
    ``features``: the view of the per-store rows it reads (``tcl.features.view_rows``), applied
    here, where every path (training, scoring, the continual trunk) makes its batches."""

    def __init__(self, needs: Iterable[str], max_stores: int = 1 << 30, max_tokens: int = 1 << 30,
                 features: str = "raw"):
        super().__init__()
        self.needs = frozenset(needs)
        self.max_stores, self.max_tokens = max_stores, max_tokens
        self.features = features
        self.register_buffer("store_scale", torch.ones(view_width(features)))
        self.register_buffer("token_scale", torch.ones(TOKEN_WIDTH - 1))

    @abstractmethod
    def forward(self, batch: Batch) -> Tensor: ...

    def embed(self, batch: Batch) -> Tensor:
        """(n, width) pooled representation before the scoring head (samplers measure
        representativeness and diversity in it)."""
        raise NotImplementedError(f"{type(self).__name__} has no pooled representation")

    def seq_lengths(self, ps: ProgramSet) -> np.ndarray:
        """Rows per program the net will read (for ordering programs to minimize padding)."""
        total = np.zeros(len(ps), np.int64)
        if "stores" in self.needs:
            total += np.minimum(np.diff(ps.store_offsets), self.max_stores)
        if "tokens" in self.needs:
            total += np.minimum(np.diff(ps.token_offsets), self.max_tokens)
        return total

    def batch(self, ps: ProgramSet, index: np.ndarray) -> Batch:
        dev = self.store_scale.device
        t = lambda a, dtype=torch.float32: torch.as_tensor(a, dtype=dtype, device=dev)  # noqa: E731
        b = Batch(len(index), t(ps.group[index], torch.int64),
                  None if ps.labels is None else t(ps.labels[index]))
        if "stores" in self.needs:
            rows, prog, pos, lengths = ragged_rows(ps.store_offsets, index, self.max_stores)
            stores = ps.per_store[rows]
            if self.features != "raw":   # sizes from every store of a program, truncated or not
                sizes = program_sizes(ps.per_store, ps.store_offsets, index)
                stores = view_rows(stores, sizes[prog], self.features)
            b.stores = t(stores) * self.store_scale
            b.store_prog, b.store_pos, b.n_stores = (t(a, torch.int64)
                                                     for a in (prog, pos, lengths))
        if "tokens" in self.needs:
            rows, prog, pos, lengths = ragged_rows(ps.token_offsets, index, self.max_tokens)
            tok = ps.tokens[rows]
            b.token_ids = t(tok[:, 0], torch.int64)
            b.token_vals = t(tok[:, 1:]) * self.token_scale
            b.token_prog, b.token_pos, b.n_tokens = (t(a, torch.int64)
                                                     for a in (prog, pos, lengths))
        return b

    def fit_scales(self, ps: ProgramSet) -> None:
        """1 / max |value| per column (1 where a column is all zero), from training data."""
        stores = feature_view(ps.per_store, ps.store_offsets, self.features)
        for name, rows in (("store_scale", stores), ("token_scale", ps.tokens[:, 1:])):
            peak = np.abs(rows).max(axis=0) if len(rows) else np.zeros(rows.shape[1], np.float32)
            scale = np.where(peak > 0, 1.0 / np.maximum(peak, 1e-30), 1.0)
            getattr(self, name).copy_(torch.as_tensor(scale, dtype=torch.float32))


def check_programs(ps: ProgramSet, labels: bool, what: str) -> ProgramSet:
    """Validate at the edge: shapes, vocabulary ids, finite values, labels in [0, 1]."""
    if not isinstance(ps, ProgramSet):
        raise TclError(f"{what}: expected a ProgramSet, got {type(ps).__name__}")
    ps.validate(TOKEN_WIDTH)
    ids = ps.tokens[:, 0]
    if len(ids) and (ids.min() < 0 or ids.max() >= len(VOCAB) or np.any(ids != np.round(ids))):
        raise TclError(f"{what}: token column 0 must hold vocabulary ids in [0, {len(VOCAB)}); "
                       f"found values in [{ids.min()}, {ids.max()}]")
    if not (np.isfinite(ps.per_store).all() and np.isfinite(ps.tokens).all()):
        raise TclError(f"{what}: features hold NaN or infinite values")
    if labels:
        if ps.labels is None:
            raise TclError(f"{what}: training programs need labels")
        if not np.all((ps.labels >= 0) & (ps.labels <= 1)):
            raise TclError(f"{what}: labels must lie in [0, 1] (min latency in task / latency)")
    return ps


class EarlyStopping:
    """The early-stopping rule of every training loop here and in ``tcl.continual.train``:
    after each epoch, ``step(error)`` keeps ``module``'s state when ``error`` is the lowest so
    far and says stop after ``patience`` epochs without a lower one; ``restore()`` puts the best
    state back (nothing happens when no epoch was validated)."""

    def __init__(self, module: nn.Module, patience: int) -> None:
        self.module, self.patience = module, patience
        self.best, self.best_state, self.stale = math.inf, None, 0

    def step(self, error: float) -> bool:
        if error < self.best:
            self.best, self.best_state, self.stale = error, copy.deepcopy(
                self.module.state_dict()), 0
            return False
        self.stale += 1
        return self.stale >= self.patience

    def restore(self) -> None:
        if self.best_state is not None:
            self.module.load_state_dict(self.best_state)


def _device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


class NeuralCostModel(CostModel):
    """fit / fit_stream / predict / save / load shared by the PyTorch cost models.

    Constructor keywords: the architecture's ``defaults`` plus ``TRAIN_DEFAULTS``; ``device``
    ("auto": CUDA when available) is a runtime choice and is not saved.
    """

    version: ClassVar[int] = 1
    defaults: ClassVar[dict[str, Any]] = {}

    def __init__(self, device: str = "auto", **config: Any) -> None:
        known = {**TRAIN_DEFAULTS, **self.defaults}
        unknown = sorted(set(config) - set(known))
        if unknown:
            raise TclError(f"{type(self).__name__}: unknown parameters {unknown}; "
                           f"known: {sorted(known)}")
        self.config = {**known, **config}
        for key, options in CHOICES.items():
            if self.config[key] not in options:
                raise TclError(f"{key} must be one of {list(options)}, not {self.config[key]!r}")
        check_ranges(self.config, type(self).__name__)
        if self.config.get("features", "raw") not in FEATURE_VIEWS:   # kinds that take the option
            raise TclError(f"features must be one of {list(FEATURE_VIEWS)}, not "
                           f"{self.config['features']!r}")
        self.device = _device(device)
        with torch.random.fork_rng(devices=[]):   # seeded init without touching the caller's RNG
            torch.manual_seed(self.config["seed"])
            self.net = self.build(self.config, self.device).to(self.device)
        self._scaled = False   # input scales come from the first training data, then stay

    @abstractmethod
    def build(self, config: dict[str, Any], device: torch.device) -> CostNet: ...


    def n_parameters(self) -> int:
        return sum(p.numel() for p in self.net.parameters())

    # -- training -------------------------------------------------------------------------------
    def fit(self, train: ProgramSet, valid: ProgramSet | None = None,
            on_epoch: Callable[[int], None] | None = None) -> "NeuralCostModel":
        """Train; ``on_epoch(n)`` (optional) runs after each epoch n, e.g. to record a learning
        curve (benchmarks/epoch_curve.py)."""
        check_programs(train, True, "training set")
        if valid is not None:
            check_programs(valid, True, "validation set")
        if not self._scaled:   # a trained or loaded model keeps reading inputs the same way
            self.net.fit_scales(train)
            self._scaled = True
        rng = np.random.default_rng(self.config["seed"])

        def epoch() -> Iterator[Batch]:
            for index in group_batches(train.group, self.config["batch_size"], rng):
                yield self.net.batch(train, index)
        return self._train(epoch, self.config["epochs"], valid, on_epoch=on_epoch)

    def fit_stream(self, batches: Iterable[ProgramSet], epochs: int = 1,
                   valid: ProgramSet | None = None) -> "NeuralCostModel":
        """Train on batches read one at a time (e.g. ``tcl.models.stream.ParquetStream``), so
        memory stays bounded. Input scales come from the first batch unless already set (by an
        earlier fit or a loaded model). Each batch is one training step: keep groups whole.
        ``batches`` must be re-iterable (like ParquetStream) when ``epochs`` > 1."""
        if epochs > 1 and iter(batches) is batches:
            raise TclError("fit_stream: a one-shot iterator cannot be read for more than one "
                           "epoch; pass a re-iterable such as ParquetStream")
        if valid is not None:
            check_programs(valid, True, "validation set")

        def epoch() -> Iterator[Batch]:
            for i, ps in enumerate(batches):
                check_programs(ps, True, f"stream batch {i}")
                if not self._scaled:
                    self.net.fit_scales(ps)
                    self._scaled = True
                yield self.net.batch(ps, np.arange(len(ps)))
        return self._train(epoch, epochs, valid, empty_error="the training stream is empty")

    def _train(self, epoch, epochs: int, valid: ProgramSet | None, empty_error: str = "",
               on_epoch: Callable[[int], None] | None = None) -> "NeuralCostModel":
        cfg, net = self.config, self.net
        loss_fn = LOSSES[cfg["loss"]]
        opt = torch.optim.Adam(net.parameters(), lr=cfg["lr"], weight_decay=cfg["weight_decay"])
        # cosine (an option): the last epochs take small steps; it did not beat the constant
        # rate on the selection tasks (docs/results.md, training recipe)
        schedule = (torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=max(epochs, 1))
                    if cfg["lr_schedule"] == "cosine" else None)
        stopping = EarlyStopping(net, cfg["patience"])
        for n in range(1, epochs + 1):
            net.train()
            steps = 0
            for b in epoch():
                loss = loss_fn(net(b), b.labels, b.group)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                nn.utils.clip_grad_norm_(net.parameters(), cfg["grad_clip"])
                opt.step()
                steps += 1
            if steps == 0:
                raise TclError(empty_error or "no training batches")
            if schedule is not None:
                schedule.step()
            if on_epoch is not None:
                on_epoch(n)
            progress.step()   # an epoch done, for whoever reports this fit's progress
            if valid is None:
                continue
            if stopping.step(self.validation_error(valid)):   # keep the best epoch
                break
        stopping.restore()
        # what the fit cost and kept, for the training facts (tcl.train: ``epochs``, ``best_epoch``)
        self.fit_epochs = n
        self.best_epoch = n - stopping.stale if valid is not None else n
        net.eval()
        return self

    # -- scoring --------------------------------------------------------------------------------
    def _chunks(self, ps: ProgramSet) -> Iterator[np.ndarray]:
        """Scoring batches of programs of similar length (little padding), each at most
        ``infer_batch`` programs and ``infer_rows`` padded rows (bounded scratch memory)."""
        lengths = self.net.seq_lengths(ps)
        order = np.argsort(lengths, kind="stable")
        lengths = np.maximum(lengths[order], 1)
        start, n = 0, len(order)
        while start < n:
            stop = min(start + self.config["infer_batch"], n)
            ends = np.arange(start + 1, stop + 1)
            fits = (ends - start) * lengths[ends - 1] <= self.config["infer_rows"]
            end = int(ends[fits][-1]) if fits[0] else start + 1
            yield order[start:end]
            start = end

    def predict(self, programs: ProgramSet) -> np.ndarray:
        check_programs(programs, False, "programs to score")
        out = np.empty(len(programs), np.float32)
        self.net.eval()
        with torch.inference_mode():
            for index in self._chunks(programs):
                out[index] = self.net(self.net.batch(programs, index)).float().cpu().numpy()
        return out

    def embed(self, programs: ProgramSet) -> np.ndarray:
        """float32 (n, width): each program's pooled hidden state before the scoring head, in
        the batches ``predict`` uses (``tcl.samplers.embedding`` reads it)."""
        check_programs(programs, False, "programs to embed")
        out: np.ndarray | None = None
        self.net.eval()
        with torch.inference_mode():
            for index in self._chunks(programs):
                rows = self.net.embed(self.net.batch(programs, index)).float().cpu().numpy()
                if out is None:
                    out = np.empty((len(programs), rows.shape[1]), np.float32)
                out[index] = rows
        return out

    def validation_error(self, programs: ProgramSet) -> float:
        """What early stopping minimizes: 1 - pairwise accuracy (``stop_metric`` "pairwise"),
        or the training loss. The LambdaRank loss keeps growing with the score scale long after
        the ranking stops improving (docs/results.md, training recipe), so it stops too early."""
        if self.config["stop_metric"] == "loss":
            return self.loss(programs)
        accuracy = pairwise_accuracy(self.predict(programs), programs.labels, programs.group)
        return 1.0 - accuracy if math.isfinite(accuracy) else self.loss(programs)

    def loss(self, programs: ProgramSet) -> float:
        """Mean per-batch training loss on labelled programs (no gradient)."""
        check_programs(programs, True, "programs to evaluate")
        loss_fn, total, n = LOSSES[self.config["loss"]], 0.0, 0
        self.net.eval()
        with torch.inference_mode():
            for index in group_batches(programs.group, self.config["infer_batch"]):
                b = self.net.batch(programs, index)
                total += float(loss_fn(self.net(b), b.labels, b.group))
                n += 1
        return total / max(n, 1)

    # -- persistence ----------------------------------------------------------------------------
    def save(self, path: str | Path) -> None:
        write_checkpoint({"kind": self.kind, "version": self.version, "device": self.made_for,
                          "config": dict(self.config), "state_dict": self.net.state_dict()}, path)

    @classmethod
    def load(cls, path: str | Path, device: str = "auto") -> "NeuralCostModel":
        path = Path(path)
        blob = read_checkpoint(path)
        if not isinstance(blob, dict) or \
                not {"kind", "version", "config", "state_dict"} <= set(blob):
            raise TclError(f"model file {path} is not a tcl model file "
                           "(expected kind, version, config and state_dict)")
        if blob["kind"] != cls.kind or blob["version"] != cls.version:
            raise TclError(f"model file {path} holds a {blob['kind']!r} model of version "
                           f"{blob['version']}; {cls.__name__}.load reads {cls.kind!r} version "
                           f"{cls.version}")
        try:
            model = cls(device=device, **blob["config"])
            model.net.load_state_dict(blob["state_dict"])
        except (RuntimeError, TclError, TypeError) as e:
            raise TclError(f"model file {path}: its {blob['kind']!r} weights do not fit this "
                           f"architecture: {e}") from None
        model._scaled = True
        model.made_for = blob.get("device")
        model.net.eval()
        return model


def synthetic_programs(n_groups: int = 16, per_group: int = 32, seed: int = 0,
                       stores: tuple[int, int] = (2, 10), tokens: tuple[int, int] = (30, 60),
                       noise: float = 0.05) -> ProgramSet:
    """Programs whose label is a known function of their features (for tests and benchmarks).

    Each program has an integer knob k in 1..8 and its task an optimum o; the label is
    exp(-|k - o|) relative to the best in the task. Both are visible in every per-store row
    (columns 0 and 1) and every trace token (values 0 and 1); the rest is noise with the
    log scale of real features (``noise``: share of non-zero noise values).
    """
    rng = np.random.default_rng(seed)
    n = n_groups * per_group
    group = np.repeat(np.arange(n_groups), per_group)
    knob = rng.integers(1, 9, n).astype(np.float32)
    optimum = rng.integers(1, 9, n_groups).astype(np.float32)[group]
    quality = np.exp(-np.abs(knob - optimum))
    best = np.zeros(n_groups)
    np.maximum.at(best, group, quality)
    labels = (quality / best[group]).astype(np.float32)

    def ragged(lo: int, hi: int, width: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        counts = rng.integers(lo, hi + 1, n)
        offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        rows = np.log2(1 + rng.integers(0, 4096, (offsets[-1], width))).astype(np.float32)
        rows *= rng.random((offsets[-1], width)) < noise   # sparse, like real features
        return rows, offsets, np.repeat(np.arange(n), counts)

    per_store, store_off, owner = ragged(*stores, PER_STORE_WIDTH)
    per_store[:, 0], per_store[:, 1] = knob[owner], optimum[owner]
    toks, token_off, owner = ragged(*tokens, TOKEN_WIDTH)
    # as in real traces, programs of a task share their instruction sequence; decisions differ
    kinds = rng.integers(2, len(VOCAB), (n_groups, tokens[1]))
    toks[:, 0] = kinds[group[owner], np.arange(len(toks)) - token_off[owner]]
    toks[:, 1], toks[:, 2] = knob[owner], optimum[owner]
    return ProgramSet(np.arange(n).astype(str), group, per_store, store_off, toks, token_off,
                      labels)
