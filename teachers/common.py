"""Helpers the teacher stages share: finding a starting model, padding batches."""
from __future__ import annotations

from pathlib import Path

import torch

from shrinkbert.core.builtin import resolve_model
from shrinkbert.core.errors import ShrinkbertError

PAD_VALUES = {"labels": -100, "token_type_ids": 0, "attention_mask": 0, "special_tokens_mask": 1}


def resolve_model_dir(name_or_path: str) -> Path:
    """A local model directory for "minilm", a directory, or a hub name (safetensors files only)."""
    resolved = resolve_model(name_or_path)
    if Path(resolved).is_dir():
        return Path(resolved)
    looks_like_path = resolved.startswith((".", "/", "~")) or resolved.count("/") > 1 or not resolved.strip()
    if looks_like_path:
        raise ShrinkbertError(f"model directory {name_or_path} does not exist")
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(resolved, allow_patterns=["*.json", "*.safetensors", "*.txt", "*.model"]))
    except Exception as err:  # offline, unknown repo, no access
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ShrinkbertError(f"model '{name_or_path}' is neither a local directory nor reachable on the hub "
                              f"({first})") from None


def pad_collate(pad_token_id: int):
    """collate_fn padding every list-valued feature to the longest in the batch (dynamic padding)."""

    def collate(features: list[dict]) -> dict[str, torch.Tensor]:
        batch = {}
        for key in features[0]:
            values = [f[key] for f in features]
            if isinstance(values[0], (list, tuple)):
                width = max(len(v) for v in values)
                pad = pad_token_id if key.endswith("input_ids") else PAD_VALUES.get(key, 0)  # a pair's too
                batch[key] = torch.tensor([list(v) + [pad] * (width - len(v)) for v in values], dtype=torch.long)
            else:
                batch[key] = torch.tensor(values)
        return batch

    return collate
