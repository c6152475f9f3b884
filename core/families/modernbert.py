"""ModernBERT: pre-norm layers with fused Q/K/V (attn.Wqkv), a gated FFN (mlp.Wi holds both halves),
rotary positions and local/global attention every n layers; layers under `layers`, no token types."""
from __future__ import annotations

from shrinkbert.core.families.base import Family


class ModernBertFamily(Family):
    name = "ModernBERT"
    model_types = ("modernbert",)
    base_prefix = "model"
    layers_path = "layers"
    sublayer_groups = {"attn": "attention", "mlp.Wi": "intermediate", "mlp.Wo": "output"}
    ffn_matrices = 3  # mlp.Wi: hidden -> 2 x intermediate (gate and value), mlp.Wo: intermediate -> hidden
