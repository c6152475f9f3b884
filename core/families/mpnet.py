"""MPNet: BERT's layer under other names (attention.attn.q/k/v/o) with a relative-position bias per
head shared across layers (encoder.relative_attention_bias) and no token types. all-mpnet-base-v2 is
this family."""
from __future__ import annotations

from shrinkbert.core.families.base import Family, Layout


class MPNetFamily(Family):
    name = "MPNet"
    model_types = ("mpnet",)
    base_prefix = "mpnet"
    layout = Layout(query="attention.attn.q", key="attention.attn.k", value="attention.attn.v",
                    attention_out="attention.attn.o", attention_norm="attention.LayerNorm", token_type=None,
                    head_tables=("encoder.relative_attention_bias",))
    # The relative-position bias is computed once for all layers with a column per head, so a layer
    # with fewer heads than the others no longer fits it: pruning removes FFN neurons only.
    prunes_heads = False
