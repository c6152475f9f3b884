"""Teacher-output caching: run the teacher over a tokenized dataset once, reuse it in every run.

What is stored: the teacher's logits (fp32) for every row and, when asked, chosen hidden states
(fp16, only each row's real tokens, packed end to end with row offsets) and chosen layers'
attention probabilities (fp16, [heads, n, n] over each row's n real tokens only, packed the same
way), in one safetensors file named by a key over: the teacher artifact's hash, the dataset's
content (token ids and token types of every row, in order), max_length and the hidden and
attention layers stored. Change any of them and the key changes; nothing is ever reused across
teachers or tokenizations. Only the layers the layer map reads are stored, so a 4-layer student
of a 6-layer teacher on short sentences costs a few hundred MB at most; with everything cached,
distillation never runs the teacher.

A cache of one tensor a row (logits alone, no hidden states or attentions, not per token) also
stores a digest of each row's tokens, under a family key over everything but the rows. A dataset
that misses then takes every row an earlier cache of its family holds from there, and the teacher
runs on the other rows only: a transfer set made larger labels only the rows it adds.

The teacher runs in eval mode (no dropout), so cached outputs equal the live ones up to
padding-dependent float noise (and fp16 rounding for hidden states).
"""
from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path
from typing import Iterable

import numpy as np
import torch

from shrinkbert.core.artifacts import artifact_hash, is_artifact, read_manifest
from shrinkbert.core.kinds import kind_of
from shrinkbert.core.predict import encoder_inputs
from shrinkbert.core.progress import progress_bar

ROW_INDEX = "row_idx"
FORMAT_VERSION = 1


def teacher_identity(teacher_dir) -> str:
    if hasattr(teacher_dir, "cache_identity"):  # several teachers (students/ensemble.py TeacherSet)
        return teacher_dir.cache_identity(teacher_identity)
    teacher_dir = Path(teacher_dir)
    if is_artifact(teacher_dir):
        recorded = read_manifest(teacher_dir).get("hash")
        if recorded:
            return recorded
    return artifact_hash(teacher_dir)


def _token_columns(dataset) -> list[str]:
    """The columns a row's teacher outputs depend on."""
    return [c for c in ("input_ids", "token_type_ids") if c in dataset.column_names]


def dataset_fingerprint(dataset) -> str:
    """sha256 over every row's input_ids and token_type_ids (content, not the datasets fingerprint)."""
    digest = hashlib.sha256()
    for column in _token_columns(dataset):
        for row in dataset[column]:
            digest.update(np.asarray(row, dtype=np.int32).tobytes())
            digest.update(b"|")
    digest.update(str(len(dataset)).encode())
    return digest.hexdigest()


def text_fingerprint(lines: Iterable[str]) -> str:
    """sha256 over text lines (pretraining text, sentences to embed), in order; each line end is marked
    and the count added, so "ab","c" differs from "a","bc"."""
    digest = hashlib.sha256()
    count = 0
    for line in lines:
        digest.update(line.encode("utf-8"))
        digest.update(b"\n")
        count += 1
    digest.update(str(count).encode())
    return digest.hexdigest()


def row_digests(dataset) -> torch.Tensor:
    """[rows, 2] int64: a 128-bit digest of each row's input_ids and token_type_ids, by which a row's
    outputs are found in a cache made over other rows."""
    columns = [dataset[c] for c in _token_columns(dataset)]
    digests = np.empty((len(dataset), 2), dtype=np.int64)
    for index, row in enumerate(zip(*columns)):
        digest = hashlib.blake2b(digest_size=16)
        for part in row:
            digest.update(np.asarray(part, dtype=np.int32).tobytes())
            digest.update(b"|")
        digests[index] = np.frombuffer(digest.digest(), dtype=np.int64)
    return torch.from_numpy(digests)


def _key_parts(teacher_dir, max_length: int, hidden_layers, attention_layers, precision: str) -> dict:
    parts = {"v": FORMAT_VERSION, "teacher": teacher_identity(teacher_dir),
             "max_length": int(max_length), "hidden": sorted(int(i) for i in hidden_layers)}
    if attention_layers:  # only then, so logits/hidden caches made before attentions keep their keys
        parts["attention"] = sorted(int(i) for i in attention_layers)
    if precision != "no":  # likewise: fp32 outputs keep their keys, autocast ones are told apart
        parts["precision"] = precision
    return parts


def _digest(parts: dict) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:24]


def cache_key(teacher_dir, dataset, max_length: int, hidden_layers=(), attention_layers=(), precision: str = "no") -> str:
    parts = _key_parts(teacher_dir, max_length, hidden_layers, attention_layers, precision)
    return _digest({**parts, "data": dataset_fingerprint(dataset)})


def cache_family(teacher_dir, max_length: int, hidden_layers=(), attention_layers=(), precision: str = "no") -> str:
    """The key of every cache of one teacher, max_length, layers and precision, over any rows."""
    return _digest({**_key_parts(teacher_dir, max_length, hidden_layers, attention_layers, precision), "rows": "any"})


class TeacherCache:
    """Cached teacher outputs, looked up per batch by the rows' indices."""

    def __init__(self, logits: torch.Tensor, hidden: dict[int, torch.Tensor] | None = None,
                 offsets: torch.Tensor | None = None, key: str = "",
                 attentions: dict[int, torch.Tensor] | None = None, attn_offsets: torch.Tensor | None = None,
                 per_token: bool = False, row_digest: torch.Tensor | None = None, family: str = ""):
        # [rows, labels]; a token classifier's (per_token): [all real tokens, labels], rows cut by offsets
        self.logits = logits
        self.per_token = per_token
        self.hidden = hidden or {}
        self.offsets = offsets  # row r's real tokens: offsets[r]..offsets[r+1] (hidden or attentions stored)
        self.key = key
        self.rows_per_s: float | None = None  # the teacher's rate where this process computed the outputs
        self.reused_rows = 0  # rows a miss took from earlier caches of its family
        # {index into the teacher's attentions tuple (0-based): flat fp16}; attn_offsets = cumsum(n * n)
        # over the rows' real tokens n, so row r of a layer with h heads is [h, n, n] from h * attn_offsets[r]
        self.attentions = attentions or {}
        self.attn_offsets = attn_offsets
        self._head_counts: dict[int, int] = {}
        self.row_digest = row_digest  # [rows, 2] (row_digests), stored where rows can be reused by others
        self.family = family

    @property
    def attention_layers(self) -> list[int]:
        return sorted(self.attentions)

    @property
    def hidden_layers(self) -> list[int]:
        return sorted(self.hidden)

    def __len__(self) -> int:
        return len(self.offsets) - 1 if self.per_token else self.logits.shape[0]

    def lookup(self, row_idx: torch.Tensor, seq_len: int, device=None) -> dict:
        """{"logits": [B, C], "hidden_states": {layer: [B, seq_len, H]}, "attentions": {index: [B, heads,
        seq_len, seq_len]}}, fp32, zero past each row's real tokens (as the live teacher's attention
        probabilities are on padded keys; padded query rows, which the losses skip, are zero too)."""
        idx = row_idx.detach().cpu().long()
        out = {} if self.per_token else {"logits": self.logits[idx].float()}
        if self.hidden or self.attentions or self.per_token:
            # one gather per layer: flat positions of every (row, token) the batch holds, 0 past a row's end
            n = (self.offsets[idx + 1] - self.offsets[idx]).clamp(max=seq_len)  # [B] real tokens, cut to seq_len
            full = self.offsets[idx + 1] - self.offsets[idx]  # [B] as stored
            pos = torch.arange(seq_len)
        if self.hidden or self.per_token:
            valid = pos[None, :] < n[:, None]  # [B, L]
            where = torch.where(valid, self.offsets[idx][:, None] + pos[None, :], 0)
        if self.per_token:  # [B, L, labels], zero past each row's real tokens (the losses read labelled ones)
            out["logits"] = self.logits[where].float().masked_fill_(~valid[..., None], 0.0)
        if self.hidden:
            out["hidden_states"] = {layer: flat[where].float().masked_fill_(~valid[..., None], 0.0)
                                    for layer, flat in self.hidden.items()}
        if self.attentions:
            rows, cols = pos[None, None, :, None], pos[None, None, None, :]
            size, cut = full[:, None, None, None], n[:, None, None, None]
            valid = (rows < cut) & (cols < cut)  # [B, 1, L, L]
            start = self.attn_offsets[idx][:, None, None, None]
            index: dict[int, torch.Tensor] = {}  # by head count (a pruned teacher's layers differ)
            out["attentions"] = {}
            for layer, flat in self.attentions.items():
                heads = self._heads(layer, flat)
                if heads not in index:
                    flat_pos = heads * start + torch.arange(heads)[None, :, None, None] * size * size + rows * size + cols
                    index[heads] = torch.where(valid, flat_pos, 0)
                out["attentions"][layer] = flat[index[heads]].float().masked_fill_(~valid, 0.0)
        if device is not None:
            out["logits"] = out["logits"].to(device)
            for kind in ("hidden_states", "attentions"):
                out.get(kind, {}).update({k: v.to(device) for k, v in out.get(kind, {}).items()})
        return out

    def _heads(self, layer: int, flat: torch.Tensor) -> int:
        if layer not in self._head_counts:
            self._head_counts[layer] = int(flat.numel() // max(1, int(self.attn_offsets[-1])))
        return self._head_counts[layer]

    def save(self, path: str | Path) -> Path:
        from safetensors.torch import save_file

        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tensors = {"logits": self.logits.contiguous()}
        for layer, flat in self.hidden.items():
            tensors[f"hidden.{layer}"] = flat.contiguous()
        if self.offsets is not None:
            tensors["offsets"] = self.offsets.contiguous()
        for layer, flat in self.attentions.items():
            tensors[f"attention.{layer}"] = flat.contiguous()
        if self.attn_offsets is not None:
            tensors["attn_offsets"] = self.attn_offsets.contiguous()
        metadata = {"key": self.key, "format": str(FORMAT_VERSION), "per_token": str(self.per_token)}
        if self.row_digest is not None:
            tensors["row_digest"] = self.row_digest.contiguous()
            metadata["family"] = self.family
        tmp = path.with_name(path.name + f".tmp-{os.getpid()}")
        save_file(tensors, str(tmp), metadata=metadata)
        os.replace(tmp, path)
        return path

    @classmethod
    def load(cls, path: str | Path) -> "TeacherCache":
        from safetensors import safe_open

        with safe_open(str(path), framework="pt") as handle:
            meta = handle.metadata() or {}
            key = meta.get("key", "")
            tensors = {name: handle.get_tensor(name) for name in handle.keys()}
        hidden = {int(name.split(".", 1)[1]): t for name, t in tensors.items() if name.startswith("hidden.")}
        attentions = {int(name.split(".", 1)[1]): t for name, t in tensors.items() if name.startswith("attention.")}
        return cls(tensors["logits"], hidden, tensors.get("offsets"), key, attentions, tensors.get("attn_offsets"),
                   per_token=meta.get("per_token") == "True", row_digest=tensors.get("row_digest"),
                   family=meta.get("family", ""))


@torch.no_grad()
def compute_teacher_outputs(teacher, dataset, collate_fn, hidden_layers=(), batch_size: int = 64,
                            key: str = "", log=print, attention_layers=(), kind=None, precision: str = "no") -> TeacherCache:
    """Run the teacher (eval mode) over `dataset`; results in row order (rows must carry ROW_INDEX = position).

    precision: "bf16" or "fp16" runs the pass under autocast (distill passes what --mixed-precision resolves
    to for the teacher's width; a teacher run live in the training steps runs under their autocast). bf16
    outputs differ from fp32's by rounding only: the same argmax labels on nearly every row, logits and
    hidden states close (stored as fp16 either way; bench/teacher_outputs_bf16.py compares the two).

    kind: the task's kind (core/kinds; None: sequence), whose `pack_outputs` makes the one tensor
    stored per row (its `.logits`, or a QA window's start and end logits side by side).

    attention_layers: indices into the teacher's attentions tuple (0-based); the teacher must then
    run eager attention (attn_implementation="eager") to return them."""
    from torch.utils.data import DataLoader

    kind = kind_of(kind)
    teacher.eval()
    device = next(teacher.parameters()).device
    hidden_layers = sorted(int(i) for i in hidden_layers)
    attention_layers = sorted(int(i) for i in attention_layers)
    # Shortest rows first, so that each batch pads little; results are put back in row order.
    n_rows = len(dataset)
    if "input_ids" in getattr(dataset, "column_names", ()):
        row_lengths = [len(ids) for ids in dataset["input_ids"]]
        order = sorted(range(n_rows), key=row_lengths.__getitem__)
    else:
        order = list(range(n_rows))
    logits_rows: list = [None] * n_rows
    hidden_rows = {i: [None] * n_rows for i in hidden_layers}
    attn_rows: dict[int, list] = {i: [None] * n_rows for i in attention_layers}
    lengths = [0] * n_rows
    loader = DataLoader(dataset, batch_size=batch_size, sampler=order, collate_fn=collate_fn)
    autocast_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)
    done = 0
    for batch in progress_bar(loader, desc="teacher outputs", unit="batch", leave=False):
        inputs = {k: v.to(device) for k, v in encoder_inputs(teacher, batch).items()}
        with torch.autocast(device.type, dtype=autocast_dtype, enabled=autocast_dtype is not None):
            out = teacher(**inputs, output_hidden_states=bool(hidden_layers), output_attentions=bool(attention_layers))
        positions = order[done:done + len(inputs["input_ids"])]
        done += len(positions)
        logits = kind.pack_outputs(kind.outputs(out, batch)).float().cpu()
        mask = inputs["attention_mask"].bool().cpu()
        real = [m.nonzero().squeeze(1) for m in mask]
        per_token = logits.dim() == 3  # a token classifier: each row's real tokens' logits
        for b, row in enumerate(positions):
            logits_rows[row] = logits[b].index_select(0, real[b]) if per_token else logits[b]
            lengths[row] = len(real[b])
        for layer in hidden_layers:
            states = out.hidden_states[layer].cpu().to(torch.float16)
            for b, row in enumerate(positions):
                hidden_rows[layer][row] = states[b].index_select(0, real[b])
        for layer in attention_layers:
            probs = out.attentions[layer].detach().cpu().to(torch.float16)
            for b, row in enumerate(positions):
                attn_rows[layer][row] = probs[b].index_select(1, real[b]).index_select(2, real[b]).reshape(-1)
    per_token = n_rows > 0 and logits_rows[0].dim() == 2
    logits = (torch.cat(logits_rows) if per_token else torch.stack(logits_rows)) if n_rows else torch.zeros(0)
    hidden = {layer: torch.cat(parts) for layer, parts in hidden_rows.items()}
    attentions = {layer: torch.cat(parts) for layer, parts in attn_rows.items()}
    offsets = (torch.tensor(np.concatenate([[0], np.cumsum(lengths)]), dtype=torch.int64)
               if hidden_layers or attention_layers or per_token else None)
    attn_offsets = None
    if attention_layers:
        attn_offsets = torch.tensor(np.concatenate([[0], np.cumsum([n * n for n in lengths])]), dtype=torch.int64)
    stored = "logits" + (f", hidden layers {hidden_layers}" if hidden_layers else "") + (
        f", attention layers {[i + 1 for i in attention_layers]}" if attention_layers else "")
    log(f"teacher outputs computed for {n_rows:,} rows ({stored}{' per token' if per_token else ''}"
        f"{f', {precision} autocast' if autocast_dtype is not None else ''})")
    return TeacherCache(logits, hidden, offsets, key, attentions, attn_offsets, per_token=per_token)


def _rows_in_family(cache_dir: Path, family: str, skip: Path) -> dict[tuple[int, int], torch.Tensor]:
    """{row digest: its stored outputs} over every readable cache of `family` in cache_dir but `skip`."""
    from safetensors import safe_open

    found: dict[tuple[int, int], torch.Tensor] = {}
    for path in sorted(cache_dir.glob("*.safetensors")):
        if path == skip:
            continue
        try:
            with safe_open(str(path), framework="pt") as handle:
                if (handle.metadata() or {}).get("family") != family:
                    continue
                digests, logits = handle.get_tensor("row_digest"), handle.get_tensor("logits")
        except Exception:  # unreadable or foreign: nothing of it is trusted
            continue
        for digest, row in zip(digests.tolist(), logits):
            found.setdefault(tuple(digest), row)
    return found


def load_or_compute(teacher_dir, teacher_loader, dataset, collate_fn, max_length: int, hidden_layers=(),
                    cache_dir: str | Path = ".cache/shrinkbert/teacher-outputs", batch_size: int = 64,
                    log=print, attention_layers=(), kind=None, precision: str = "no") -> tuple[TeacherCache, Path, bool]:
    """The cached teacher outputs for `dataset`, computed (with `teacher_loader()`) only on a miss, and
    then only for the rows no earlier cache of the same family holds (where rows are reusable: logits
    alone, one tensor a row).

    Returns (cache, its file, hit?); `cache.reused_rows` says how many rows a miss took from earlier caches.
    The dataset must carry ROW_INDEX = its row position.
    """
    key = cache_key(teacher_dir, dataset, max_length, hidden_layers, attention_layers, precision)
    path = Path(cache_dir) / f"{key}.safetensors"
    reusable = not hidden_layers and not attention_layers and not kind_of(kind).per_token_outputs
    family = cache_family(teacher_dir, max_length, hidden_layers, attention_layers, precision) if reusable else ""
    if path.is_file():
        try:
            cache = TeacherCache.load(path)
            if cache.key == key and len(cache) == len(dataset):
                log(f"teacher outputs: cache hit {path}")
                if reusable and cache.row_digest is None:  # made before row digests: its rows become reusable
                    cache.row_digest, cache.family = row_digests(dataset), family
                    cache.save(path)
                return cache, path, True
        except Exception as err:  # a corrupt cache file is recomputed, never trusted
            log(f"teacher outputs: ignoring unreadable cache {path} ({type(err).__name__})")
    digests = row_digests(dataset) if reusable else None
    found = _rows_in_family(Path(cache_dir), family, path) if reusable else {}
    stored = [found.get(tuple(d)) for d in digests.tolist()] if found else [None] * len(dataset)
    missing = [row for row, outputs in enumerate(stored) if outputs is None]
    if len(missing) < len(dataset):
        log(f"teacher outputs: {len(dataset) - len(missing):,} of {len(dataset):,} rows found in earlier caches; "
            f"the teacher labels the other {len(missing):,}")
    started = time.perf_counter()
    if len(missing) == len(dataset):
        cache = compute_teacher_outputs(teacher_loader(), dataset, collate_fn, hidden_layers, batch_size, key, log,
                                        attention_layers=attention_layers, kind=kind, precision=precision)
    else:  # every row in dataset order: the found ones, and the computed ones where they belong
        if missing:
            computed = compute_teacher_outputs(teacher_loader(), dataset.select(missing), collate_fn, batch_size=batch_size,
                                               key=key, log=log, kind=kind, precision=precision)
            for position, row in enumerate(missing):
                stored[row] = computed.logits[position]
        cache = TeacherCache(torch.stack(stored).float(), key=key)
    if missing:  # the teacher's labelling rate, which bounds how large a transfer set a CPU can afford
        cache.rows_per_s = len(missing) / max(time.perf_counter() - started, 1e-9)
    cache.reused_rows = len(dataset) - len(missing)
    if reusable:
        cache.row_digest, cache.family = digests, family
    cache.save(path)
    rate = f" ({cache.rows_per_s:,.0f} rows/s)" if cache.rows_per_s else ""
    log(f"teacher outputs: cached to {path}{rate}")
    return cache, path, False
