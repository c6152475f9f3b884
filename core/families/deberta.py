"""DeBERTa-v2/v3: disentangled attention with relative-position projections shared across layers
(encoder.rel_embeddings), so a student from the teacher keeps its widths and takes fewer layers."""
from __future__ import annotations

from shrinkbert.core.families.base import Family, Widths


class DebertaFamily(Family):
    name = "DeBERTa-v2/v3"
    model_types = ("deberta-v2",)
    base_prefix = "deberta"

    def extra_student_fields(self, teacher_config, widths: Widths) -> dict:
        # The pooler has its own width field; it follows the hidden size unless the teacher set it apart.
        if getattr(teacher_config, "pooler_hidden_size", teacher_config.hidden_size) == teacher_config.hidden_size:
            return {"pooler_hidden_size": widths.hidden}
        return {}
