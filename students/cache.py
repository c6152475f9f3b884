"""Teacher-output caching: run the teacher over a tokenized dataset once, reuse it in every run.

What is stored: the teacher's logits (fp32) for every row and, when asked, chosen hidden states
(fp16, only each row's real tokens, packed end to end with row offsets), in one safetensors
file named by a key over: the teacher artifact's hash, the dataset's content (token ids and
token types of every row, in order), max_length and the hidden layers stored. Change any of them
and the key changes; nothing is ever reused across teachers or tokenizations.

Attention probabilities are not cached ([heads, L, L] per row is too big): with an attention
loss the teacher runs live. With cached logits only, distillation never runs the teacher.

The teacher runs in eval mode (no dropout), so cached outputs equal the live ones up to
padding-dependent float noise (and fp16 rounding for hidden states).
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import numpy as np
import torch

from shrinkbert.core.artifacts import artifact_hash, is_artifact, read_manifest

ROW_INDEX = "row_idx"
FORMAT_VERSION = 1


def teacher_identity(teacher_dir: str | Path) -> str:
    teacher_dir = Path(teacher_dir)
    if is_artifact(teacher_dir):
        recorded = read_manifest(teacher_dir).get("hash")
        if recorded:
            return recorded
    return artifact_hash(teacher_dir)


def dataset_fingerprint(dataset) -> str:
    """sha256 over every row's input_ids and token_type_ids (content, not the datasets fingerprint)."""
    digest = hashlib.sha256()
    columns = [c for c in ("input_ids", "token_type_ids") if c in dataset.column_names]
    for column in columns:
        for row in dataset[column]:
            digest.update(np.asarray(row, dtype=np.int32).tobytes())
            digest.update(b"|")
    digest.update(str(len(dataset)).encode())
    return digest.hexdigest()


def cache_key(teacher_dir, dataset, max_length: int, hidden_layers=()) -> str:
    parts = {"v": FORMAT_VERSION, "teacher": teacher_identity(teacher_dir), "data": dataset_fingerprint(dataset),
             "max_length": int(max_length), "hidden": sorted(int(i) for i in hidden_layers)}
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:24]


class TeacherCache:
    """Cached teacher outputs, looked up per batch by the rows' indices."""

    def __init__(self, logits: torch.Tensor, hidden: dict[int, torch.Tensor] | None = None,
                 offsets: torch.Tensor | None = None, key: str = ""):
        self.logits = logits
        self.hidden = hidden or {}
        self.offsets = offsets
        self.key = key

    @property
    def hidden_layers(self) -> list[int]:
        return sorted(self.hidden)

    def __len__(self) -> int:
        return self.logits.shape[0]

    def lookup(self, row_idx: torch.Tensor, seq_len: int, device=None) -> dict:
        """{"logits": [B, C], "hidden_states": {layer: [B, seq_len, H] fp32, zero past each row's end}}."""
        idx = row_idx.detach().cpu().long()
        out = {"logits": self.logits[idx].float()}
        if self.hidden:
            out["hidden_states"] = {}
            for layer, flat in self.hidden.items():
                padded = torch.zeros(len(idx), seq_len, flat.shape[-1], dtype=torch.float32)
                for b, row in enumerate(idx.tolist()):
                    start, end = int(self.offsets[row]), int(self.offsets[row + 1])
                    n = min(end - start, seq_len)
                    padded[b, :n] = flat[start:start + n].float()
                out["hidden_states"][layer] = padded
        if device is not None:
            out["logits"] = out["logits"].to(device)
            out.get("hidden_states", {}).update(
                {k: v.to(device) for k, v in out.get("hidden_states", {}).items()})
        return out

    def save(self, path: str | Path) -> Path:
        from safetensors.torch import save_file

        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tensors = {"logits": self.logits.contiguous()}
        for layer, flat in self.hidden.items():
            tensors[f"hidden.{layer}"] = flat.contiguous()
        if self.offsets is not None:
            tensors["offsets"] = self.offsets.contiguous()
        tmp = path.with_name(path.name + f".tmp-{os.getpid()}")
        save_file(tensors, str(tmp), metadata={"key": self.key, "format": str(FORMAT_VERSION)})
        os.replace(tmp, path)
        return path

    @classmethod
    def load(cls, path: str | Path) -> "TeacherCache":
        from safetensors import safe_open

        with safe_open(str(path), framework="pt") as handle:
            key = (handle.metadata() or {}).get("key", "")
            tensors = {name: handle.get_tensor(name) for name in handle.keys()}
        hidden = {int(name.split(".", 1)[1]): t for name, t in tensors.items() if name.startswith("hidden.")}
        return cls(tensors["logits"], hidden, tensors.get("offsets"), key)


@torch.no_grad()
def compute_teacher_outputs(teacher, dataset, collate_fn, hidden_layers=(), batch_size: int = 64,
                            key: str = "", log=print) -> TeacherCache:
    """Run the teacher (eval mode) over `dataset` in order; rows must carry ROW_INDEX = position."""
    from torch.utils.data import DataLoader

    teacher.eval()
    device = next(teacher.parameters()).device
    hidden_layers = sorted(int(i) for i in hidden_layers)
    logits_parts, hidden_parts, lengths = [], {i: [] for i in hidden_layers}, []
    from tqdm.auto import tqdm

    loader = DataLoader(dataset, batch_size=batch_size, shuffle=False, collate_fn=collate_fn)
    for batch in tqdm(loader, desc="teacher outputs", unit="batch", leave=False):
        inputs = {k: v.to(device) for k, v in batch.items()
                  if k in ("input_ids", "attention_mask", "token_type_ids")}
        out = teacher(**inputs, output_hidden_states=bool(hidden_layers))
        logits_parts.append(out.logits.float().cpu())
        mask = inputs["attention_mask"].bool().cpu()
        lengths.extend(mask.sum(1).tolist())
        for layer in hidden_layers:
            states = out.hidden_states[layer].cpu().to(torch.float16)
            hidden_parts[layer].extend(states[b][mask[b]] for b in range(states.shape[0]))
    logits = torch.cat(logits_parts)
    hidden = {layer: torch.cat(parts) for layer, parts in hidden_parts.items()}
    offsets = torch.tensor(np.concatenate([[0], np.cumsum(lengths)]), dtype=torch.int64) if hidden_layers else None
    log(f"teacher outputs computed for {len(logits):,} rows (logits{', hidden layers ' + str(hidden_layers) if hidden_layers else ''})")
    return TeacherCache(logits, hidden, offsets, key)


def load_or_compute(teacher_dir, teacher_loader, dataset, collate_fn, max_length: int, hidden_layers=(),
                    cache_dir: str | Path = ".cache/shrinkbert/teacher-outputs", batch_size: int = 64,
                    log=print) -> tuple[TeacherCache, Path, bool]:
    """The cached teacher outputs for `dataset`, computed (with `teacher_loader()`) only on a miss.

    Returns (cache, its file, hit?). The dataset must carry ROW_INDEX = its row position.
    """
    key = cache_key(teacher_dir, dataset, max_length, hidden_layers)
    path = Path(cache_dir) / f"{key}.safetensors"
    if path.is_file():
        try:
            cache = TeacherCache.load(path)
            if cache.key == key and len(cache) == len(dataset):
                log(f"teacher outputs: cache hit {path}")
                return cache, path, True
        except Exception as err:  # a corrupt cache file is recomputed, never trusted
            log(f"teacher outputs: ignoring unreadable cache {path} ({type(err).__name__})")
    cache = compute_teacher_outputs(teacher_loader(), dataset, collate_fn, hidden_layers, batch_size, key, log)
    cache.save(path)
    log(f"teacher outputs: cached to {path}")
    return cache, path, False
