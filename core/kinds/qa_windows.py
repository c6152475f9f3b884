"""Extractive QA windows: one home for turning questions and contexts into model inputs.

As in transformers' run_qa example (prepare_train_features / prepare_validation_features): the
question comes first, only the context is truncated, and a long context becomes overlapping
windows of at most max_length tokens that share doc_stride tokens with their neighbour. Each
window knows its question (`example_id`) and the character offsets of its context tokens
(`offset_mapping`, None for the question, specials and padding); a training window's
start/end_positions point at the answer's first and last token, or both at [CLS] (position 0)
when the answer is not wholly inside the window.
"""
from __future__ import annotations

from typing import Sequence

import datasets

from shrinkbert.core.errors import ShrinkbertError
from shrinkbert.core.kinds.edge.qa_edge import cut_question, question_limit
from shrinkbert.core.userdata import quiet_datasets

MAX_LENGTH = 384
DOC_STRIDE = 128
CLS_INDEX = 0


def check_window_sizes(tokenizer, max_length: int, doc_stride: int) -> None:
    if doc_stride >= max_length:
        raise ShrinkbertError(f"doc_stride ({doc_stride}) must be smaller than max_length ({max_length})")
    if tokenizer.padding_side != "right":
        raise ShrinkbertError("QA windows need a tokenizer that pads on the right (the question comes first)")


def tokenize_windows(tokenizer, questions: Sequence[str], contexts: Sequence[str], max_length: int = MAX_LENGTH,
                     doc_stride: int = DOC_STRIDE, **options):
    """The tokenizer's windows over (question, context) pairs: a BatchEncoding with
    overflow_to_sample_mapping (window -> question index) and offset_mapping; `options` go to the
    tokenizer (padding, return_tensors)."""
    check_window_sizes(tokenizer, max_length, doc_stride)
    # Leading whitespace in a question wastes window room (run_qa strips it too); a question too long
    # to leave the context room is cut as the question-answering pipeline cuts it (max_question_len).
    questions = [question.lstrip() for question in questions]
    spans = tokenizer(questions, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
    limit = question_limit(max_length, doc_stride)
    questions = [cut_question(question, offsets, limit) for question, offsets in zip(questions, spans)]
    return tokenizer(questions, list(contexts), truncation="only_second", max_length=max_length, stride=doc_stride,
                     return_overflowing_tokens=True, return_offsets_mapping=True, return_token_type_ids=True, **options)


def context_offsets(encoded, window: int) -> list:
    """A window's offsets with everything outside the context (sequence id 1) set to None."""
    sequence_ids = encoded.sequence_ids(window)
    return [tuple(offset) if sequence_ids[i] == 1 else None for i, offset in enumerate(encoded["offset_mapping"][window])]


def answer_positions(offsets: Sequence, answer_start: int, answer_end: int) -> tuple[int, int]:
    """(start token, end token) of the character span [answer_start, answer_end) in one window,
    or (CLS_INDEX, CLS_INDEX) when the span is not wholly inside the window's context."""
    inside = [i for i, offset in enumerate(offsets) if offset is not None]
    if not inside or offsets[inside[0]][0] > answer_start or offsets[inside[-1]][1] < answer_end:
        return CLS_INDEX, CLS_INDEX
    start = next(i for i in inside if offsets[i][1] > answer_start)
    end = next(i for i in reversed(inside) if offsets[i][0] < answer_end)
    return start, end


def encode_batch(batch: dict, tokenizer, max_length: int = MAX_LENGTH, doc_stride: int = DOC_STRIDE,
                 with_positions: bool = True) -> dict:
    """A batch of hub-`squad` rows -> one row per window: input_ids, attention_mask, token_type_ids,
    example_id, offset_mapping (context tokens only) and, with_positions, start/end_positions of
    the first gold answer (training targets; a question with none points at [CLS])."""
    encoded = tokenize_windows(tokenizer, batch["question"], batch["context"], max_length, doc_stride)
    owners = encoded.pop("overflow_to_sample_mapping")
    windows = {"input_ids": encoded["input_ids"], "attention_mask": encoded["attention_mask"],
               "token_type_ids": encoded["token_type_ids"], "example_id": [], "offset_mapping": []}
    if with_positions:
        windows["start_positions"], windows["end_positions"] = [], []
    for window, owner in enumerate(owners):
        offsets = context_offsets(encoded, window)
        windows["example_id"].append(batch["id"][owner])
        windows["offset_mapping"].append(offsets)
        if with_positions:
            answers = batch["answers"][owner]
            if answers["text"]:
                first = answers["answer_start"][0]
                start, end = answer_positions(offsets, first, first + len(answers["text"][0]))
            else:
                start, end = CLS_INDEX, CLS_INDEX
            windows["start_positions"].append(start)
            windows["end_positions"].append(end)
    return windows


def window_dataset(questions: datasets.Dataset, tokenizer, max_length: int = MAX_LENGTH,
                   doc_stride: int = DOC_STRIDE, with_positions: bool = True) -> datasets.Dataset:
    """Every window of a split of questions (hub `squad` layout), unpadded (the collator pads).

    Cached by `datasets` beside the stored split under a fingerprint of rows, tokenizer and sizes."""
    with quiet_datasets():
        return questions.map(encode_batch, batched=True, remove_columns=questions.column_names,
                             fn_kwargs={"tokenizer": tokenizer, "max_length": max_length, "doc_stride": doc_stride,
                                        "with_positions": with_positions})


def windows_by_question(windows: datasets.Dataset) -> dict[str, list[int]]:
    """{question id: indices of its windows, in order}."""
    grouped: dict[str, list[int]] = {}
    for index, qid in enumerate(windows["example_id"]):
        grouped.setdefault(qid, []).append(index)
    return grouped
