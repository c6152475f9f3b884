"""Extractive QA postprocessing: one home for turning start/end logits into answers.

Shared by the kit (core/kinds/qa.py scores through it) and the edge bundle (which ships this file
beside predict.py, see core/kinds/edge/__init__.py), so it imports numpy and the standard library only:
no torch, no transformers, no shrinkbert.

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

import json
from typing import Sequence

import numpy as np

N_BEST = 20
MAX_ANSWER_LENGTH = 30
MAX_QUESTION_LEN = 64  # the question-answering pipeline's max_question_len: longer questions are cut


def question_limit(max_length: int, stride: int) -> int:
    """Most question tokens a window of max_length may hold: the pipeline's 64, and fewer where the
    context would otherwise not get more than doc_stride tokens ([CLS] and two [SEP] besides)."""
    return max(1, min(MAX_QUESTION_LEN, max_length - 3 - stride - 1))


def cut_question(question: str, offsets: Sequence, limit: int) -> str:
    """The question (leading whitespace removed) cut after its limit-th token (`offsets`: the
    character spans of its tokens, specials excluded), as the kit and the bundle both cut it."""
    question = question.lstrip()
    return question if len(offsets) <= limit else question[:offsets[limit - 1][1]]


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


# ---------------------------------------------------------------------------------------------
# The bundle's side (p is the bundle's Predictor, compress/edge_predictor.py): windows made with
# `tokenizers` alone, the same windows core/kinds/qa_windows.py makes with transformers' tokenizer.

NOT_A_TAGGER = "this bundle answers questions: use answer(question, context) or predict(questions, contexts)"


def doc_stride(max_length: int) -> int:
    """Tokens neighbouring windows share: run_qa's 128 at 384, in proportion (core/kinds/qa.py)."""
    return max(1, 128 * max_length // 384)


def encode_windows(tokenizer, question: str, context: str, max_length: int) -> list:
    """The windows of one question as `tokenizers` Encodings: question first, only the context
    truncated, neighbours sharing doc_stride tokens (run_qa's settings)."""
    tokenizer.no_truncation()
    question = question.lstrip()
    offsets = tokenizer.encode(question, add_special_tokens=False).offsets
    question = cut_question(question, offsets, question_limit(max_length, doc_stride(max_length)))
    tokenizer.enable_truncation(max_length, stride=doc_stride(max_length), strategy="only_second")
    first = tokenizer.encode(question, context)
    return [first] + list(first.overflowing)


def window_offsets(encoding) -> list:
    """A window's character offsets into the context; None outside it (question, specials, padding)."""
    return [tuple(offset) if sequence == 1 else None for offset, sequence in zip(encoding.offsets, encoding.sequence_ids)]


def window_logits(p, encodings) -> tuple[np.ndarray, np.ndarray]:
    """(start logits, end logits) of windows, padded to the longest, from the bundle's ONNX model."""
    width = max(len(e.ids) for e in encodings)

    def padded(values, pad):
        return np.asarray([list(v) + [pad] * (width - len(v)) for v in values], dtype=np.int64)

    columns = {"input_ids": padded([e.ids for e in encodings], p.tokenizer.padding["pad_id"] if p.tokenizer.padding else 0),
               "attention_mask": padded([e.attention_mask for e in encodings], 0),
               "token_type_ids": padded([e.type_ids for e in encodings], 0)}
    outputs = dict(zip([o.name for o in p.session.get_outputs()],
                       p.session.run(None, {name: columns[name] for name in p.input_names})))
    return outputs["start_logits"], outputs["end_logits"]


def answer(p, question: str, context: str) -> dict:
    """{"text", "start", "end", "score"}: the span's text and character offsets into the context,
    and its probability among the n_best candidates; text "" and start/end/score None for no answer
    (SQuAD v2 bundles: labels.json's version_2_with_negative and validation-chosen null_threshold)."""
    meta = getattr(p, "meta", {})
    encodings = encode_windows(p.tokenizer, question, context, p.max_length)
    starts, ends = window_logits(p, encodings)
    real = [int(sum(e.attention_mask)) for e in encodings]  # a window's own tokens: padding is never a candidate
    found = answer_question([(starts[i][:n], ends[i][:n], window_offsets(e)[:n]) for i, (e, n) in
                             enumerate(zip(encodings, real))], context,
                            version_2_with_negative=bool(meta.get("version_2_with_negative")),
                            null_threshold=float(meta.get("null_threshold", 0.0)))
    if found["start"] is None:
        return {"text": "", "start": None, "end": None, "score": None}
    return {"text": found["text"], "start": found["start"], "end": found["end"], "score": found["score"]}


def predict(p, texts, pairs=None, batch_size: int = 32) -> list[dict]:
    """texts: questions; pairs: their contexts. One `answer` per question."""
    if pairs is None or len(pairs) != len(texts):
        raise ValueError("a QA bundle needs a context for every question")
    return [answer(p, question, context) for question, context in zip(texts, pairs)]


def logits(p, texts, pairs=None, batch_size: int = 1) -> np.ndarray:
    """(real tokens of every window, 2): start and end logits, question after question (parity rows);
    the windows of batch_size questions run as one batch (the kit's parity batches)."""
    rows = []
    pairs = list(pairs or [])
    for first in range(0, min(len(texts), len(pairs)), batch_size):
        encodings = [e for question, context in zip(texts[first:first + batch_size], pairs[first:first + batch_size])
                     for e in encode_windows(p.tokenizer, question, context, p.max_length)]
        starts, ends = window_logits(p, encodings)
        for i, e in enumerate(encodings):
            real = np.asarray(e.attention_mask, dtype=bool)
            rows.append(np.stack([starts[i][:len(real)][real], ends[i][:len(real)][real]], axis=-1))
    return np.concatenate(rows) if rows else np.zeros((0, 2), np.float32)


def rows_logits(p, rows, batch_size: int = 16) -> np.ndarray:
    return logits(p, [r["question"] for r in rows], [r["context"] for r in rows], batch_size)


def word_logits(p, word_lists):
    raise ValueError(NOT_A_TAGGER)


def predict_words(p, word_lists, batch_size: int = 32):
    raise ValueError(NOT_A_TAGGER)


def read_lines(handle) -> tuple[list[str], list[str]]:
    """JSON lines {"question": ..., "context": ...} -> (questions, contexts)."""
    rows = [json.loads(line) for line in handle if line.strip()]
    return [r["question"] for r in rows], [r["context"] for r in rows]


def print_results(p, texts, pairs, as_json: bool, error) -> None:
    if pairs is None:
        error("a QA bundle needs --question Q --context FILE (or JSON lines of question and context on stdin)")
    for result in predict(p, texts, pairs):
        print(json.dumps(result) if as_json else f"{result['text']}\t{result['score']}")
