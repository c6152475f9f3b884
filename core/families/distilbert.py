"""DistilBERT: BERT's layer in other names (transformer.layer, q_lin/k_lin/v_lin/out_lin, ffn.lin1/lin2),
no token types, and config fields of its own (n_layers, dim, n_heads, hidden_dim)."""
from __future__ import annotations

from shrinkbert.core.families.base import Family


class DistilBertFamily(Family):
    name = "DistilBERT"
    model_types = ("distilbert",)
    layers_path = "transformer.layer"
    config_fields = {"layers": "n_layers", "hidden": "dim", "heads": "n_heads", "intermediate": "hidden_dim"}
    ort_fusion = "bert"
