"""Helpers every compress stage shares: loading a model, taking real rows, running both runtimes.

Rows are plain dicts {"text", "text_pair" (or None), "label" (or None)}, or for a token task
{"tokens": [words], "tags": [tag per word] (or None)}: the stages here only need inputs to feed and
labels to score, so nothing below depends on where the rows came from. A token classifier's
logits come back one row per word (its first sub-token, core/tagging.py) and its labels one per
word, so accuracy, parity and tolerances are computed the same way for both kinds.
"""
from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from shrinkbert.core.errors import ShrinkbertError
from shrinkbert.core.predict import accuracy  # noqa: F401  (the compress stages score through it)

# Used for parity checks only when no task data is given (recorded as "builtin" in the manifest).
BUILTIN_SENTENCES = [
    "The film was a delight from start to finish.",
    "I would not recommend this product to anyone.",
    "Markets rallied after the central bank held rates steady.",
    "The match ended in a draw after extra time.",
    "A slow, tedious story with flat characters.",
    "The new phone has a brighter screen and a longer battery life.",
    "She said the plot was clever but the ending felt rushed.",
    "Parliament will vote on the bill next week.",
    "It is fine.",
    "What a waste of two hours!",
    "The service was quick and the staff were friendly, although the food arrived cold.",
    "Researchers released a smaller model that runs on a phone.",
    "ok",
    "The orchestra played beautifully, and the audience rose to its feet at the end of the night.",
    "Nothing about this was memorable.",
    "Shares of the company fell sharply in early trading.",
]


def is_token_model(config) -> bool:
    """True for a token classifier (its architecture, or its saved config's)."""
    return any(str(a).endswith("ForTokenClassification") for a in (getattr(config, "architectures", None) or []))


def load_rows(spec, split: str = "validation", max_rows: int | None = 256,
              cache_dir: str | None = None, words: bool = False) -> tuple[list[dict[str, Any]], Any]:
    """Rows of a task split (the data spec's stored splits), or the built-in sentences when spec is None
    (split into words when `words`: for a token classifier).

    Returns (rows, task); task is None for the built-in sentences (no labels).
    """
    if spec is None:
        rows = [({"tokens": t.split(), "tags": None} if words else {"text": t, "text_pair": None, "label": None})
                for t in BUILTIN_SENTENCES]
        return rows[:max_rows] if max_rows else rows, None
    from shrinkbert.core.dataspec import load_splits

    task, dsd = load_splits(spec, cache_dir)
    data = spec.task
    splits = [split] if isinstance(split, str) else list(split)
    rows: list[dict[str, Any]] = []
    for name in splits:
        if name not in dsd:
            raise ShrinkbertError(f"task {data} has no '{name}' split (has: {', '.join(dsd)})")
        part = dsd[name]
        if task.is_token:
            rows.extend({"tokens": list(t), "tags": list(g)} for t, g in zip(part["tokens"], part["tags"]))
            continue
        pairs = part["text_pair"] if "text_pair" in part.column_names else [None] * len(part)
        labels = part["label"] if "label" in part.column_names else [None] * len(part)
        rows.extend({"text": t, "text_pair": p, "label": l} for t, p, l in zip(part["text"], pairs, labels))
    if max_rows:
        rows = rows[:max_rows]
    if not rows:
        raise ShrinkbertError(f"task {data} has no rows in split(s) {', '.join(splits)}")
    return rows, task


class WordLabels(list):
    """A token task's gold labels, one per scored word, with the words per row (for entity F1)."""

    def __init__(self, labels, counts):
        super().__init__(labels)
        self.counts = list(counts)


def align_labels(rows: list[dict[str, Any]], task, id2label: dict, tokenizer=None,
                 max_length: int = 128) -> list[int | None]:
    """Labels as the model's own ids: map through label names when task and model both name them.
    Token rows give one label per word that fits in max_length (a WordLabels; needs the tokenizer)."""
    token_rows = bool(rows) and "tokens" in rows[0]
    labels = [r["tags"] if token_rows else r["label"] for r in rows]
    if task is None or any(l is None for l in labels):
        return [None] * len(rows)
    model_names = {str(v): int(k) for k, v in (id2label or {}).items()}
    if model_names and set(task.label_names) <= set(model_names):
        to_model = [model_names[name] for name in task.label_names]
    else:
        to_model = list(range(task.num_labels))
    if not token_rows:
        return [to_model[l] for l in labels]
    from shrinkbert.core.tagging import encode_words, encoded_word_ids, gold_words

    if tokenizer is None:
        raise ShrinkbertError("token rows need the tokenizer to find which words fit")
    encoded = encode_words(tokenizer, [r["tokens"] for r in rows], max_length)
    flat, counts = gold_words([[to_model[t] for t in tags] for tags in labels], encoded_word_ids(encoded, len(rows)))
    return WordLabels(flat, counts)


def task_scores(task, logits: np.ndarray, labels) -> dict[str, float | None]:
    """The task's metrics from logits and align_labels' labels: accuracy, plus entity F1 for NER."""
    if task is not None and task.is_token and isinstance(labels, WordLabels):
        from shrinkbert.core.tagging import tag_scores

        return tag_scores(task, np.asarray(logits).argmax(-1), labels, labels.counts)
    return {"accuracy": accuracy(logits, labels)}


def encode(tokenizer, rows: Sequence[dict[str, Any]], max_length: int = 128, padding: Any = True,
           return_tensors: str = "np") -> dict[str, Any]:
    """Model inputs of rows (a BatchEncoding: for token rows its word_ids map sub-tokens to words)."""
    if rows and "tokens" in rows[0]:
        from shrinkbert.core.tagging import encode_words

        return encode_words(tokenizer, [r["tokens"] for r in rows], max_length, padding=padding,
                            return_tensors=return_tensors)
    texts = [r["text"] for r in rows]
    pairs = [r["text_pair"] for r in rows]
    pairs = pairs if all(p is not None for p in pairs) else None
    return tokenizer(texts, pairs, truncation=True, max_length=max_length, padding=padding,
                     return_tensors=return_tensors)


def load_pt(path: str | Path, eager: bool = False):
    """(model, tokenizer) of a PyTorch artifact, in eval mode."""
    from transformers import AutoConfig, AutoModelForSequenceClassification, AutoModelForTokenClassification

    from shrinkbert.core.models import check_model_dir, load_model, load_tokenizer

    kwargs = {"attn_implementation": "eager"} if eager else {}
    token = is_token_model(AutoConfig.from_pretrained(str(check_model_dir(path))))
    cls = AutoModelForTokenClassification if token else AutoModelForSequenceClassification
    model = load_model(cls, path, **kwargs).eval()
    tokenizer = load_tokenizer(path, model.config)
    return model, tokenizer


def torch_logits(model, tokenizer, rows, max_length: int = 128, batch_size: int = 32) -> np.ndarray:
    import torch

    out = []
    with torch.inference_mode():
        for i in range(0, len(rows), batch_size):
            batch = encode(tokenizer, rows[i:i + batch_size], max_length, return_tensors="pt")
            logits = model(**batch).logits.float().numpy()
            out.append(per_word(logits, batch, rows[i:i + batch_size]))
    return np.concatenate(out) if out else np.zeros((0, model.config.num_labels), np.float32)


def per_word(logits: np.ndarray, batch, rows) -> np.ndarray:
    """Sequence logits as they are; a token classifier's (rows, seq, labels) as one row per word."""
    if logits.ndim == 2:
        return logits
    if not rows or "tokens" not in rows[0]:
        raise ShrinkbertError("a token classifier needs word rows (a token task, or --task naming one)")
    from shrinkbert.core.tagging import encoded_word_ids, gather_words

    return gather_words(logits, encoded_word_ids(batch, len(rows)))


def onnx_file(path: str | Path) -> Path:
    """The one model.onnx of an ONNX artifact directory (or the file itself)."""
    path = Path(path)
    if path.is_file():
        return path
    if not path.is_dir():
        raise ShrinkbertError(f"ONNX artifact {path} does not exist")
    if (path / "model.onnx").is_file():
        return path / "model.onnx"
    files = sorted(path.glob("*.onnx"))
    if len(files) != 1:
        raise ShrinkbertError(f"{path} holds {len(files)} .onnx files; expected one model.onnx")
    return files[0]


def ort_session(path: str | Path, threads: int | None = None):
    """The session of an ONNX artifact directory (or file), under the kit's one thread policy."""
    from shrinkbert.core.ortsession import ort_session as open_session

    return open_session(onnx_file(path), threads)


def check_onnx_file(path: str | Path):
    """Load (and check) the ONNX graph, turning a corrupt file into one clear line."""
    import onnx

    file = onnx_file(path)
    try:
        model = onnx.load(str(file))
        onnx.checker.check_model(model)
    except Exception as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ShrinkbertError(f"{file} is not a valid ONNX model (corrupt or truncated?): {first[:300]}") from None
    return model


def ort_logits(session, tokenizer, rows, max_length: int = 128, batch_size: int = 32) -> np.ndarray:
    names = {i.name for i in session.get_inputs()}
    out = []
    for i in range(0, len(rows), batch_size):
        batch = encode(tokenizer, rows[i:i + batch_size], max_length)
        feed = {k: np.asarray(v, dtype=np.int64) for k, v in batch.items() if k in names}
        if "token_type_ids" in names and "token_type_ids" not in feed:
            feed["token_type_ids"] = np.zeros_like(feed["input_ids"])
        out.append(per_word(session.run(None, feed)[0], batch, rows[i:i + batch_size]))
    return np.concatenate(out)


def parity(reference: np.ndarray, candidate: np.ndarray) -> dict[str, float]:
    diff = np.abs(reference - candidate)
    return {"max_abs_logit_diff": float(diff.max()) if diff.size else 0.0,
            "mean_abs_logit_diff": float(diff.mean()) if diff.size else 0.0,
            "label_agreement": float((reference.argmax(-1) == candidate.argmax(-1)).mean()) if diff.size else 1.0,
            "rows": int(reference.shape[0])}


def gzip_size(path: str | Path) -> int:
    """Bytes of the file after gzip level 6 (what a compressed download or zip would weigh), streamed."""
    import zlib

    z, size = zlib.compressobj(6), 0
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 22), b""):
            size += len(z.compress(block))
    return size + len(z.flush())


def copy_tokenizer_files(src: str | Path, dst: str | Path) -> None:
    names = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt",
             "added_tokens.json")
    for name in names:
        if (Path(src) / name).is_file():
            shutil.copy2(Path(src) / name, Path(dst) / name)


def file_mb(path: str | Path) -> float:
    return round(Path(path).stat().st_size / 1e6, 3)


def module_group(path: str) -> str:
    """Map a dotted or slashed path inside the model to the user-facing module group name.

    Groups: embeddings, encoder.layer.N.attention, encoder.layer.N.intermediate,
    encoder.layer.N.output, pooler, classifier; '' when the path names none of them.
    """
    parts = [p for p in path.replace("/", ".").split(".") if p]
    if parts and parts[0] in ("bert", "roberta", "distilbert", "model"):
        parts = parts[1:]
    if not parts:
        return ""
    if parts[0] == "encoder" and len(parts) >= 4 and parts[1] == "layer" and parts[2].isdigit():
        if parts[3] in ("attention", "intermediate", "output"):
            return ".".join(parts[:4])
        return ""
    if parts[0] in ("embeddings", "pooler", "classifier"):
        return parts[0]
    return ""
