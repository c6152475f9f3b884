"""What the compact students share: the config's common fields, the token embeddings, pooling over the
real tokens (of each text of a pair), the pair's features and the MLP head.

A student reads `input_ids` and `attention_mask` (right-padded, as the teacher's tokenizer writes them).
Padding never reaches a real token's features: pads are zeroed before the encoder and left out of
pooling, and each encoder keeps its real positions independent of what follows them, so a text gives
the same logits alone and in a padded batch. A pair is told apart by the separator token, not by
token_type_ids, which some families' tokenizers do not write: tokens after the first separator are the
second text's.

With `cross_attention` (a pair student), each token of one text also reads the other text: its soft
alignment, the attention-weighted mean of the other text's states (dot-product scores), joined as ESIM
joins them (Chen et al., 2017: [s, a, s - a, s * a]) and projected back to the encoder's width before
pooling. A text read apart sees the other only through the pair's features; aligned, it can match word
with word. With `composition` too, one more layer of the architecture's own encoder reads the joined
states before pooling (ESIM's inference composition), so what was matched is read in context.
"""
from __future__ import annotations

import torch
from torch import nn
from transformers import PretrainedConfig, PreTrainedModel
from transformers.modeling_outputs import SequenceClassifierOutput

POOLINGS = ("max", "mean", "max-mean")


class CompactConfig(PretrainedConfig):
    """Fields every compact student has; each architecture's config adds its own."""

    def __init__(self, vocab_size: int = 30522, embedding_dim: int = 256, hidden_size: int = 256,
                 num_hidden_layers: int = 1, pooling: str = "max", pair: bool = False, classifier_hidden: int = 256,
                 dropout: float = 0.1, cross_attention: bool = False, composition: bool = False,
                 sep_token_id: int | None = 102, pad_token_id: int = 0, **kwargs):
        if pooling not in POOLINGS:
            raise ValueError(f"pooling must be one of {', '.join(POOLINGS)}, got {pooling!r}")
        self.vocab_size = vocab_size
        self.embedding_dim = embedding_dim
        self.hidden_size = hidden_size          # the encoder's width per position (one direction of an LSTM)
        self.num_hidden_layers = num_hidden_layers
        self.pooling = pooling
        self.pair = pair                        # two texts a row: features [a, b, a*b, |a-b|]
        self.classifier_hidden = classifier_hidden
        self.dropout = dropout
        self.cross_attention = cross_attention  # a pair's tokens aligned with the other text's (ESIM)
        self.composition = composition  # (with cross_attention) an encoder layer over the joined states (ESIM)
        super().__init__(pad_token_id=pad_token_id, sep_token_id=sep_token_id, **kwargs)


def masked_pool(states: torch.Tensor, mask: torch.Tensor, how: str) -> torch.Tensor:
    """[B, F] (x2 for max-mean) from [B, L, F] over the positions where mask is 1; an empty row gives 0."""
    weights = mask.unsqueeze(-1).to(states.dtype)
    count = weights.sum(1)
    parts = []
    if how in ("max", "max-mean"):
        filled = states.masked_fill(weights == 0, -1e4)
        parts.append(torch.where(count > 0, filled.max(1).values, torch.zeros_like(count)))
    if how in ("mean", "max-mean"):
        parts.append((states * weights).sum(1) / count.clamp(min=1))
    return torch.cat(parts, -1) if len(parts) > 1 else parts[0]


def text_masks(input_ids: torch.Tensor, mask: torch.Tensor, sep_token_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(first text's positions, second text's) of a pair row: [CLS] a [SEP] b [SEP] (or MPNet's
    <s> a </s></s> b </s>); separators belong to neither but the first text's own."""
    is_sep = input_ids == sep_token_id
    seps_before = torch.cumsum(is_sep.long(), dim=1) - is_sep.long()
    real = mask.bool()
    return real & (seps_before == 0), real & (seps_before >= 1) & ~is_sep


def aligned_with_other_text(states: torch.Tensor, first: torch.Tensor, second: torch.Tensor) -> torch.Tensor:
    """[B, L, F]: each token's attention-weighted mean of the other text's states (scores: scaled dot
    products); 0 at positions in neither text (the separators, pads), so padding changes nothing."""
    other = ((first.unsqueeze(2) & second.unsqueeze(1)) | (second.unsqueeze(2) & first.unsqueeze(1))).to(states.dtype)
    scores = states @ states.transpose(1, 2) / states.shape[-1] ** 0.5
    # a query with no key (a separator, a pad, a pair's empty text) softmaxes over nothing real: the
    # product with `other` zeroes it, as it zeroes what the fill left on positions of its own text
    weights = torch.softmax(scores.masked_fill(other == 0, -1e4), -1) * other
    return weights @ states


class CompactForSequenceClassification(PreTrainedModel):
    """Token embeddings -> `encode` (each architecture's) -> pooling -> MLP head."""

    config_class = CompactConfig
    base_model_prefix = "compact"
    main_input_name = "input_ids"
    _supports_sdpa = True  # no attention: any attn_implementation a runner asks for means the same model

    def __init__(self, config: CompactConfig):
        super().__init__(config)
        self.embeddings = nn.Embedding(config.vocab_size, config.embedding_dim, padding_idx=config.pad_token_id)
        self.encoder = self.build_encoder(config, config.embedding_dim, config.num_hidden_layers)
        width = self.feature_width(config)
        aligned = config.pair and config.cross_attention
        if config.composition and not aligned:
            raise ValueError("composition reads a pair's aligned states: it needs pair and cross_attention")
        # ESIM's join of a token's state and its alignment, back to the encoder's width
        self.compose = nn.Linear(4 * width, width) if aligned else None
        self.composition = self.build_encoder(config, width, 1) if config.composition else None
        features = width * (2 if config.pooling == "max-mean" else 1) * (4 if config.pair else 1)
        self.dropout = nn.Dropout(config.dropout)
        self.pre_classifier = nn.Linear(features, config.classifier_hidden)
        self.classifier = nn.Linear(config.classifier_hidden, config.num_labels)
        self.post_init()

    # -- what an architecture defines ---------------------------------------------------------------
    def build_encoder(self, config, input_width: int, layers: int) -> nn.Module:
        """An encoder of `layers` layers reading `input_width` features a position, giving feature_width."""
        raise NotImplementedError

    def feature_width(self, config) -> int:
        """Features per position that `encode` gives."""
        raise NotImplementedError

    def encode(self, encoder: nn.Module, inputs: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """[B, L, feature_width] from `encoder` (one build_encoder made) over the pad-zeroed inputs [B, L, W]
        and the mask [B, L]."""
        raise NotImplementedError

    # -- shared -----------------------------------------------------------------------------------
    def _init_weights(self, module):
        if isinstance(module, nn.Linear):
            nn.init.xavier_uniform_(module.weight)
            nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, std=0.1)

    def get_input_embeddings(self) -> nn.Embedding:
        return self.embeddings

    def set_input_embeddings(self, value: nn.Embedding) -> None:
        self.embeddings = value

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                labels: torch.Tensor | None = None, output_hidden_states: bool | None = None,
                output_attentions: bool | None = None, return_dict: bool | None = None) -> SequenceClassifierOutput:
        # output_hidden_states / output_attentions: taken as a transformer takes them; there are none to give.
        # No token_type_ids: a pair's texts are told apart by the separator (text_masks).
        mask = attention_mask if attention_mask is not None else torch.ones_like(input_ids)
        embedded = self.dropout(self.embeddings(input_ids) * mask.unsqueeze(-1).to(self.embeddings.weight.dtype))
        states = self.encode(self.encoder, embedded, mask)
        how = self.config.pooling
        if self.config.pair:
            first, second = text_masks(input_ids, mask, self.config.sep_token_id)
            if self.compose is not None:
                aligned = aligned_with_other_text(states, first, second)
                states = self.dropout(torch.relu(self.compose(
                    torch.cat([states, aligned, states - aligned, states * aligned], -1))))
                if self.composition is not None:  # pads zeroed again: the projection's bias is not 0 there
                    states = self.encode(self.composition, states * mask.unsqueeze(-1).to(states.dtype), mask)
            a, b = masked_pool(states, first, how), masked_pool(states, second, how)
            pooled = torch.cat([a, b, a * b, (a - b).abs()], -1)
        else:
            pooled = masked_pool(states, mask, how)
        logits = self.classifier(self.dropout(torch.relu(self.pre_classifier(self.dropout(pooled)))))
        loss = nn.functional.cross_entropy(logits, labels) if labels is not None else None
        return SequenceClassifierOutput(loss=loss, logits=logits)
