"""MPNet: BERT-like layers (attention.attn.q/k/v/o) with a relative-position bias shared across layers
(encoder.relative_attention_bias) and no token types. all-mpnet-base-v2 is this family."""
from __future__ import annotations

from shrinkbert.core.families.base import Family


class MPNetFamily(Family):
    name = "MPNet"
    model_types = ("mpnet",)
