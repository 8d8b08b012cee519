"""A TLP-style cost model (Zhai et al., ASPLOS'23; the default ``AttentionModule`` of TLP's
``scripts/tlp_train.py``): each schedule-primitive token goes through an MLP encoder
(64, 128, 256, 256 wide), one multi-head self-attention layer with a residual, residual ReLU
layers, and a per-token MLP decoder (256, 128, 64, 1) whose outputs are summed over the tokens.
Trained with LambdaRank (TLP: Adam lr 7e-4, weight decay 1e-6, gradient clip 0.5).

Differences from TLP, on purpose: a token's kind is a learned embedding (TLP one-hot encodes it
into its 22 features), padding is masked in attention and in the sum (TLP attends over and sums
zero padding), and sequences are cut at 64 tokens (TLP: 25 steps of its own, longer, steps).
"""
from __future__ import annotations

from typing import Any, Sequence

import torch
from torch import Tensor, nn

from ..tokens import TOKEN_WIDTH, VOCAB
from .nn import Batch, CostNet, NeuralCostModel, length_mask, padded


def mlp(widths: Sequence[int], last_relu: bool) -> nn.Sequential:
    layers: list[nn.Module] = []
    for i, (a, b) in enumerate(zip(widths, widths[1:])):
        layers.append(nn.Linear(a, b))
        if last_relu or i < len(widths) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


class TLPNet(CostNet):
    def __init__(self, d_embed: int, hidden: Sequence[int], decoder: Sequence[int], heads: int,
                 res_blocks: int, max_tokens: int) -> None:
        super().__init__(("tokens",), max_tokens=max_tokens)
        self.kind_embed = nn.Embedding(len(VOCAB), d_embed, padding_idx=0)
        self.encoder = mlp([d_embed + TOKEN_WIDTH - 1, *hidden], last_relu=True)
        width = hidden[-1]
        self.attention = nn.MultiheadAttention(width, heads, batch_first=True)
        self.res = nn.ModuleList(nn.Sequential(nn.Linear(width, width), nn.ReLU())
                                 for _ in range(res_blocks))
        self.decoder = mlp([width, *decoder, 1], last_relu=False)

    def tokens(self, b: Batch) -> tuple[Tensor, Tensor]:
        """Per-token states (n, length, width) before the decoder, and the real-token mask."""
        rows = self.encoder(torch.cat([self.kind_embed(b.token_ids), b.token_vals], dim=1))
        length = int(b.n_tokens.max())
        x = padded(rows, b.token_prog, b.token_pos, b.n, length)
        mask = length_mask(b.n_tokens, length)
        # a program without tokens would attend to nothing (NaN): let it see its padding
        key_pad = ~mask & (b.n_tokens > 0).unsqueeze(1)
        x = self.attention(x, x, x, key_padding_mask=key_pad, need_weights=False)[0] + x
        for layer in self.res:
            x = layer(x) + x
        return x, mask

    def forward(self, b: Batch) -> Tensor:
        x, mask = self.tokens(b)
        return (self.decoder(x).squeeze(-1) * mask).sum(1)

    def embed(self, b: Batch) -> Tensor:
        """The mean token state: TLP decodes each token and sums, so it has no pooled state of
        its own; the mean of what the decoder reads stands in for one."""
        x, mask = self.tokens(b)
        m = mask.unsqueeze(-1).to(x.dtype)
        return (x * m).sum(1) / m.sum(1).clamp(min=1)


class TLPModel(NeuralCostModel):
    """TLP-style baseline over trace tokens. ``d_embed``: token-kind embedding width;
    ``hidden``: encoder widths; ``decoder``: decoder widths before the output; ``heads``:
    attention heads; ``res_blocks``: residual layers; ``max_tokens``: tokens read per program."""

    kind = "tlp"
    defaults = {"d_embed": 16, "hidden": (64, 128, 256, 256), "decoder": (256, 128, 64),
                "heads": 8, "res_blocks": 2, "max_tokens": 64, "batch_size": 1024}

    def build(self, config: dict[str, Any], device: torch.device) -> TLPNet:
        return TLPNet(config["d_embed"], tuple(config["hidden"]), tuple(config["decoder"]),
                      config["heads"], config["res_blocks"], config["max_tokens"])
