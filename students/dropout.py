"""The student's dropout while it distils, whatever its family calls it (`distill --dropout`).

Dropout lives in two places in a transformers encoder: `nn.Dropout` modules (hidden states, attention
probabilities in eager attention, the classifier) and plain floats that attention modules hand to
SDPA (BERT's `dropout_prob`, DistilBERT's and ModernBERT's `attention_dropout`; DeBERTa's StableDropout
keeps `drop_prob`). Setting the modules, not the config, leaves the saved config.json as the family
wrote it: a user who fine-tunes the student later gets the family's dropout back.
"""
from __future__ import annotations

from typing import Callable

from torch import nn


def _is_dropout_float(name: str, value) -> bool:
    return isinstance(value, float) and ("dropout" in name or name == "drop_prob")


def override_dropout(model: nn.Module, probability: float) -> Callable[[], None]:
    """Set every dropout probability in `model` to `probability`; returns the function that restores them."""
    saved: list[tuple[nn.Module, str, float]] = []
    for module in model.modules():
        names = ["p"] if isinstance(module, nn.Dropout) else []
        names += [name for name, value in vars(module).items() if _is_dropout_float(name, value)]
        for name in names:
            saved.append((module, name, getattr(module, name)))
            setattr(module, name, probability)

    def restore() -> None:
        for module, name, value in saved:
            setattr(module, name, value)

    return restore
