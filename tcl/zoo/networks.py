"""Network architectures of the workload zoo, written in PyTorch (random weights, no downloads).

torchvision does not import beside the local torch wheel, so the architectures are defined here,
compactly but layer for layer: latency (and so the tuning tasks) depends on shapes, not weights.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import torch
from torch import nn
from torch.nn import functional as F
from torch.nn.utils.fusion import fuse_conv_bn_eval

from ..config import TclError
from .families import (DLRM_DENSE, DLRM_ROWS, Conformer, Dlrm, Llama, Mixer, Swin, UNet,
                       convnext_tiny, efficientnet_b0)
from .layers import conv_bn, self_attention


# ---------------------------------------------------------------------------------------------
# CNN building blocks


class ResBlock(nn.Module):
    """Basic (two 3x3) or bottleneck (1x1, grouped 3x3, 1x1) residual block."""

    def __init__(self, cin: int, planes: int, stride: int, bottleneck: bool, groups: int, width: int):
        super().__init__()
        expansion = 4 if bottleneck else 1
        cout = planes * expansion
        if bottleneck:
            mid = int(planes * width / 64) * groups
            self.body = nn.Sequential(conv_bn(cin, mid, 1), conv_bn(mid, mid, 3, stride, groups),
                                      conv_bn(mid, cout, 1, act=None))
        else:
            self.body = nn.Sequential(conv_bn(cin, planes, 3, stride), conv_bn(planes, cout, 3, act=None))
        self.down = conv_bn(cin, cout, 1, stride, act=None) if stride != 1 or cin != cout else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        skip = self.down(x) if self.down is not None else x
        return F.relu(self.body(x) + skip)


def resnet(layers: list[int], bottleneck: bool, groups: int = 1, width: int = 64,
           classes: int = 1000) -> nn.Module:
    """The generic ResNet / ResNeXt of He et al. and Xie et al. (torchvision's layout)."""
    mods: list[nn.Module] = [conv_bn(3, 64, 7, 2), nn.MaxPool2d(3, 2, 1)]
    cin = 64
    for i, n in enumerate(layers):
        planes = 64 * 2 ** i
        for j in range(n):
            mods.append(ResBlock(cin, planes, 2 if (j == 0 and i > 0) else 1, bottleneck, groups, width))
            cin = planes * (4 if bottleneck else 1)
    mods += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, classes)]
    return nn.Sequential(*mods)


class InvertedResidual(nn.Module):
    """MobileNet-V2/V3 block: 1x1 expand, depthwise kxk, optional squeeze-excite, 1x1 project."""

    def __init__(self, cin: int, mid: int, cout: int, k: int, stride: int, se: bool,
                 act: type[nn.Module]):
        super().__init__()
        layers: list[nn.Module] = [conv_bn(cin, mid, 1, act=act)] if mid != cin else []
        layers.append(conv_bn(mid, mid, k, stride, groups=mid, act=act))
        if se:
            layers.append(SqueezeExcite(mid, _divisible(mid // 4)))
        layers.append(conv_bn(mid, cout, 1, act=None))
        self.body = nn.Sequential(*layers)
        self.residual = stride == 1 and cin == cout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.body(x) if self.residual else self.body(x)


class SqueezeExcite(nn.Module):
    def __init__(self, c: int, squeeze: int):
        super().__init__()
        self.fc1, self.fc2 = nn.Conv2d(c, squeeze, 1), nn.Conv2d(squeeze, c, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = F.adaptive_avg_pool2d(x, 1)
        return x * F.hardsigmoid(self.fc2(F.relu(self.fc1(s))))


def _divisible(v: float, d: int = 8) -> int:
    """Channel rounding of the MobileNet papers (multiple of 8, never below 90% of v)."""
    n = max(d, int(v + d / 2) // d * d)
    return n + d if n < 0.9 * v else n


def mobilenet_v2(classes: int = 1000) -> nn.Module:
    cfg = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
           (6, 160, 3, 2), (6, 320, 1, 1)]  # expand t, channels c, repeats n, stride s
    mods: list[nn.Module] = [conv_bn(3, 32, 3, 2, act=nn.ReLU6)]
    cin = 32
    for t, c, n, s in cfg:
        for j in range(n):
            mods.append(InvertedResidual(cin, cin * t, c, 3, s if j == 0 else 1, False, nn.ReLU6))
            cin = c
    mods += [conv_bn(cin, 1280, 1, act=nn.ReLU6), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
             nn.Linear(1280, classes)]
    return nn.Sequential(*mods)


def mobilenet_v3_large(classes: int = 1000) -> nn.Module:
    RE, HS = nn.ReLU, nn.Hardswish
    cfg = [  # kernel, expanded, out, squeeze-excite, activation, stride
        (3, 16, 16, False, RE, 1), (3, 64, 24, False, RE, 2), (3, 72, 24, False, RE, 1),
        (5, 72, 40, True, RE, 2), (5, 120, 40, True, RE, 1), (5, 120, 40, True, RE, 1),
        (3, 240, 80, False, HS, 2), (3, 200, 80, False, HS, 1), (3, 184, 80, False, HS, 1),
        (3, 184, 80, False, HS, 1), (3, 480, 112, True, HS, 1), (3, 672, 112, True, HS, 1),
        (5, 672, 160, True, HS, 2), (5, 960, 160, True, HS, 1), (5, 960, 160, True, HS, 1)]
    mods: list[nn.Module] = [conv_bn(3, 16, 3, 2, act=HS)]
    cin = 16
    for k, mid, cout, se, act, s in cfg:
        mods.append(InvertedResidual(cin, mid, cout, k, s, se, act))
        cin = cout
    mods += [conv_bn(cin, 960, 1, act=HS), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
             nn.Linear(960, 1280), HS(), nn.Linear(1280, classes)]
    return nn.Sequential(*mods)


class DenseLayer(nn.Module):
    def __init__(self, cin: int, growth: int, bn_size: int):
        super().__init__()
        self.body = nn.Sequential(  # pre-activation: BN-ReLU-conv
            nn.BatchNorm2d(cin), nn.ReLU(), nn.Conv2d(cin, bn_size * growth, 1, bias=False),
            nn.BatchNorm2d(bn_size * growth), nn.ReLU(),
            nn.Conv2d(bn_size * growth, growth, 3, padding=1, bias=False))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([x, self.body(x)], 1)


def densenet121(classes: int = 1000, growth: int = 32, blocks=(6, 12, 24, 16), bn_size: int = 4) -> nn.Module:
    mods: list[nn.Module] = [conv_bn(3, 64, 7, 2), nn.MaxPool2d(3, 2, 1)]
    c = 64
    for i, n in enumerate(blocks):
        for _ in range(n):
            mods.append(DenseLayer(c, growth, bn_size))
            c += growth
        if i < len(blocks) - 1:  # transition: halve channels and resolution
            mods += [nn.BatchNorm2d(c), nn.ReLU(), nn.Conv2d(c, c // 2, 1, bias=False), nn.AvgPool2d(2, 2)]
            c //= 2
    mods += [nn.BatchNorm2d(c), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(c, classes)]
    return nn.Sequential(*mods)


def vgg16(image: int, classes: int = 1000) -> nn.Module:
    mods: list[nn.Module] = []
    cin = 3
    for v in [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M"]:
        if v == "M":
            mods.append(nn.MaxPool2d(2, 2))
        else:
            mods += [nn.Conv2d(cin, v, 3, padding=1), nn.ReLU()]
            cin = v
    # torchvision's AdaptiveAvgPool2d(7) is the identity at 224; the first dense layer takes the
    # flattened map directly so smaller images keep the same layer structure.
    side = image // 32
    mods += [nn.Flatten(), nn.Linear(512 * side * side, 4096), nn.ReLU(), nn.Linear(4096, 4096),
             nn.ReLU(), nn.Linear(4096, classes)]
    return nn.Sequential(*mods)


# ---------------------------------------------------------------------------------------------
# Transformers


class Block(nn.Module):
    """Transformer encoder/decoder layer: multi-head self-attention and a GELU MLP.

    ``pre_norm`` selects ViT/GPT-2 (LayerNorm before each sub-layer) or BERT (after the residual).
    """

    def __init__(self, d: int, heads: int, ffn: int, pre_norm: bool, causal_len: int = 0):
        super().__init__()
        self.heads, self.pre_norm = heads, pre_norm
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc1, self.fc2 = nn.Linear(d, ffn), nn.Linear(ffn, d)
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        if causal_len:  # additive mask: a large negative number above the diagonal
            mask = torch.triu(torch.full((causal_len, causal_len), -1e4), diagonal=1)
            self.register_buffer("mask", mask, persistent=False)
        else:
            self.mask = None

    def attention(self, x: torch.Tensor) -> torch.Tensor:
        return self_attention(x, self.qkv, self.proj, self.heads, self.mask)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mlp = lambda h: self.fc2(F.gelu(self.fc1(h)))  # noqa: E731
        if self.pre_norm:
            x = x + self.attention(self.ln1(x))
            return x + mlp(self.ln2(x))
        x = self.ln1(x + self.attention(x))
        return self.ln2(x + mlp(x))


class Bert(nn.Module):
    def __init__(self, layers: int, d: int, heads: int, seq: int, vocab: int = 30522):
        super().__init__()
        self.tok, self.pos, self.typ = nn.Embedding(vocab, d), nn.Embedding(seq, d), nn.Embedding(2, d)
        self.ln = nn.LayerNorm(d)
        self.blocks = nn.Sequential(*[Block(d, heads, 4 * d, pre_norm=False) for _ in range(layers)])
        self.pool = nn.Linear(d, d)
        self.register_buffer("positions", torch.arange(seq), persistent=False)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.tok(ids) + self.pos(self.positions) + self.typ(torch.zeros_like(ids))
        x = self.blocks(self.ln(x))
        return torch.tanh(self.pool(x[:, 0]))


class Gpt2(nn.Module):
    """GPT-2's decoder block stack (embeddings, causal blocks, final LayerNorm). The vocabulary
    projection is left out: one 50257-wide matmul would dominate measurement time."""

    def __init__(self, layers: int, d: int, heads: int, seq: int, vocab: int = 50257):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(seq, d)
        self.blocks = nn.Sequential(*[Block(d, heads, 4 * d, pre_norm=True, causal_len=seq)
                                      for _ in range(layers)])
        self.ln = nn.LayerNorm(d)
        self.register_buffer("positions", torch.arange(seq), persistent=False)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.ln(self.blocks(self.tok(ids) + self.pos(self.positions)))


class Vit(nn.Module):
    def __init__(self, image: int, patch: int, layers: int, d: int, heads: int, classes: int = 1000):
        super().__init__()
        n = (image // patch) ** 2 + 1
        self.embed = nn.Conv2d(3, d, patch, patch)
        self.cls, self.pos = nn.Parameter(torch.zeros(1, 1, d)), nn.Parameter(torch.zeros(1, n, d))
        self.blocks = nn.Sequential(*[Block(d, heads, 4 * d, pre_norm=True) for _ in range(layers)])
        self.ln, self.head = nn.LayerNorm(d), nn.Linear(d, classes)

    def forward(self, img: torch.Tensor) -> torch.Tensor:
        x = self.embed(img).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], 1) + self.pos
        return self.head(self.ln(self.blocks(x))[:, 0])


def fold_batchnorm(module: nn.Module) -> nn.Module:
    """Fold every BatchNorm that directly follows a convolution into it, as inference compilers
    do (TenSet's tasks are conv+bias+activation); pre-activation BNs (DenseNet) stay."""
    for child in module.children():
        fold_batchnorm(child)
    if isinstance(module, nn.Sequential):
        mods = list(module)
        for i in range(len(mods) - 1):
            if isinstance(mods[i], nn.Conv2d) and isinstance(mods[i + 1], nn.BatchNorm2d):
                module[i] = fuse_conv_bn_eval(mods[i], mods[i + 1])
                module[i + 1] = nn.Identity()
    return module


# ---------------------------------------------------------------------------------------------
# The zoo


@dataclass(frozen=True)
class NetworkSpec:
    """How to build one network: ``build(size)`` and its variants as (batch, size) pairs.

    ``size`` is the image side for vision networks, the sequence length for text and audio ones
    (tokens, or 80-bin filterbank frames) and the number of sparse features for tabular ones.
    ``small`` variants keep the architecture but shrink the input, for tests. ``family`` groups
    networks of one architecture (the long-tail benchmark leaves one family out at a time).
    """

    name: str
    kind: str  # image | text | audio | tabular
    build: Callable[[int], nn.Module]
    variants: tuple[tuple[int, int], ...]
    small: tuple[tuple[int, int], ...]
    holdout: bool = False  # TenSet's evaluation networks: held out at batch 1
    family: str = ""       # "" : the name
    long_tail: bool = False  # one of the families the first eleven lack (tcl.zoo.families)

    @property
    def family_name(self) -> str:
        return self.family or self.name

    def model(self, size: int) -> nn.Module:
        """The inference-mode network (BatchNorm folded) for inputs of ``size``."""
        return fold_batchnorm(self.build(size).eval())

    def example(self, batch: int, size: int) -> tuple[torch.Tensor, ...]:
        if self.kind == "image":
            return (torch.randn(batch, 3, size, size),)
        if self.kind == "audio":
            return (torch.randn(batch, size, 80),)
        if self.kind == "tabular":
            return (torch.randn(batch, DLRM_DENSE), torch.randint(0, DLRM_ROWS, (batch, size)))
        return (torch.randint(0, 2, (batch, size)),)

    def input_shape(self, batch: int, size: int) -> str:
        """The input tensors' shapes, e.g. ``1x3x224x224`` (several: comma-separated)."""
        return ",".join("x".join(map(str, t.shape)) for t in self.example(batch, size))


_IMG = ((1, 224), (4, 224))
_IMG_SMALL = ((1, 32), (2, 32))
_TXT = ((1, 128), (4, 128))
_TXT_SMALL = ((1, 16), (2, 16))

NETWORKS: dict[str, NetworkSpec] = {s.name: s for s in [
    NetworkSpec("resnet18", "image", lambda _: resnet([2, 2, 2, 2], False), _IMG, _IMG_SMALL, True,
                "resnet"),
    NetworkSpec("resnet50", "image", lambda _: resnet([3, 4, 6, 3], True), _IMG, _IMG_SMALL, True,
                "resnet"),
    NetworkSpec("resnext50", "image", lambda _: resnet([3, 4, 6, 3], True, groups=32, width=4),
                _IMG, _IMG_SMALL, True, "resnet"),
    NetworkSpec("mobilenet_v2", "image", lambda _: mobilenet_v2(), _IMG, _IMG_SMALL, True,
                "mobilenet"),
    NetworkSpec("bert_tiny", "text", lambda s: Bert(2, 128, 2, s), _TXT + ((1, 64),), _TXT_SMALL,
                True, "bert"),
    NetworkSpec("bert_base", "text", lambda s: Bert(12, 768, 12, s), _TXT + ((1, 64),), _TXT_SMALL,
                True, "bert"),
    NetworkSpec("mobilenet_v3", "image", lambda _: mobilenet_v3_large(), _IMG + ((1, 160),),
                _IMG_SMALL, family="mobilenet"),
    NetworkSpec("densenet121", "image", lambda _: densenet121(), _IMG, _IMG_SMALL),
    NetworkSpec("vgg16", "image", vgg16, _IMG + ((1, 160),), _IMG_SMALL),
    NetworkSpec("vit_b16", "image", lambda s: Vit(s, 16, 12, 768, 12), _IMG + ((1, 160),), _IMG_SMALL),
    # Sequence 256, not BERT's 128: at 128 GPT-2's blocks are BERT-base's tasks again.
    NetworkSpec("gpt2", "text", lambda s: Gpt2(12, 768, 12, s), ((1, 256), (2, 256)), _TXT_SMALL),
    # The long tail (tcl.zoo.families): not in params.yaml's default zoo, so the reference
    # dataset's task selection is unchanged; benchmarks/long_tail.py measures them.
    NetworkSpec("efficientnet_b0", "image", lambda _: efficientnet_b0(), ((1, 224), (1, 192)),
                _IMG_SMALL, long_tail=True),
    NetworkSpec("swin_t", "image", lambda s: Swin(window=7 if s % 224 == 0 else 2),
                ((1, 224), (2, 224)), ((1, 64),), long_tail=True),
    NetworkSpec("llama", "text", lambda s: Llama(s), ((1, 128), (1, 256)), _TXT_SMALL,
                long_tail=True),
    NetworkSpec("unet", "image", lambda _: UNet(), ((1, 128), (1, 256)), _IMG_SMALL, long_tail=True),
    NetworkSpec("conformer", "audio", lambda _: Conformer(), ((1, 128), (1, 256)), _TXT_SMALL,
                long_tail=True),
    NetworkSpec("mlp_mixer", "image", lambda s: Mixer(s), ((1, 224), (1, 160)), _IMG_SMALL,
                long_tail=True),
    NetworkSpec("dlrm", "tabular", lambda s: Dlrm(s), ((64, 26), (256, 26)), ((4, 4),),
                long_tail=True),
    NetworkSpec("convnext_t", "image", lambda _: convnext_tiny(), ((1, 224), (1, 160)), _IMG_SMALL,
                long_tail=True),
]}
LONG_TAIL = tuple(n for n, s in NETWORKS.items() if s.long_tail)


@dataclass(frozen=True)
class NetworkInstance:
    """One network at one input: the unit that tasks are extracted from."""

    network: str
    batch: int
    size: int
    input_shape: str  # full input tensor shapes, e.g. "1x3x224x224"
    key: str  # e.g. "resnet18-b1-224"
    holdout: bool
    # a user's network (tcl.zoo.user.UserNetwork, which imports this module); None: built in
    source: Any = None

    @property
    def family(self) -> str:
        return self.network if self.source is not None else NETWORKS[self.network].family_name

    def module(self) -> nn.Module:
        """The network in inference mode."""
        if self.source is not None:
            return self.source.model()
        return NETWORKS[self.network].model(self.size)

    def example(self) -> tuple[torch.Tensor, ...]:
        """Example inputs of this instance's shapes."""
        if self.source is not None:
            return self.source.example(self.input_shape)
        return NETWORKS[self.network].example(self.batch, self.size)


def network_kind(network: str) -> tuple[str, str]:
    """(kind, name) of a zoo network, for saying where a record comes from: kind
    ``reference`` (the first eleven), ``families`` (the long tail) or ``user`` (a network tcl
    does not ship: ``tcl zoo add``); name: its family, or its own name."""
    spec = NETWORKS.get(network)
    if spec is None:
        return "user", network
    return ("families" if spec.long_tail else "reference"), spec.family_name


def instance(network: str, batch: int, size: int) -> NetworkInstance:
    spec = NETWORKS[check_networks([network])[0]]
    return NetworkInstance(network, batch, size, spec.input_shape(batch, size),
                           f"{network}-b{batch}-{size}", spec.holdout and batch == 1)


def check_networks(names: list[str], user: dict | None = None) -> list[str]:
    """``names``, each a built-in network or one of ``user`` (name -> UserNetwork)."""
    known = {**NETWORKS, **(user or {})}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise TclError(f"unknown network(s) {', '.join(map(repr, unknown))}; "
                       f"expected one of: {', '.join(known)} (add your own with `tcl zoo add`)")
    return names


def zoo_instances(networks: list[str] | None = None, small: bool = False,
                  user: dict | None = None) -> list[NetworkInstance]:
    """Every (network, variant) of the zoo, or of ``networks``; ``small`` shrinks the inputs of
    built-in networks. ``user`` (name -> UserNetwork, ``tcl.zoo.user``) adds the user's
    networks, each at the inputs it was added with. The default is the built-in zoo without
    the long-tail families, plus every user network."""
    user = user or {}
    if networks is None:
        networks = [n for n, s in NETWORKS.items() if not s.long_tail] + list(user)
    out = []
    for n in check_networks(list(networks), user):
        if n in user:
            out += user[n].instances()
        else:
            out += [instance(n, b, s) for b, s in (NETWORKS[n].small if small else NETWORKS[n].variants)]
    return out
