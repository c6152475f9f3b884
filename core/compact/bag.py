"""A static bag student: the mean of its token vectors (model2vec's sentence vector), an MLP head.

No token sees another, so it costs a table lookup and a mean per text: the fastest student, and the
one whose token vectors carry everything it knows.
"""
from __future__ import annotations

import torch
from torch import nn

from shrinkbert.core.compact.base import CompactConfig, CompactForSequenceClassification


class BagConfig(CompactConfig):
    model_type = "shrinkbert-bag"

    def __init__(self, pooling: str = "mean", **kwargs):
        super().__init__(pooling=pooling, **kwargs)


class BagForSequenceClassification(CompactForSequenceClassification):
    config_class = BagConfig

    def build_encoder(self, config, input_width: int, layers: int) -> nn.Module:
        return nn.Identity()

    def feature_width(self, config) -> int:
        return config.embedding_dim

    def encode(self, encoder: nn.Module, inputs: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return inputs
