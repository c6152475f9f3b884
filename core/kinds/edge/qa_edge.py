"""Extractive QA postprocessing: one home for turning start/end logits into answers.

Shared by the kit (core/kinds/qa.py scores through it) and the edge bundle (which ships this file
beside predict.py, see core/kinds/edge/__init__.py), so it imports numpy and nothing else: no
torch, no transformers, no shrinkbert.

It follows transformers' run_qa example (utils_qa.postprocess_qa_predictions): over all windows
of a question, the n_best start and end positions each; a span is valid when both ends lie inside
the context, end >= start and it is at most max_answer_length tokens; its score is
start_logit + end_logit; its text is cut from the original context by character offsets. For
SQuAD v2 the null score (the [CLS] start + end, lowest over the windows) competes with the best
span: the answer is empty when null_score - best_span_score > null_threshold, a threshold chosen
on the validation split (`best_null_threshold`).

A window is (start_logits, end_logits, offsets): offsets[i] is the (start, end) character span of
token i in the context, or None for a token outside the context (question, specials, padding).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

N_BEST = 20
MAX_ANSWER_LENGTH = 30


def _softmax(scores: np.ndarray) -> np.ndarray:
    exp = np.exp(scores - scores.max())
    return exp / exp.sum()


def window_spans(start_logits, end_logits, offsets: Sequence, n_best: int = N_BEST,
                 max_answer_length: int = MAX_ANSWER_LENGTH) -> list[tuple[float, int, int]]:
    """Valid spans of one window as (score, char start, char end), from its n_best starts and ends."""
    start_logits = np.asarray(start_logits, dtype=np.float64)
    end_logits = np.asarray(end_logits, dtype=np.float64)
    starts = np.argsort(start_logits)[::-1][:n_best]
    ends = np.argsort(end_logits)[::-1][:n_best]
    spans = []
    for start in starts:
        for end in ends:
            if start >= len(offsets) or end >= len(offsets) or offsets[start] is None or offsets[end] is None:
                continue  # outside the context: the question, [CLS]/[SEP] or padding
            if end < start or end - start + 1 > max_answer_length:
                continue
            spans.append((float(start_logits[start] + end_logits[end]), int(offsets[start][0]), int(offsets[end][1])))
    return spans


def answer_question(windows: Sequence[tuple], context: str, n_best: int = N_BEST,
                    max_answer_length: int = MAX_ANSWER_LENGTH, version_2_with_negative: bool = False,
                    null_threshold: float = 0.0) -> dict:
    """The answer to one question from all of its windows.

    Returns {"text", "start", "end", "score", "null_score_diff"}: the span's text and character
    offsets into `context` (text "" and start/end None for no answer), the softmax probability of
    the chosen prediction among the n_best candidates (the null one included for v2), and
    null_score - best_span_score (for choosing the threshold; -inf when v1.1 or no null score).
    """
    candidates: list[tuple[float, int, int]] = []
    null_score = None
    for start_logits, end_logits, offsets in windows:
        candidates.extend(window_spans(start_logits, end_logits, offsets, n_best, max_answer_length))
        window_null = float(start_logits[0] + end_logits[0])  # [CLS] sits at position 0
        null_score = window_null if null_score is None else min(null_score, window_null)
    candidates = sorted(candidates, key=lambda span: span[0], reverse=True)[:n_best]
    scores = [span[0] for span in candidates]
    if version_2_with_negative and null_score is not None:
        scores.append(null_score)
    if not candidates:
        return {"text": "", "start": None, "end": None, "score": None, "null_score_diff": float("inf")}
    probabilities = _softmax(np.asarray(scores))
    best_score, start, end = candidates[0]
    diff = null_score - best_score if version_2_with_negative and null_score is not None else float("-inf")
    if version_2_with_negative and diff > null_threshold:
        return {"text": "", "start": None, "end": None, "score": float(probabilities[-1]), "null_score_diff": diff}
    return {"text": context[start:end], "start": start, "end": end, "score": float(probabilities[0]),
            "null_score_diff": diff}


def best_null_threshold(null_score_diffs: Sequence[float], answer_f1: Sequence[float],
                        has_answer: Sequence[bool]) -> float:
    """The null threshold that maximises mean F1 on a labelled split (the official v2 script's
    find_best_thresh): a question is answered "" when its null_score_diff exceeds the threshold.

    answer_f1: each question's F1 when its best span is given (0 for a question with no gold answer).
    has_answer: whether each question has a gold answer ("" scores 1 exactly when it has none).
    """
    diffs = np.asarray(null_score_diffs, dtype=np.float64)
    answered = np.asarray(answer_f1, dtype=np.float64)
    abstained = ~np.asarray(has_answer, dtype=bool)
    if diffs.size == 0:
        return 0.0
    finite = diffs[np.isfinite(diffs)]
    candidates = np.unique(np.concatenate([finite, [finite.min() - 1.0 if finite.size else 0.0]]))
    null = diffs[None, :] > candidates[:, None]  # per candidate threshold, which questions abstain
    mean_f1 = np.where(null, abstained[None, :], answered[None, :]).mean(axis=1)
    return float(candidates[int(np.argmax(mean_f1))])
