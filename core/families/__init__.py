"""Encoder families (docs/contributing.md): one module per family behind
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


def _find(config_or_model) -> tuple[Family | None, str]:
    config = getattr(config_or_model, "config", config_or_model)
    model_type = getattr(config, "model_type", "")
    return next((family for family in FAMILIES if model_type in family.model_types), None), model_type


def family_of(config_or_model) -> Family:
    """The family of a transformers config, or of a model (its .config)."""
    family, model_type = _find(config_or_model)
    if family is None:
        known = ", ".join(t for family in FAMILIES for t in family.model_types)
        raise ShrinkbertError(f"model_type '{model_type}' is not an encoder family the kit knows ({known})")
    return family


def base_prefixes() -> tuple[str, ...]:
    """Every family's base-model attribute (`Family.base_prefix`): what wraps the encoder in a task
    model's module paths and in its traced graph's node names."""
    return tuple(dict.fromkeys(family.base_prefix for family in FAMILIES))


def layer_group(parts: list[str]) -> str | None:
    """The user-facing group of a module path (split, base prefixes removed) inside the layers of the
    family it belongs to (`Family.layer_group`); None when no family's layers hold it."""
    for family in FAMILIES:
        group = family.layer_group(parts)
        if group is not None:
            return group
    return None


def next_sentence_prediction(config) -> bool:
    """Whether the config's family pre-trains with next-sentence prediction (BERT's objective alone); an
    unknown family does not (its masked-LM class continues it)."""
    family, _ = _find(config)
    return family is not None and family.pretraining_class is not None


def is_mlm(config) -> bool:
    """Whether a model config names a masked-LM model (it has an MLM head): a ForMaskedLM class, or a
    family's MLM + next-sentence pre-training class. ELECTRA's ElectraForPreTraining is the replaced-token
    discriminator, which has none."""
    pretraining = {family.pretraining_class for family in FAMILIES if family.pretraining_class}
    return any(a.endswith("ForMaskedLM") or a in pretraining for a in (config.architectures or []))


__all__ = ["FAMILIES", "Family", "Widths", "base_prefixes", "family_of", "is_mlm", "layer_group",
           "next_sentence_prediction"]
