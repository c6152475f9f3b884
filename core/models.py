"""Loading models and tokenizers safely: safetensors only, no remote code, clear errors."""
from __future__ import annotations

from pathlib import Path

from shrinkbert.core.errors import ShrinkbertError
from shrinkbert.core.verify import verify_artifact

PICKLE_WEIGHTS = ("pytorch_model.bin", "tf_model.h5", "flax_model.msgpack", "model.pt", "model.ckpt")
CONVERT_HINT = ("convert it to safetensors where you trust it: "
                "python -c \"import torch,safetensors.torch as s; "
                "s.save_file(torch.load('pytorch_model.bin', weights_only=True), 'model.safetensors')\"")


def check_model_dir(path: str | Path) -> Path:
    """Fail with one clear line unless `path` is a transformers directory with safetensors weights."""
    path = Path(path)
    if not path.exists():
        raise ShrinkbertError(f"model directory {path} does not exist")
    if not path.is_dir():
        raise ShrinkbertError(f"{path} is a file, not a model directory")
    if not (path / "config.json").is_file():
        raise ShrinkbertError(f"{path} is not a model directory (no config.json)")
    if not any(path.glob("*.safetensors")):
        pickled = [name for name in PICKLE_WEIGHTS if (path / name).exists()]
        if pickled:
            raise ShrinkbertError(f"{path / pickled[0]} is a pickle checkpoint and is refused; {CONVERT_HINT}")
        raise ShrinkbertError(f"{path} has no model.safetensors weights")
    verify_artifact(path)
    return path


def load_model(model_cls, path: str | Path, **kwargs):
    """`model_cls.from_pretrained` restricted to safetensors, with errors turned into one line."""
    from shrinkbert.core.compact import register

    path = check_model_dir(path)
    register()  # a compact student's config type (core/compact) is then known to the Auto classes
    try:
        return model_cls.from_pretrained(path, use_safetensors=True, trust_remote_code=False, **kwargs)
    except ShrinkbertError:
        raise
    except (OSError, ValueError, RuntimeError, KeyError) as err:
        first_line = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ShrinkbertError(f"cannot load model from {path}: {first_line}") from None
    except Exception as err:  # safetensors raises its own SafetensorError type
        if type(err).__name__ == "SafetensorError":
            raise ShrinkbertError(f"cannot load model from {path}: corrupt or truncated safetensors ({err})") from None
        raise


def load_config(path: str | Path):
    """`AutoConfig.from_pretrained(path)`, with the compact students' config types (core/compact) known."""
    from transformers import AutoConfig

    from shrinkbert.core.compact import register

    register()
    return AutoConfig.from_pretrained(str(path))


def load_tokenizer(path: str | Path, model_config=None):
    """Load a fast tokenizer; refuse one whose vocabulary is larger than the model's embeddings."""
    from transformers import AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(str(path), use_fast=True, trust_remote_code=False)
    except (OSError, ValueError) as err:
        raise ShrinkbertError(f"cannot load tokenizer from {path}: {str(err).splitlines()[0]}") from None
    if model_config is not None and len(tokenizer) > model_config.vocab_size:
        raise ShrinkbertError(
            f"tokenizer in {path} has {len(tokenizer)} tokens but the model's embeddings hold "
            f"{model_config.vocab_size}: they do not belong together")
    return tokenizer


def count_parameters(model) -> int:
    return sum(p.numel() for p in model.parameters())
