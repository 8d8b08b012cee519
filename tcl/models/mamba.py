"""The TCL cost model: a small Mamba (selective state-space) network over a program's per-store
feature rows and/or its trace tokens, trained with LambdaRank within each task.

Each block's mixer has exactly the parameters of ``mamba_ssm.modules.mamba_simple.Mamba``
(``in_proj``, ``conv1d``, ``x_proj``, ``dt_proj``, ``A_log``, ``D``, ``out_proj``, same shapes and
initialization), so a state dict trained with the CUDA kernels loads into the CPU path and back.
The CPU path is plain PyTorch with a scan written for short sequences: a closed form over all
positions for the shortest ones, else a loop over positions on batched (L, B, d_state, d_inner)
tensors, in place when no gradient is needed.
"""
from __future__ import annotations

import math
import threading
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..config import TclError
from ..tokens import TOKEN_WIDTH, VOCAB
from .base import PER_STORE_WIDTH
from .nn import Batch, CostNet, NeuralCostModel, length_mask

LOG2E = 1.4426950408889634
QUADRATIC_MAX = 2   # longest sequence scanned in closed form (selective_scan, measured)
INPUTS = {"stores": ("stores",), "tokens": ("tokens",), "both": ("stores", "tokens")}
POOLS = ("mean", "sum", "last")   # over a program's positions; "last": the causal scan's end


_WORKSPACE = threading.local()


def workspace(slot: int, shape: tuple[int, ...], like: Tensor) -> Tensor:
    """A reusable per-thread scratch tensor for inference: fresh multi-MB buffers cost page
    faults that dominate the scan's arithmetic."""
    bufs = _WORKSPACE.__dict__.setdefault("bufs", {})
    # inference tensors may only be written under inference mode: keep one set per mode
    need = math.prod(shape)
    key = (slot, like.device, like.dtype, torch.is_inference_mode_enabled())
    if key not in bufs or bufs[key].numel() < need:
        bufs[key] = torch.empty(need, device=like.device, dtype=like.dtype)
    return bufs[key][:need].view(shape)


def selective_scan(u: Tensor, delta: Tensor, A: Tensor, B: Tensor, C: Tensor, D: Tensor) -> Tensor:
    """y_t = C_t . h_t + D u_t with h_t = exp(delta_t A) h_{t-1} + delta_t B_t u_t (zero h_0):
    the arithmetic of mamba_ssm's ``selective_scan_ref`` (softplus and bias already applied to
    delta, no gate). u, delta: (l, b, d); A: (d, n); B, C: (l, b, n); D: (d,) -> (l, b, d).

    Up to ``QUADRATIC_MAX`` positions (63% of the measured programs' store rows): the closed
    form, all positions at once; longer sequences: the recurrence, which measured faster there on
    CPU. On these short sequences the time goes to passes over the (l, b, n, d) decays and
    states, not to the loop, and every parallel form makes more passes (docs/results.md, "Mamba
    near its arithmetic limit")."""
    if u.shape[0] <= QUADRATIC_MAX:
        return quadratic_scan(u, delta, A, B, C, D)
    return recurrent_scan(u, delta, A, B, C, D)


def quadratic_scan(u: Tensor, delta: Tensor, A: Tensor, B: Tensor, C: Tensor, D: Tensor
                   ) -> Tensor:
    """``selective_scan`` unrolled, no loop over time (the diagonal-block form of Mamba-2's SSD):
    y_t = D u_t + sum_{s <= t} sum_n C_tn B_sn exp(A_dn sum_{s < r <= t} delta_r) delta_s u_s.
    One (b, n, d) decay block per pair s < t, l (l - 1) / 2 of them, against the recurrence's
    l - 1 decays plus l materialized states: 5x faster at 1 position, even at 2, slower from 3
    on when scoring (1.5x at 3; training broke even at 3)."""
    l, b, d = u.shape
    du = delta * u
    y = torch.addcmul(u * D, (C * B).sum(-1, keepdim=True), du)     # s = t: no decay
    if l == 1:
        return y
    tt, ss = torch.tril_indices(l, l, -1, device=u.device)          # pairs s < t
    r = torch.arange(l, device=u.device)
    # segment sums as a 0/1 matrix product: a sum of positives, no cancellation of cumsums
    span = ((r > ss[:, None]) & (r <= tt[:, None])).to(delta.dtype)   # (pairs, l)
    seg = (span @ delta.reshape(l, -1)).view(-1, b, 1, d)
    a2 = A.T * LOG2E                                    # exp(x) = exp2(x log2 e); exp2 is cheaper
    if torch.is_grad_enabled() and any(t.requires_grad for t in (delta, A, B, C)):
        decay = (seg * a2).exp2()   # saved for backward: no shared scratch
    else:
        decay = torch.mul(seg, a2, out=workspace(0, (len(tt), b, *a2.shape), u)).exp2_()
    w = torch.matmul((C[tt] * B[ss]).unsqueeze(2), decay).squeeze(2)  # sum over n: (pairs, b, d)
    return y.index_add(0, tt, w * du[ss])


def recurrent_scan(u: Tensor, delta: Tensor, A: Tensor, B: Tensor, C: Tensor, D: Tensor
                   ) -> Tensor:
    """``selective_scan`` as the recurrence, a step per position (the reference in tests).

    States are laid out (l, b, n, d): d (the longest axis) innermost keeps every elementwise op
    vectorized, and time-major makes each step's slice contiguous. Without a gradient the
    states live in reused scratch buffers and are updated in place."""
    a2 = A.T * LOG2E                                    # exp(x) = exp2(x log2 e); exp2 is cheaper
    du = (delta * u).unsqueeze(2)
    # The first state has no predecessor, so its decay is never used: decay[t - 1] belongs to
    # step t (programs are short, so skipping step 0 saves a third of the exponentials or more).
    if torch.is_grad_enabled() and (du.requires_grad or a2.requires_grad):
        # unbind, not h[t]: each indexing op's backward would write a zero-filled full tensor
        decay = (delta[1:].unsqueeze(2) * a2).exp2().unbind(0)
        inputs = (du * B.unsqueeze(-1)).unbind(0)
        states = [inputs[0]]
        for t in range(1, len(inputs)):
            states.append(torch.addcmul(inputs[t], decay[t - 1], states[-1]))
        h = torch.stack(states)
    else:
        shape = (*u.shape[:2], A.shape[1], A.shape[0])
        h = torch.mul(du, B.unsqueeze(-1), out=workspace(1, shape, u))
        if shape[0] > 1:
            decay = torch.mul(delta[1:].unsqueeze(2), a2,
                              out=workspace(0, (shape[0] - 1, *shape[1:]), u)).exp2_()
            for t in range(1, shape[0]):
                h[t].addcmul_(decay[t - 1], h[t - 1])
    y = torch.matmul(C.unsqueeze(2), h).squeeze(2)       # sum_n C_n h_n as small matmuls
    return y.addcmul_(u, D)


class MambaMixer(nn.Module):
    """CPU twin of ``mamba_ssm.Mamba``: same parameter names, shapes and initialization."""

    def __init__(self, d_model: int, d_state: int = 16, d_conv: int = 4, expand: float = 2,
                 dt_min: float = 1e-3, dt_max: float = 0.1, dt_init_floor: float = 1e-4) -> None:
        super().__init__()
        self.d_inner = int(expand * d_model)
        self.d_state, self.d_conv = d_state, d_conv
        self.dt_rank = math.ceil(d_model / 16)
        self.in_proj = nn.Linear(d_model, 2 * self.d_inner, bias=False)
        self.conv1d = nn.Conv1d(self.d_inner, self.d_inner, d_conv, groups=self.d_inner,
                                padding=d_conv - 1, bias=True)
        self.x_proj = nn.Linear(self.d_inner, self.dt_rank + 2 * d_state, bias=False)
        self.dt_proj = nn.Linear(self.dt_rank, self.d_inner, bias=True)
        self.out_proj = nn.Linear(self.d_inner, d_model, bias=False)
        # Mamba's dt init: weight ~ U(+-dt_rank^-0.5), softplus(bias) log-uniform in [min, max]
        std = self.dt_rank ** -0.5
        nn.init.uniform_(self.dt_proj.weight, -std, std)
        dt = torch.exp(torch.rand(self.d_inner) * (math.log(dt_max) - math.log(dt_min))
                       + math.log(dt_min)).clamp(min=dt_init_floor)
        with torch.no_grad():
            self.dt_proj.bias.copy_(dt + torch.log(-torch.expm1(-dt)))   # inverse softplus
        # S4D-real init: A = -(1..d_state) per channel, kept as log
        self.A_log = nn.Parameter(torch.log(torch.arange(1, d_state + 1, dtype=torch.float32)
                                            ).repeat(self.d_inner, 1))
        self.D = nn.Parameter(torch.ones(self.d_inner))

    def forward(self, x: Tensor) -> Tensor:
        """(b, l, d_model) -> (b, l, d_model), like ``mamba_ssm.Mamba``."""
        return self.forward_time_major(x.transpose(0, 1)).transpose(0, 1)

    def forward_time_major(self, x: Tensor) -> Tensor:
        """(l, b, d_model) -> (l, b, d_model). Causal, so right padding never leaks left."""
        inplace = not torch.is_grad_enabled()   # inference: no buffers kept for backward
        xs, z = self.in_proj(x).chunk(2, dim=-1)
        xs = F.silu(self.causal_conv(xs), inplace=inplace)
        dt, B, C = torch.split(self.x_proj(xs), [self.dt_rank, self.d_state, self.d_state], -1)
        delta = F.softplus(self.dt_proj(dt))
        y = selective_scan(xs, delta, -torch.exp(self.A_log.float()), B, C, self.D.float())
        return self.out_proj(y.mul_(F.silu(z, inplace=inplace)) if inplace else y * F.silu(z))

    def causal_conv(self, x: Tensor) -> Tensor:
        """``conv1d`` (depthwise, left padding d_conv - 1, first l outputs) as shifted
        multiply-adds along time: cheaper than a convolution call for short sequences."""
        w = self.conv1d.weight[:, 0, :]                                     # (d, k)
        k = self.d_conv
        out = torch.addcmul(self.conv1d.bias, x, w[:, k - 1])
        for shift in range(1, min(k, x.shape[0])):
            out[shift:].addcmul_(x[:-shift], w[:, k - 1 - shift])
        return out


def make_mixer(d_model: int, d_state: int, d_conv: int, expand: float,
               device: torch.device) -> nn.Module:
    """mamba_ssm's fused CUDA module where it can run, else the CPU twin (same state dict)."""
    if device.type == "cuda":
        try:
            from mamba_ssm import Mamba  # optional: CUDA machines only
            return Mamba(d_model=d_model, d_state=d_state, d_conv=d_conv, expand=expand)
        except ImportError:
            pass
    return MambaMixer(d_model, d_state, d_conv, expand)


class MambaBlock(nn.Module):
    """Pre-norm residual block around one mixer (the layout of mamba_ssm's ``Block``).
    Works time-major (l, b, d): the CPU mixer's native layout."""

    def __init__(self, mixer: nn.Module, d_model: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(d_model)
        self.mixer = mixer

    def forward(self, x: Tensor) -> Tensor:
        h = self.norm(x)
        if isinstance(self.mixer, MambaMixer):
            return x + self.mixer.forward_time_major(h)
        return x + self.mixer(h.transpose(0, 1).contiguous()).transpose(0, 1)


class MambaNet(CostNet):
    def __init__(self, inputs: str, d_model: int, n_layers: int, d_state: int, d_conv: int,
                 expand: float, max_stores: int, max_tokens: int, device: torch.device,
                 pool: str = "mean") -> None:
        if inputs not in INPUTS:
            raise TclError(f"inputs must be one of {sorted(INPUTS)}, not {inputs!r}")
        if pool not in POOLS:
            raise TclError(f"pool must be one of {list(POOLS)}, not {pool!r}")
        super().__init__(INPUTS[inputs], max_stores, max_tokens)
        self.pool = pool
        if "stores" in self.needs:
            self.store_embed = nn.Linear(PER_STORE_WIDTH, d_model)
        if "tokens" in self.needs:
            self.token_embed = nn.Embedding(len(VOCAB), d_model, padding_idx=0)
            self.token_vals = nn.Linear(TOKEN_WIDTH - 1, d_model)
        self.layers = nn.ModuleList(
            MambaBlock(make_mixer(d_model, d_state, d_conv, expand, device), d_model)
            for _ in range(n_layers))
        self.norm_f = nn.LayerNorm(d_model)
        self.head = nn.Sequential(nn.Linear(d_model, d_model), nn.SiLU(), nn.Linear(d_model, 1))

    def embed(self, b: Batch) -> Tensor:
        rows, prog, pos = [], [], []
        lengths = torch.zeros(b.n, dtype=torch.int64, device=b.group.device)
        if "stores" in self.needs:   # a program's store rows come first, then its tokens
            rows.append(self.store_embed(b.stores))
            prog.append(b.store_prog)
            pos.append(b.store_pos)
            lengths = lengths + b.n_stores
        if "tokens" in self.needs:
            rows.append(self.token_embed(b.token_ids) + self.token_vals(b.token_vals))
            prog.append(b.token_prog)
            pos.append(b.token_pos + lengths[b.token_prog])
            lengths = lengths + b.n_tokens
        length = max(int(lengths.max()), 1)   # programs without rows pool to zeros
        rows = torch.cat(rows)
        x = rows.new_zeros(length, b.n, rows.shape[1])     # time-major, zero right padding
        x[torch.cat(pos), torch.cat(prog)] = rows
        for layer in self.layers:
            x = layer(x)
        if self.pool == "last":
            pooled = x[(lengths - 1).clamp(min=0), torch.arange(b.n, device=x.device)]
        else:
            mask = length_mask(lengths, length).T.unsqueeze(-1).to(x.dtype)
            pooled = (x * mask).sum(0)
            if self.pool == "mean":
                pooled = pooled / lengths.clamp(min=1).unsqueeze(-1).to(x.dtype)
        return self.norm_f(pooled)

    def forward(self, b: Batch) -> Tensor:
        return self.head(self.embed(b)).squeeze(-1)


class MambaModel(NeuralCostModel):
    """Mamba cost model. ``inputs``: "stores" (per-store feature rows, the default: see
    docs/bench-throughput.txt), "tokens" (trace tokens) or "both" (stores then tokens)."""

    kind = "mamba"
    # Chosen on training tasks only (benchmarks/select_hyper.py, docs/results.md): 3 layers
    # ranked best; lr 2e-3 beat TenSet's 7e-4 on pairwise accuracy; stopped on validation
    # pairwise accuracy, ranking still improves up to epoch 60-100 (benchmarks/epoch_curve.py).
    defaults = {"inputs": "stores", "d_model": 32, "n_layers": 3, "d_state": 8, "d_conv": 4,
                "expand": 2, "max_stores": 32, "max_tokens": 64, "lr": 2e-3, "pool": "mean",
                "epochs": 100, "patience": 20}

    def build(self, config: dict[str, Any], device: torch.device) -> MambaNet:
        return MambaNet(config["inputs"], config["d_model"], config["n_layers"],
                        config["d_state"], config["d_conv"], config["expand"],
                        config["max_stores"], config["max_tokens"], device,
                        config["pool"])
