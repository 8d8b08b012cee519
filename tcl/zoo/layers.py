"""Layers that several zoo networks share (the built-in eleven and the long-tail families)."""
from __future__ import annotations

import torch
from torch import nn


def conv_bn(cin: int, cout: int, k: int, stride: int = 1, groups: int = 1,
            act: type[nn.Module] | None = nn.ReLU) -> nn.Sequential:
    layers = [nn.Conv2d(cin, cout, k, stride, k // 2, groups=groups, bias=False), nn.BatchNorm2d(cout)]
    return nn.Sequential(*layers, act()) if act else nn.Sequential(*layers)


def self_attention(x: torch.Tensor, qkv: nn.Linear, proj: nn.Linear, heads: int,
                   mask: torch.Tensor | None = None) -> torch.Tensor:
    """Multi-head self-attention of ``x`` (batch, tokens, d) with a fused q/k/v projection and
    an optional additive mask."""
    b, n, d = x.shape
    q, k, v = qkv(x).reshape(b, n, 3, heads, d // heads).permute(2, 0, 3, 1, 4)
    scores = q @ k.transpose(-2, -1) * (d // heads) ** -0.5
    if mask is not None:
        scores = scores + mask
    out = torch.softmax(scores, -1) @ v
    return proj(out.transpose(1, 2).reshape(b, n, d))
