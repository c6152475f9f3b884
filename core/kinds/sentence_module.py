"""A sentence embedder as one torch module: encoder inputs in, the sentence vector out.

`Embedder` (core/kinds/embedder.py) holds an encoder, its pooling, an optional projection and the
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
    `.to()` and tracing see their weights. It answers what the stages ask of a transformers model:
    `config` (the encoder's), the encoder under `base_model_prefix` (where pruning finds the layers),
    `prune_heads`, and `save_pretrained`, which writes the sentence-transformers folder."""

    base_model_prefix = "model"

    def __init__(self, embedder):
        super().__init__()
        self.embedder = embedder
        self.model, self.dense = embedder.model, embedder.dense
        self.config = embedder.model.config

    @property
    def base_model(self):
        return self.model

    def prune_heads(self, heads: dict[int, list[int]]) -> None:
        self.model.prune_heads(heads)

    def save_pretrained(self, out_dir, safe_serialization: bool = True) -> None:
        """The encoder's files, then modules.json, the pooling folder and the projection (if any)."""
        from shrinkbert.core.kinds.embedder import write_st_layout

        self.model.save_pretrained(out_dir, safe_serialization=safe_serialization)
        write_st_layout(out_dir, self.embedder.spec, self.config.hidden_size, self.embedder.max_length,
                        dense=self.dense)

    def forward(self, input_ids, attention_mask, token_type_ids=None, pair_input_ids=None, pair_attention_mask=None,
                pair_token_type_ids=None, negative_input_ids=None, negative_attention_mask=None,
                negative_token_type_ids=None) -> SentenceOutput:
        """The sentences' vectors; with a pair's second sentences (pair_*: the embedding kind's `tokenize`
        of scored or entailment pairs) and their contradicting ones (negative_*: NLI triplets), the first
        sentences' vectors, then the second's, then the third's: [2B or 3B, dim], one forward for all."""
        sides = [(input_ids, attention_mask, token_type_ids),
                 (pair_input_ids, pair_attention_mask, pair_token_type_ids),
                 (negative_input_ids, negative_attention_mask, negative_token_type_ids)]
        sides = [side for side in sides if side[0] is not None]
        names = ("input_ids", "attention_mask", "token_type_ids")
        if len(sides) == 1:  # one text each (the exported graph's trace): the inputs as they are
            batch = {name: value for name, value in zip(names, sides[0]) if value is not None}
        else:
            width = max(side[0].shape[1] for side in sides)  # padded to one length
            fills = (self.config.pad_token_id or 0, 0, 0)
            batch = {name: torch.cat([torch.nn.functional.pad(side[i], (0, width - side[i].shape[1]), value=fills[i])
                                      for side in sides])
                     for i, name in enumerate(names) if all(side[i] is not None for side in sides)}
        return SentenceOutput(sentence_embedding=self.embedder.forward(batch))
