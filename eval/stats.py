"""Differences a user can trust: one home for the paired statistics of two variants on the same test rows.

- `paired_bootstrap`: the 95% interval of a metric difference, resampling test rows (the same rows
  for both variants, so their shared difficulty cancels). A per-row metric is a mean over rows; a
  per-word one (token tasks) is a ratio of sums over rows (correct words / words), resampled by row,
  so the words of one sentence move together. Percentile interval, seeded, through
  `scipy.stats.bootstrap` (vectorised over resamples).
- `mcnemar`: McNemar's test on the discordant rows (one right, the other wrong): the exact binomial
  p and the mid-p (Fagerland et al. 2013 recommend mid-p: the exact test is conservative).
- `compare`: both at once, from two 0/1 correctness vectors, as the report and the frontier show it.

A test split of a thousand rows leaves about a point of uncertainty either way on an accuracy
difference: a difference whose interval covers zero is reported as not significant ("n.s."), not as a
gain.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Sequence

import numpy as np
from scipy import stats as scipy_stats

from shrinkbert.core.errors import ShrinkbertError

RESAMPLES = 10_000
CONFIDENCE = 0.95
SEED = 0


@dataclass
class Difference:
    """A's metric minus B's on the same rows, with its paired interval and McNemar's test."""

    difference: float
    low: float
    high: float
    confidence: float
    p_exact: float | None = None
    p_mid: float | None = None
    a_only: int | None = None  # rows (words) A gets right and B wrong
    b_only: int | None = None
    n: int = 0  # rows resampled
    resamples: int = RESAMPLES

    @property
    def significant(self) -> bool:
        """The interval excludes zero."""
        return self.low > 0 or self.high < 0

    def to_dict(self) -> dict:
        return {**asdict(self), "significant": self.significant}

    def text(self, scale: float = 100.0) -> str:
        return difference_text(self.to_dict(), scale)


def difference_text(record: dict | None, scale: float = 100.0) -> str:
    """'-0.3 [-1.1, +0.5] n.s.' (points by default; a significant one with McNemar's mid-p), '–' for none."""
    if not record or "difference" not in record:
        return "–"
    text = f"{record['difference'] * scale:+.1f} [{record['low'] * scale:+.1f}, {record['high'] * scale:+.1f}]"
    if not record["significant"]:
        return text + " n.s."
    p = record.get("p_mid")
    return text + ("" if p is None else f" p={'<0.001' if p < 0.001 else f'{p:.3f}'}")


def paired_bootstrap(a: Sequence[float], b: Sequence[float], weights: Sequence[float] | None = None,
                     resamples: int = RESAMPLES, confidence: float = CONFIDENCE, seed: int = SEED
                     ) -> tuple[float, float, float]:
    """(difference, low, high): mean(a) - mean(b), or with per-row `weights` (e.g. words per row)
    sum(a) / sum(weights) - sum(b) / sum(weights), and its percentile bootstrap interval over rows."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    w = np.ones_like(a) if weights is None else np.asarray(weights, dtype=np.float64)
    if a.ndim != 1 or a.shape != b.shape or a.shape != w.shape:
        raise ShrinkbertError(f"paired values must be two equal-length vectors (got {a.shape}, {b.shape}, {w.shape})")
    if len(a) == 0 or w.sum() <= 0:
        raise ShrinkbertError("no rows to compare")
    per_row = a - b
    difference = float(per_row.sum() / w.sum())
    if np.all(per_row == per_row[0]) and np.all(w == w[0]):
        return difference, difference, difference  # every resample gives the same value

    def ratio(d, weight, axis=-1):
        return d.sum(axis=axis) / weight.sum(axis=axis)

    result = scipy_stats.bootstrap((per_row, w), ratio, paired=True, vectorized=True, n_resamples=resamples,
                                   batch=1000, confidence_level=confidence, method="percentile",
                                   rng=np.random.default_rng(seed))
    return difference, float(result.confidence_interval.low), float(result.confidence_interval.high)


def mcnemar(a_correct: Sequence[bool], b_correct: Sequence[bool]) -> dict:
    """McNemar's test of A vs B on paired right/wrong outcomes: {'a_only', 'b_only', 'p_exact', 'p_mid'}.

    Under no difference the discordant outcomes split 50/50: the exact p is the two-sided binomial
    test of a_only out of a_only + b_only; the mid-p subtracts half the probability of the observed
    count (two-sided: 2 * (P(X <= k) - P(X = k) / 2), k = the smaller count, capped at 1)."""
    a, b = np.asarray(a_correct, dtype=bool), np.asarray(b_correct, dtype=bool)
    if a.shape != b.shape or a.ndim != 1:
        raise ShrinkbertError(f"McNemar needs two equal-length right/wrong vectors (got {a.shape}, {b.shape})")
    a_only, b_only = int(np.sum(a & ~b)), int(np.sum(~a & b))
    discordant = a_only + b_only
    if discordant == 0:
        return {"a_only": 0, "b_only": 0, "p_exact": 1.0, "p_mid": 1.0}
    p_exact = float(scipy_stats.binomtest(a_only, discordant, 0.5).pvalue)
    k = min(a_only, b_only)
    p_mid = float(min(1.0, 2 * (scipy_stats.binom.cdf(k, discordant, 0.5) - 0.5 * scipy_stats.binom.pmf(k, discordant, 0.5))))
    return {"a_only": a_only, "b_only": b_only, "p_exact": p_exact, "p_mid": p_mid}


def compare(a_correct: Sequence[bool], b_correct: Sequence[bool], row_counts: Sequence[int] | None = None,
            resamples: int = RESAMPLES, confidence: float = CONFIDENCE, seed: int = SEED) -> Difference:
    """A's accuracy minus B's on the same outcomes, with the paired interval and McNemar's test.

    `row_counts`: the outcomes are words (a token task), row i owning the next row_counts[i] of them:
    the interval resamples rows (whole sentences); McNemar counts words as if independent (its p is
    then somewhat optimistic, the interval is not)."""
    a, b = np.asarray(a_correct, dtype=bool), np.asarray(b_correct, dtype=bool)
    if a.shape != b.shape:
        raise ShrinkbertError(f"the two variants were scored on different outcomes ({a.size} vs {b.size})")
    if row_counts is None:
        diff, low, high = paired_bootstrap(a, b, resamples=resamples, confidence=confidence, seed=seed)
        n = a.size
    else:
        counts = np.asarray(row_counts, dtype=np.int64)
        if counts.sum() != a.size or np.any(counts < 0):
            raise ShrinkbertError(f"row word counts add up to {counts.sum()}, but {a.size} words were scored")
        row_of_word = np.repeat(np.arange(counts.size), counts)
        per_row_a = np.bincount(row_of_word, weights=a, minlength=counts.size)
        per_row_b = np.bincount(row_of_word, weights=b, minlength=counts.size)
        diff, low, high = paired_bootstrap(per_row_a, per_row_b, counts, resamples=resamples,
                                           confidence=confidence, seed=seed)
        n = counts.size
    return Difference(diff, low, high, confidence, n=int(n), resamples=resamples, **mcnemar(a, b))


def mean_sd(values: Sequence[float | None]) -> tuple[float | None, float | None]:
    """Mean and sample sd of the values that are numbers (sd 0 for one value; (None, None) for none)."""
    kept = np.asarray([v for v in values if v is not None and not np.isnan(v)], dtype=np.float64)
    if kept.size == 0:
        return None, None
    return float(kept.mean()), float(kept.std(ddof=1)) if kept.size > 1 else 0.0


def compare_runs(a_runs: Sequence[Sequence[bool]], b_runs: Sequence[Sequence[bool]], resamples: int = RESAMPLES,
                 confidence: float = CONFIDENCE, seed: int = SEED) -> Difference:
    """Arm A's accuracy minus arm B's, each the mean over its runs (seeds), paired on the same rows:
    each row's share of A's runs that got it right minus B's, resampled by row. The interval is
    over test rows; the spread between seeds is not in it (give the seeds' sd beside it)."""
    a = np.asarray([np.asarray(r, dtype=np.float64) for r in a_runs])
    b = np.asarray([np.asarray(r, dtype=np.float64) for r in b_runs])
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[1] or not len(a) or not len(b):
        raise ShrinkbertError(f"runs to compare must score the same rows (got {a.shape} and {b.shape})")
    diff, low, high = paired_bootstrap(a.mean(axis=0), b.mean(axis=0), resamples=resamples,
                                       confidence=confidence, seed=seed)
    return Difference(diff, low, high, confidence, n=int(a.shape[1]), resamples=resamples)
