"""A bidirectional LSTM student (Tang et al., 2019): one or more layers, max (or mean) pooling, an MLP head.

Each direction is its own forward LSTM; the backward one reads every row reversed within its real
length, so the pads that follow a row in a batch never reach its real positions (an LSTM that ran
backwards over the padded row would start from them). This runs as two ONNX LSTM nodes a layer.
"""
from __future__ import annotations

import torch
from torch import nn

from shrinkbert.core.compact.base import CompactConfig, CompactForSequenceClassification


class BiLSTMConfig(CompactConfig):
    model_type = "shrinkbert-bilstm"


def reversed_within_length(mask: torch.Tensor) -> torch.Tensor:
    """[B, L] indices that reverse each row's first sum(mask) positions and leave the rest in place
    (it is its own inverse)."""
    lengths = mask.long().sum(1, keepdim=True)
    positions = torch.arange(mask.shape[1], device=mask.device).unsqueeze(0).expand_as(mask)
    return torch.where(positions < lengths, lengths - 1 - positions, positions)


def _gather_positions(states: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    return torch.gather(states, 1, index.unsqueeze(-1).expand(-1, -1, states.shape[-1]))


class BiLSTMForSequenceClassification(CompactForSequenceClassification):
    config_class = BiLSTMConfig

    def build_encoder(self, config, input_width: int, layers: int) -> nn.Module:
        stack = nn.ModuleList()
        width = input_width
        for _ in range(layers):
            stack.append(nn.ModuleList([nn.LSTM(width, config.hidden_size, batch_first=True),
                                         nn.LSTM(width, config.hidden_size, batch_first=True)]))
            width = 2 * config.hidden_size
        return stack

    def feature_width(self, config) -> int:
        return 2 * config.hidden_size

    def _init_weights(self, module):
        super()._init_weights(module)
        if isinstance(module, nn.LSTM):
            for name, weight in module.named_parameters():
                if "bias" in name:
                    nn.init.zeros_(weight)
                    hidden = weight.shape[0] // 4
                    weight.data[hidden:2 * hidden] = 1.0  # forget-gate bias 1 (Jozefowicz et al.): remember by default
                elif "weight_hh" in name:
                    nn.init.orthogonal_(weight)
                else:
                    nn.init.xavier_uniform_(weight)

    def encode(self, encoder: nn.Module, inputs: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        backwards = reversed_within_length(mask)
        states = inputs
        for forward_lstm, backward_lstm in encoder:
            ahead, _ = forward_lstm(states)
            behind, _ = backward_lstm(_gather_positions(states, backwards))
            states = self.dropout(torch.cat([ahead, _gather_positions(behind, backwards)], -1))
        return states
