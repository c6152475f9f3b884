"""Semantic textual similarity: Spearman correlation between the cosine of two sentence vectors and
the gold score, x100 (MTEB's STS main score), on any embedder's `encode`.

One home for the STS figure: eval, the benchmarks and the static student's checks all call this.
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np
from scipy.stats import spearmanr

from shrinkbert.core.data.scored_pairs import ScoredPairs



def cosine_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Cosine of row i of a with row i of b (vectors need not be normalised)."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    norms = np.maximum(np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1), 1e-12)
    return (a * b).sum(axis=1) / norms


def spearman_x100(predicted: Sequence[float], gold: Sequence[float]) -> float:
    return float(spearmanr(predicted, gold).statistic * 100)


def sts_spearman(encode: Callable[[list[str]], np.ndarray], pairs: ScoredPairs) -> float:
    """Spearman x100 of cosine vs gold; each distinct sentence is embedded once."""
    sentences = list(dict.fromkeys(pairs.first + pairs.second))
    index = {text: row for row, text in enumerate(sentences)}
    vectors = encode(sentences)
    first = vectors[[index[text] for text in pairs.first]]
    second = vectors[[index[text] for text in pairs.second]]
    return spearman_x100(cosine_rows(first, second), pairs.scores)
