"""A convolutional student over token embeddings (Kim, 2014): filters of several widths, ReLU, max
pooling over the real tokens, an MLP head.

A filter of width k sees k//2 tokens before a position and (k-1)//2 after (the convolution's own zero
padding at the ends); pads are zeroed before the convolution, so a row's features are the same in a
padded batch as alone.
"""
from __future__ import annotations

import torch
from torch import nn

from shrinkbert.core.compact.base import CompactConfig, CompactForSequenceClassification


class CNNConfig(CompactConfig):
    model_type = "shrinkbert-cnn"

    def __init__(self, kernel_sizes: tuple[int, ...] | list[int] = (3, 4, 5), **kwargs):
        self.kernel_sizes = list(kernel_sizes)  # hidden_size is the number of filters of each width
        super().__init__(**kwargs)


class CNNForSequenceClassification(CompactForSequenceClassification):
    config_class = CNNConfig

    def build_encoder(self, config, input_width: int, layers: int) -> nn.Module:
        # one layer of filters (a student has one; ESIM's composition adds one over the joined states)
        return nn.ModuleList(nn.Conv1d(input_width, config.hidden_size, width, padding=width // 2)
                             for width in config.kernel_sizes)

    def feature_width(self, config) -> int:
        return config.hidden_size * len(config.kernel_sizes)

    def encode(self, encoder: nn.Module, inputs: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        channels = inputs.transpose(1, 2)  # [B, W, L]
        length = channels.shape[-1]
        # an even width's symmetric padding gives one position more than L: the last is dropped
        maps = [torch.relu(conv(channels)[..., :length]) for conv in encoder]
        return torch.cat(maps, 1).transpose(1, 2)  # [B, L, filters x widths]
