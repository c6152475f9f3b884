"""Edge postprocessing of a sequence classifier: one label (and its class probabilities) per text.

Shipped inside a bundle beside predict.py (see core/kinds/edge/__init__.py): numpy only.
"""
from __future__ import annotations

import json

import numpy as np

NOT_A_TAGGER = "this bundle is a sequence classifier: use predict()/logits() on texts"


def logits(p, texts, pairs=None) -> np.ndarray:
    """(texts, labels)."""
    inputs = list(zip(texts, pairs)) if pairs is not None else list(texts)
    return p.run(p.encode(inputs))


def rows_logits(p, rows, batch_size: int = 16) -> np.ndarray:
    texts = [r["text"] for r in rows]
    pairs = [r["text_pair"] for r in rows] if all(r["text_pair"] is not None for r in rows) else None
    return np.concatenate([logits(p, texts[i:i + batch_size], pairs[i:i + batch_size] if pairs else None)
                           for i in range(0, len(texts), batch_size)])


def predict(p, texts, pairs=None, batch_size: int = 32) -> list[dict]:
    """[{"label", "score", "scores": {label: probability}}] per text."""
    results = []
    for start in range(0, len(texts), batch_size):
        chunk_pairs = pairs[start:start + batch_size] if pairs is not None else None
        inputs = list(zip(texts[start:start + batch_size], chunk_pairs)) if chunk_pairs is not None \
            else texts[start:start + batch_size]
        for row in p.probabilities(p.encode(inputs)):
            best = int(row.argmax())
            results.append({"label": p.labels[best], "score": float(row[best]),
                            "scores": {name: float(prob) for name, prob in zip(p.labels, row)}})
    return results


def word_logits(p, word_lists):
    raise ValueError(NOT_A_TAGGER)


def predict_words(p, word_lists, batch_size: int = 32):
    raise ValueError(NOT_A_TAGGER)


def read_lines(handle) -> tuple[list[str], list[str] | None]:
    """One text per line; "a<TAB>b" lines (every line) are pairs."""
    lines = [line.rstrip("\n") for line in handle if line.strip()]
    if lines and all("\t" in line for line in lines):
        split = [line.split("\t", 1) for line in lines]
        return [a for a, _ in split], [b for _, b in split]
    return lines, None


def print_results(p, texts, pairs, as_json: bool, error) -> None:
    for text, result in zip(texts, predict(p, texts, pairs)):
        if as_json:
            print(json.dumps({"text": text, **result}, ensure_ascii=False))
        else:
            print(f"{result['label']}\t{result['score']:.4f}")
