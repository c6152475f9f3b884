"""DistilBERT: BERT's layer under other names (transformer.layer, q_lin/k_lin/v_lin/out_lin, ffn.lin1/lin2),
no token types, and config fields of its own (n_layers, dim, n_heads, hidden_dim)."""
from __future__ import annotations

from shrinkbert.core.families.base import Family, Layout


class DistilBertFamily(Family):
    name = "DistilBERT"
    model_types = ("distilbert",)
    base_prefix = "distilbert"
    layers_path = "transformer.layer"
    sublayer_groups = {"attention": "attention", "ffn.lin1": "intermediate", "ffn.lin2": "output"}
    config_fields = {"layers": "n_layers", "hidden": "dim", "heads": "n_heads", "intermediate": "hidden_dim"}
    ort_fusion = "bert"
    layout = Layout(query="attention.q_lin", key="attention.k_lin", value="attention.v_lin",
                    attention_out="attention.out_lin", attention_norm="sa_layer_norm", ffn_in="ffn.lin1",
                    ffn_out="ffn.lin2", ffn_norm="output_layer_norm", token_type=None)
