"""Encoder families (../shared/DESIGN.md, "Encoder families"): one module per family behind
core/families/base.py's interface; `family_of` is the only place a model_type is read."""
from __future__ import annotations

from shrinkbert.core.errors import ShrinkbertError
from shrinkbert.core.families.base import Family, Widths
from shrinkbert.core.families.bert import BertFamily, ElectraFamily, RobertaFamily
from shrinkbert.core.families.deberta import DebertaFamily
from shrinkbert.core.families.distilbert import DistilBertFamily
from shrinkbert.core.families.modernbert import ModernBertFamily
from shrinkbert.core.families.mpnet import MPNetFamily

FAMILIES: tuple[Family, ...] = (BertFamily(), RobertaFamily(), DistilBertFamily(), DebertaFamily(), ElectraFamily(),
                                MPNetFamily(), ModernBertFamily())


def family_of(config_or_model) -> Family:
    """The family of a transformers config, or of a model (its .config)."""
    config = getattr(config_or_model, "config", config_or_model)
    model_type = getattr(config, "model_type", "")
    for family in FAMILIES:
        if model_type in family.model_types:
            return family
    known = ", ".join(t for family in FAMILIES for t in family.model_types)
    raise ShrinkbertError(f"model_type '{model_type}' is not an encoder family the kit knows ({known})")


__all__ = ["FAMILIES", "Family", "Widths", "family_of"]
