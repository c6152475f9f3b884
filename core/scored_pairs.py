"""Scored sentence pairs (STS-B's shape: `sentence1,sentence2,score`) read from a user's file.

The file goes through `core.userdata.read_table`, so an empty, non-UTF-8 or unreadable file is
already one clear line; here a missing column, a score that is not a number and a score outside
the declared range each get theirs. Nothing is written: the reader only reads.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from shrinkbert.core.errors import ShrinkbertError
from shrinkbert.core.userdata import read_table

STS_RANGE = (0.0, 5.0)  # STS-B's gold scores: 0 (unrelated) to 5 (same meaning)


@dataclass
class ScoredPairs:
    first: list[str]
    second: list[str]
    scores: np.ndarray  # float64, one per pair, inside the declared range


def read_scored_pairs(path: str | Path, score_range: tuple[float, float] = STS_RANGE,
                      columns: tuple[str, str, str] = ("sentence1", "sentence2", "score")) -> ScoredPairs:
    """The pairs of a CSV/TSV/JSONL file, or a ShrinkbertError naming the file and the fault."""
    first_column, second_column, score_column = columns
    table = read_table(path, text_columns=(first_column, second_column))
    missing = [name for name in columns if name not in table.column_names]
    if missing:
        raise ShrinkbertError(f"{path} has no column(s) {', '.join(missing)}: a scored-pairs file needs "
                              f"{','.join(columns)} (found {','.join(table.column_names)})")
    scores = check_scores(table[score_column], path, score_range)
    first, second = [str(text) for text in table[first_column]], [str(text) for text in table[second_column]]
    return ScoredPairs(first, second, np.asarray(scores, dtype=np.float64))


def check_scores(values, where, score_range: tuple[float, float] = STS_RANGE) -> list[float]:
    """The values as floats, or a ShrinkbertError naming the first row (a file's row: 2 after the header)
    whose score is not a number or lies outside the declared range."""
    scores = []
    for row, value in enumerate(values, start=2):  # row 1 is the header
        try:
            score = float(value)
        except (TypeError, ValueError):
            raise ShrinkbertError(f"{where} row {row}: score {value!r} is not a number") from None
        if math.isnan(score) or not score_range[0] <= score <= score_range[1]:
            raise ShrinkbertError(f"{where} row {row}: score {value!r} is outside the declared range "
                                  f"{score_range[0]:g}..{score_range[1]:g}")
        scores.append(score)
    return scores
