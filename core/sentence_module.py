"""A sentence embedder as one torch module: encoder inputs in, the sentence vector out.

`Embedder` (core/embedder.py) holds an encoder, its pooling, an optional projection and the
normalisation its folder declares. The stages that run, compare and export PyTorch models take a
module whose forward takes the encoder inputs (core/predict.encoder_inputs) and returns named
outputs; this is that module for the embedding kind (`EmbeddingKind.load_torch`). Its output is
"sentence_embedding", the name the exported graph gives it too.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers.utils import ModelOutput

OUTPUT = "sentence_embedding"


@dataclass
class SentenceOutput(ModelOutput):
    sentence_embedding: torch.FloatTensor | None = None


class SentenceEncoder(torch.nn.Module):
    """`embedder.forward` as a module: the encoder and projection are registered, so `.parameters()`,
    `.to()` and tracing see their weights."""

    def __init__(self, embedder):
        super().__init__()
        self.embedder = embedder
        self.model, self.dense = embedder.model, embedder.dense
        self.config = embedder.model.config

    def forward(self, input_ids, attention_mask, token_type_ids=None) -> SentenceOutput:
        batch = {"input_ids": input_ids, "attention_mask": attention_mask}
        if token_type_ids is not None:
            batch["token_type_ids"] = token_type_ids
        return SentenceOutput(sentence_embedding=self.embedder.forward(batch))
