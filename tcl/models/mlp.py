"""TenSet's MLP cost model (``SegmentSumMLPModule`` in TenSet's ``cost_model/mlp_model.py``):
each per-store row goes through a two-layer ReLU encoder, the encodings of a program's stores are
summed, and two residual ReLU layers and a linear decoder give the score. Trained with
LambdaRank, Adam lr 7e-4, weight decay 1e-6, 512 programs per batch, gradient clip 0.5, 50
epochs (TenSet's LambdaRank settings). TenSet's optional workload embedding (160 extra columns
per row) is not used: our tasks are ranked within themselves, which is what LambdaRank scores.
``features`` picks the view of the per-store rows (``tcl.features.feature_view``: raw,
size-normalised or both), saved in the model's config so predict reads the same view.
"""
from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from ..features import view_width
from .nn import Batch, CostNet, NeuralCostModel


class SegmentSumMLP(CostNet):
    def __init__(self, hidden: int, features: str = "raw") -> None:
        super().__init__(("stores",), features=features)
        self.segment_encoder = nn.Sequential(nn.Linear(view_width(features), hidden), nn.ReLU(),
                                             nn.Linear(hidden, hidden), nn.ReLU())
        self.l0 = nn.Sequential(nn.Linear(hidden, hidden), nn.ReLU())
        self.l1 = nn.Sequential(nn.Linear(hidden, hidden), nn.ReLU())
        self.decoder = nn.Linear(hidden, 1)

    def embed(self, b: Batch) -> Tensor:
        encoded = self.segment_encoder(b.stores)
        x = encoded.new_zeros(b.n, encoded.shape[1]).index_add_(0, b.store_prog, encoded)
        x = self.l0(x) + x
        return self.l1(x) + x

    def forward(self, b: Batch) -> Tensor:
        return self.decoder(self.embed(b)).squeeze(-1)


class TenSetMLP(NeuralCostModel):
    """TenSet-MLP baseline. ``hidden``: width of every layer (TenSet: 256); ``features``: the
    per-store view (raw: TenSet's)."""

    kind = "tenset-mlp"
    defaults = {"hidden": 256, "features": "raw"}

    def build(self, config: dict[str, Any], device: torch.device) -> SegmentSumMLP:
        return SegmentSumMLP(config["hidden"], config["features"])
