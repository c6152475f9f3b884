"""Students that are not transformers: a BiLSTM (bilstm.py), a CNN over token embeddings (cnn.py) and a
bag of token vectors with an MLP head (bag.py), for sequence classification of one text or a pair; what
they share (pooling, the pair's features, the head) is base.py's.

Each is a `transformers.PreTrainedModel` with a config of its own `model_type` ("shrinkbert-bilstm",
...), registered with `AutoConfig` and `AutoModelForSequenceClassification` by `register()`, so an artifact
loads with `AutoModelForSequenceClassification.from_pretrained(path)` and no remote code. They read the
teacher's token ids (its tokenizer ships with them) and take `input_ids` and `attention_mask`, as an
encoder does, so distillation, ONNX export, int8, bundles and reports take them as they take a
transformer student.

    from shrinkbert.core.compact import build_config, register
    register()
    config = build_config("bilstm", vocab_size=30522, num_labels=2, embedding_dim=256)
"""
from __future__ import annotations

ARCHITECTURES = ("bilstm", "cnn", "bag")
# a pair student's switches (config fields and distill options) and the word a frontier shape writes each with
# (bilstm/H150/align/compose), in the order they are written
PAIR_SWITCHES = (("cross_attention", "align"), ("composition", "compose"))
MODEL_TYPES = {f"shrinkbert-{name}": name for name in ARCHITECTURES}

_REGISTERED = False


def register() -> None:
    """Make the compact configs and models known to transformers' Auto classes (once a process)."""
    global _REGISTERED
    if _REGISTERED:
        return
    from transformers import AutoConfig, AutoModelForSequenceClassification

    for model_class in model_classes().values():
        AutoConfig.register(model_class.config_class.model_type, model_class.config_class, exist_ok=True)
        AutoModelForSequenceClassification.register(model_class.config_class, model_class, exist_ok=True)
    _REGISTERED = True


def is_compact(config_or_model) -> bool:
    """Whether a config (or a model, or a config.json's dict) is one of the compact students'."""
    config = getattr(config_or_model, "config", config_or_model)
    model_type = config.get("model_type") if isinstance(config, dict) else getattr(config, "model_type", "")
    return model_type in MODEL_TYPES


def is_compact_folder(path) -> bool:
    """Whether the folder `path` holds a saved compact student, read from its config.json alone (no
    transformers import)."""
    import json
    from pathlib import Path

    config = Path(path).expanduser() / "config.json" if path else None
    return bool(config and config.is_file()) and is_compact(json.loads(config.read_text(encoding="utf-8")))


def build_config(architecture: str, **values):
    """A new compact student's config: `architecture` one of ARCHITECTURES, `values` its fields."""
    register()
    return model_classes()[architecture].config_class(**values)


def model_classes() -> dict:
    """{architecture: its ...ForSequenceClassification class} (deferred: torch and transformers load here)."""
    from shrinkbert.core.compact.bag import BagForSequenceClassification
    from shrinkbert.core.compact.bilstm import BiLSTMForSequenceClassification
    from shrinkbert.core.compact.cnn import CNNForSequenceClassification

    return {"bilstm": BiLSTMForSequenceClassification, "cnn": CNNForSequenceClassification,
            "bag": BagForSequenceClassification}
