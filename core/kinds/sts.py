"""Semantic textual similarity: Spearman correlation between the cosine of two sentence vectors and
the gold score, x100 (MTEB's STS main score), on any embedder's `encode`.

One home for the STS figure: eval, the benchmarks and the static student's checks all call this.
"""
from __future__ import annotations

import warnings
from typing import Callable, Sequence

import numpy as np
from scipy.stats import ConstantInputWarning, spearmanr

from shrinkbert.core.scored_pairs import ScoredPairs



def cosine_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Cosine of row i of a with row i of b (vectors need not be normalised)."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    norms = np.maximum(np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1), 1e-12)
    return (a * b).sum(axis=1) / norms


def spearman_x100(predicted: Sequence[float], gold: Sequence[float]) -> float:
    return float(spearmanr(predicted, gold).statistic * 100)


def distinct_sentences(pairs: ScoredPairs) -> list[str]:
    """Each sentence of the pairs once, in first-seen order: the rows `pairs_spearman` reads."""
    return list(dict.fromkeys(pairs.first + pairs.second))


def pair_cosines(vectors: np.ndarray, pairs: ScoredPairs) -> np.ndarray:
    """Each pair's cosine, from the vectors of `distinct_sentences(pairs)`."""
    index = {text: row for row, text in enumerate(distinct_sentences(pairs))}
    first = vectors[[index[text] for text in pairs.first]]
    second = vectors[[index[text] for text in pairs.second]]
    return cosine_rows(first, second)


def pairs_spearman(vectors: np.ndarray, pairs: ScoredPairs) -> float:
    """Spearman x100 of cosine vs gold from the vectors of `distinct_sentences(pairs)`."""
    return spearman_x100(pair_cosines(vectors, pairs), pairs.scores)


def sts_spearman(encode: Callable[[list[str]], np.ndarray], pairs: ScoredPairs) -> float:
    """Spearman x100 of cosine vs gold; each distinct sentence is embedded once."""
    return pairs_spearman(encode(distinct_sentences(pairs)), pairs)


def spearman_drop(fp32: np.ndarray, int8: np.ndarray, pairs: ScoredPairs, resamples: int = 200,
                  seed: int = 0) -> tuple[float, float]:
    """(Spearman points lost from `fp32` to `int8` vectors of `distinct_sentences(pairs)`, its
    standard error): `cosine_spearman_drop` of the pairs' cosines."""
    return cosine_spearman_drop(pair_cosines(fp32, pairs), pair_cosines(int8, pairs), pairs.scores, resamples, seed)


def cosine_spearman_drop(cos_fp32: Sequence[float], cos_int8: Sequence[float], gold: Sequence[float],
                         resamples: int = 200, seed: int = 0) -> tuple[float, float]:
    """(Spearman points lost from the pairs' `cos_fp32` to their `cos_int8`, its standard error): the
    spread of the paired difference over bootstrap resamples of the pairs (Spearman is not a mean
    over rows, so it has no per-row standard error)."""
    difference, drops = _resampled_differences(cos_fp32, cos_int8, gold, resamples, seed)
    return difference, float(np.std(drops, ddof=1)) if len(drops) > 1 else 0.0


def spearman_difference(cos_a: Sequence[float], cos_b: Sequence[float], gold: Sequence[float],
                        resamples: int = 2000, seed: int = 0, confidence: float = 0.95) -> tuple[float, float, float]:
    """(Spearman x100 of model a's pair cosines minus model b's, on the same pairs; the percentile
    bootstrap interval of that difference, resampling pairs): whether a is above b beyond the test
    set's sampling noise."""
    difference, resampled = _resampled_differences(cos_a, cos_b, gold, resamples, seed)
    if len(resampled) < 2:
        return difference, difference, difference
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(resampled, [tail, 100 - tail])
    return difference, float(low), float(high)


def _resampled_differences(cos_a, cos_b, gold, resamples: int, seed: int) -> tuple[float, list[float]]:
    cos_a, cos_b, scores = np.asarray(cos_a), np.asarray(cos_b), np.asarray(gold, dtype=np.float64)
    rng = np.random.default_rng(seed)
    n = len(scores)
    differences = []
    with warnings.catch_warnings():  # a resample of tied scores has no Spearman: dropped below
        warnings.simplefilter("ignore", ConstantInputWarning)
        for _ in range(resamples if n > 2 else 0):
            rows = rng.integers(0, n, n)
            differences.append(spearman_x100(cos_a[rows], scores[rows]) - spearman_x100(cos_b[rows], scores[rows]))
    return (spearman_x100(cos_a, scores) - spearman_x100(cos_b, scores),
            [d for d in differences if np.isfinite(d)])
