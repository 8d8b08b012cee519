"""Architecture families the first eleven networks lack: the long tail of production operators.

Each is written compactly in PyTorch (random weights) at the published widths, since tasks depend
on shapes: SiLU and squeeze-excite (EfficientNet), shifted-window attention (Swin), RMSNorm,
rotary embeddings and a gated SiLU MLP (a LLaMA decoder block), up-sampling and skip
concatenation (a U-Net segmentation network), a Conformer block (1-D depthwise convolution,
GLU, macaron feed-forward), token-mixing MLPs (MLP-Mixer), embedding tables and a pairwise
feature interaction (DLRM), and 7x7 depthwise convolutions with channels-last LayerNorm
(ConvNeXt). Depths are cut where repeated identical layers would add no new task.
"""
from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

from .layers import conv_bn, self_attention


# ---------------------------------------------------------------------------------------------
# EfficientNet-B0 (Tan & Le, 2019)


class MBConv(nn.Module):
    """Mobile inverted bottleneck with SiLU and a SiLU/sigmoid squeeze-excite."""

    def __init__(self, cin: int, cout: int, expand: int, k: int, stride: int):
        super().__init__()
        mid = cin * expand
        layers: list[nn.Module] = [conv_bn(cin, mid, 1, act=nn.SiLU)] if expand != 1 else []
        layers.append(conv_bn(mid, mid, k, stride, groups=mid, act=nn.SiLU))
        self.body = nn.Sequential(*layers)
        squeeze = max(1, cin // 4)
        self.se1, self.se2 = nn.Conv2d(mid, squeeze, 1), nn.Conv2d(squeeze, mid, 1)
        self.project = conv_bn(mid, cout, 1, act=None)
        self.residual = stride == 1 and cin == cout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.body(x)
        s = torch.sigmoid(self.se2(F.silu(self.se1(F.adaptive_avg_pool2d(h, 1)))))
        h = self.project(h * s)
        return x + h if self.residual else h


def efficientnet_b0(classes: int = 1000) -> nn.Module:
    cfg = [(1, 16, 1, 1, 3), (6, 24, 2, 2, 3), (6, 40, 2, 2, 5), (6, 80, 3, 2, 3),
           (6, 112, 3, 1, 5), (6, 192, 4, 2, 5), (6, 320, 1, 1, 3)]  # expand, out, n, stride, k
    mods: list[nn.Module] = [conv_bn(3, 32, 3, 2, act=nn.SiLU)]
    cin = 32
    for t, c, n, s, k in cfg:
        for j in range(n):
            mods.append(MBConv(cin, c, t, k, s if j == 0 else 1))
            cin = c
    mods += [conv_bn(cin, 1280, 1, act=nn.SiLU), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
             nn.Linear(1280, classes)]
    return nn.Sequential(*mods)


# ---------------------------------------------------------------------------------------------
# Swin Transformer, tiny (Liu et al., 2021)


class WindowBlock(nn.Module):
    """Swin block: attention inside w x w windows (cyclically shifted on odd blocks), with a
    learned relative-position bias, then a GELU MLP; pre-norm."""

    def __init__(self, d: int, heads: int, window: int, shift: int):
        super().__init__()
        self.heads, self.window, self.shift = heads, window, shift
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        self.bias = nn.Parameter(torch.zeros(1, heads, window * window, window * window))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, h, w, d = x.shape
        ws, nh = self.window, self.heads
        y = self.ln1(x)
        if self.shift:
            y = torch.roll(y, (-self.shift, -self.shift), (1, 2))
        y = y.reshape(b, h // ws, ws, w // ws, ws, d).permute(0, 1, 3, 2, 4, 5).reshape(-1, ws * ws, d)
        q, k, v = self.qkv(y).reshape(-1, ws * ws, 3, nh, d // nh).permute(2, 0, 3, 1, 4)
        att = torch.softmax(q @ k.transpose(-2, -1) * (d // nh) ** -0.5 + self.bias, -1)
        y = self.proj((att @ v).transpose(1, 2).reshape(-1, ws * ws, d))
        y = y.reshape(b, h // ws, w // ws, ws, ws, d).permute(0, 1, 3, 2, 4, 5).reshape(b, h, w, d)
        if self.shift:
            y = torch.roll(y, (self.shift, self.shift), (1, 2))
        x = x + y
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class PatchMerging(nn.Module):
    """Halve the resolution: concatenate each 2x2 neighbourhood, LayerNorm, project 4d -> 2d."""

    def __init__(self, d: int):
        super().__init__()
        self.ln, self.reduce = nn.LayerNorm(4 * d), nn.Linear(4 * d, 2 * d, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.cat([x[:, 0::2, 0::2], x[:, 1::2, 0::2], x[:, 0::2, 1::2], x[:, 1::2, 1::2]], -1)
        return self.reduce(self.ln(x))


class Swin(nn.Module):
    def __init__(self, dims=(96, 192, 384, 768), depths=(2, 2, 2, 2), heads=(3, 6, 12, 24),
                 window: int = 7, classes: int = 1000):
        super().__init__()
        # Swin-T has depths (2, 2, 6, 2); blocks past the second of a stage repeat its tasks.
        self.embed, self.ln0 = nn.Conv2d(3, dims[0], 4, 4), nn.LayerNorm(dims[0])
        stages: list[nn.Module] = []
        for i, (d, n, nh) in enumerate(zip(dims, depths, heads)):
            stages += [WindowBlock(d, nh, window, (window // 2) * (j % 2)) for j in range(n)]
            if i < len(dims) - 1:
                stages.append(PatchMerging(d))
        self.stages = nn.Sequential(*stages)
        self.ln, self.head = nn.LayerNorm(dims[-1]), nn.Linear(dims[-1], classes)

    def forward(self, img: torch.Tensor) -> torch.Tensor:
        x = self.ln0(self.embed(img).permute(0, 2, 3, 1))
        return self.head(self.ln(self.stages(x)).mean((1, 2)))


# ---------------------------------------------------------------------------------------------
# A LLaMA-style decoder (Touvron et al., 2023): RMSNorm, rotary embeddings, gated SiLU MLP


class RMSNorm(nn.Module):
    def __init__(self, d: int, eps: float = 1e-5):
        super().__init__()
        self.weight, self.eps = nn.Parameter(torch.ones(d)), eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat([-x[..., half:], x[..., :half]], -1)


class LlamaBlock(nn.Module):
    def __init__(self, d: int, heads: int, ffn: int, seq: int):
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = RMSNorm(d), RMSNorm(d)
        self.q, self.k, self.v, self.o = (nn.Linear(d, d, bias=False) for _ in range(4))
        self.gate, self.up = nn.Linear(d, ffn, bias=False), nn.Linear(d, ffn, bias=False)
        self.down = nn.Linear(ffn, d, bias=False)
        hd = d // heads
        freq = 10000.0 ** (-torch.arange(0, hd, 2).float() / hd)
        angle = torch.outer(torch.arange(seq).float(), freq)
        angle = torch.cat([angle, angle], -1)
        self.register_buffer("cos", angle.cos(), persistent=False)
        self.register_buffer("sin", angle.sin(), persistent=False)
        self.register_buffer("mask", torch.triu(torch.full((seq, seq), -1e4), 1), persistent=False)

    def attention(self, x: torch.Tensor) -> torch.Tensor:
        b, n, d = x.shape
        split = lambda t: t.reshape(b, n, self.heads, d // self.heads).transpose(1, 2)  # noqa: E731
        q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
        q = q * self.cos + _rotate_half(q) * self.sin
        k = k * self.cos + _rotate_half(k) * self.sin
        att = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(d // self.heads) + self.mask, -1)
        return self.o((att @ v).transpose(1, 2).reshape(b, n, d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attention(self.norm1(x))
        h = self.norm2(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class Llama(nn.Module):
    """TinyLlama-1.1B's widths (d 2048, 32 heads, MLP 5632), two of its 22 identical blocks; the
    vocabulary projection is left out, as for GPT-2."""

    def __init__(self, seq: int, layers: int = 2, d: int = 2048, heads: int = 32, ffn: int = 5632,
                 vocab: int = 32000):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.blocks = nn.Sequential(*[LlamaBlock(d, heads, ffn, seq) for _ in range(layers)])
        self.norm = RMSNorm(d)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.norm(self.blocks(self.tok(ids)))


# ---------------------------------------------------------------------------------------------
# U-Net (Ronneberger et al., 2015) for segmentation: transposed convolutions and skip concats


def _double_conv(cin: int, cout: int) -> nn.Sequential:
    return nn.Sequential(conv_bn(cin, cout, 3), conv_bn(cout, cout, 3))


class UNet(nn.Module):
    def __init__(self, base: int = 32, levels: int = 4, classes: int = 21):
        super().__init__()
        widths = [base * 2 ** i for i in range(levels + 1)]
        self.down = nn.ModuleList([_double_conv(3, widths[0])] +
                                  [_double_conv(widths[i], widths[i + 1]) for i in range(levels)])
        self.up = nn.ModuleList([nn.ConvTranspose2d(widths[i + 1], widths[i], 2, 2)
                                 for i in reversed(range(levels))])
        self.merge = nn.ModuleList([_double_conv(2 * widths[i], widths[i])
                                    for i in reversed(range(levels))])
        self.head = nn.Conv2d(widths[0], classes, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        skips = []
        for i, block in enumerate(self.down):
            x = block(x if i == 0 else F.max_pool2d(x, 2))
            skips.append(x)
        skips.pop()
        for up, merge in zip(self.up, self.merge):
            x = merge(torch.cat([up(x), skips.pop()], 1))
        return self.head(x)


# ---------------------------------------------------------------------------------------------
# Conformer (Gulati et al., 2020): speech encoder blocks over 80-bin filterbank frames


class ConformerBlock(nn.Module):
    """Half feed-forward, self-attention, convolution module (pointwise, GLU, depthwise 1-D,
    BatchNorm, SiLU, pointwise), half feed-forward, LayerNorm."""

    def __init__(self, d: int, heads: int, kernel: int = 31):
        super().__init__()
        self.ff1 = nn.Sequential(nn.LayerNorm(d), nn.Linear(d, 4 * d), nn.SiLU(), nn.Linear(4 * d, d))
        self.ff2 = nn.Sequential(nn.LayerNorm(d), nn.Linear(d, 4 * d), nn.SiLU(), nn.Linear(4 * d, d))
        self.heads, self.ln_att = heads, nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.ln_conv = nn.LayerNorm(d)
        self.pw1, self.pw2 = nn.Conv1d(d, 2 * d, 1), nn.Conv1d(d, d, 1)
        self.dw = nn.Conv1d(d, d, kernel, padding=kernel // 2, groups=d)
        self.bn, self.ln = nn.BatchNorm1d(d), nn.LayerNorm(d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + 0.5 * self.ff1(x)
        x = x + self_attention(self.ln_att(x), self.qkv, self.proj, self.heads)
        h = self.pw1(self.ln_conv(x).transpose(1, 2))
        a, g = h.chunk(2, 1)
        h = self.pw2(F.silu(self.bn(self.dw(a * torch.sigmoid(g)))))
        x = x + h.transpose(1, 2)
        return self.ln(x + 0.5 * self.ff2(x))


class Conformer(nn.Module):
    """Conformer-M's widths (d 256, 4 heads); three of its identical blocks."""

    def __init__(self, d: int = 256, heads: int = 4, layers: int = 3, mels: int = 80):
        super().__init__()
        self.inp = nn.Linear(mels, d)
        self.blocks = nn.Sequential(*[ConformerBlock(d, heads) for _ in range(layers)])

    def forward(self, frames: torch.Tensor) -> torch.Tensor:
        return self.blocks(self.inp(frames))


# ---------------------------------------------------------------------------------------------
# MLP-Mixer, S/16 (Tolstikhin et al., 2021)


class MixerBlock(nn.Module):
    def __init__(self, tokens: int, d: int, token_mlp: int, channel_mlp: int):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.t1, self.t2 = nn.Linear(tokens, token_mlp), nn.Linear(token_mlp, tokens)
        self.c1, self.c2 = nn.Linear(d, channel_mlp), nn.Linear(channel_mlp, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.ln1(x).transpose(1, 2)
        x = x + self.t2(F.gelu(self.t1(y))).transpose(1, 2)
        return x + self.c2(F.gelu(self.c1(self.ln2(x))))


class Mixer(nn.Module):
    def __init__(self, image: int, patch: int = 16, d: int = 512, layers: int = 2,
                 token_mlp: int = 256, channel_mlp: int = 2048, classes: int = 1000):
        super().__init__()
        tokens = (image // patch) ** 2
        self.embed = nn.Conv2d(3, d, patch, patch)
        self.blocks = nn.Sequential(*[MixerBlock(tokens, d, token_mlp, channel_mlp)
                                      for _ in range(layers)])
        self.ln, self.head = nn.LayerNorm(d), nn.Linear(d, classes)

    def forward(self, img: torch.Tensor) -> torch.Tensor:
        x = self.blocks(self.embed(img).flatten(2).transpose(1, 2))
        return self.head(self.ln(x).mean(1))


# ---------------------------------------------------------------------------------------------
# DLRM (Naumov et al., 2019): the recommendation model of MLPerf, Criteo-shaped


DLRM_DENSE, DLRM_SPARSE, DLRM_ROWS = 13, 26, 1000


class Dlrm(nn.Module):
    """Bottom MLP over 13 dense features; ``sparse`` embedding tables (Criteo has 26), 64 wide,
    rows cut to 1000 (which changes no computation); the pairwise dot-product interaction; the
    top MLP."""

    def __init__(self, sparse: int = DLRM_SPARSE, d: int = 64):
        super().__init__()
        self.bottom = nn.Sequential(nn.Linear(DLRM_DENSE, 512), nn.ReLU(), nn.Linear(512, 256),
                                    nn.ReLU(), nn.Linear(256, d), nn.ReLU())
        self.tables = nn.ModuleList([nn.Embedding(DLRM_ROWS, d) for _ in range(sparse)])
        n = sparse + 1
        self.top = nn.Sequential(nn.Linear(d + n * n, 512), nn.ReLU(), nn.Linear(512, 256),
                                 nn.ReLU(), nn.Linear(256, 1))

    def forward(self, dense: torch.Tensor, sparse: torch.Tensor) -> torch.Tensor:
        x = self.bottom(dense)
        feats = torch.stack([x] + [t(sparse[:, i]) for i, t in enumerate(self.tables)], 1)
        inter = (feats @ feats.transpose(1, 2)).flatten(1)
        return torch.sigmoid(self.top(torch.cat([x, inter], 1)))


# ---------------------------------------------------------------------------------------------
# ConvNeXt, tiny (Liu et al., 2022)


class LayerNorm2d(nn.LayerNorm):
    """LayerNorm over the channels of an NCHW tensor (ConvNeXt's downsampling layers)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)


class ConvNextBlock(nn.Module):
    def __init__(self, d: int):
        super().__init__()
        self.dw = nn.Conv2d(d, d, 7, padding=3, groups=d)
        self.ln, self.fc1, self.fc2 = nn.LayerNorm(d), nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        self.gamma = nn.Parameter(torch.full((d,), 1e-6))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.dw(x).permute(0, 2, 3, 1)
        h = self.gamma * self.fc2(F.gelu(self.fc1(self.ln(h))))
        return x + h.permute(0, 3, 1, 2)


def convnext_tiny(classes: int = 1000, dims=(96, 192, 384, 768), depths=(2, 2, 2, 2)) -> nn.Module:
    # ConvNeXt-T has depths (3, 3, 9, 3); the blocks past the second of a stage repeat its tasks.
    mods: list[nn.Module] = [nn.Conv2d(3, dims[0], 4, 4), LayerNorm2d(dims[0])]
    for i, (d, n) in enumerate(zip(dims, depths)):
        if i:
            mods += [LayerNorm2d(dims[i - 1]), nn.Conv2d(dims[i - 1], d, 2, 2)]
        mods += [ConvNextBlock(d) for _ in range(n)]
    mods += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.LayerNorm(dims[-1]), nn.Linear(dims[-1], classes)]
    return nn.Sequential(*mods)
