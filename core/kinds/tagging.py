"""Token classification's one home: words to sub-tokens, labels aligned, logits back to words.

A token task's rows are {"tokens": [word, ...], "tags": [label index per word]}. The model sees
sub-tokens; each word is labelled on its first sub-token (the BERT paper's CoNLL-2003 recipe) and
the others are ignored (-100), or all carry the word's label when training asks for it. Scoring is
always on first sub-tokens, so "accuracy" of a token task is word accuracy and the same rows give
the same number in every stage and runtime.

Every scorer in the kit works on flat arrays: a token task's predictions become one row per word
(the word's first sub-token logits) and its gold labels one label per word, so `core.predict.accuracy`,
the parity checks and the int8 tolerance need no second code path. Words past max_length are not
scored (they were never seen), nor are words the tokenizer turns into nothing (a zero-width space);
`word_counts` keeps the sentence boundaries for entity-level F1, which the token kind scores
(core/kinds/token.py).
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from shrinkbert.core.errors import ShrinkbertError

IGNORE = -100  # the label torch's cross-entropy skips: special tokens, padding, later sub-tokens


def encode_words(tokenizer, words: Sequence[Sequence[str]], max_length: int, padding: Any = False,
                 return_tensors: str | None = None):
    """Sub-token encodings of pre-split sentences (a fast tokenizer's BatchEncoding: word_ids per row)."""
    if not getattr(tokenizer, "is_fast", False):
        raise ShrinkbertError("token tasks need a fast tokenizer (tokenizer.json): word alignment comes from it")
    return tokenizer([list(w) for w in words], is_split_into_words=True, truncation=True, max_length=max_length,
                     padding=padding, return_tensors=return_tensors, return_token_type_ids=True)


def align_labels(word_ids: Sequence[int | None], tags: Sequence[int], all_subtokens: bool = False) -> list[int]:
    """One label per sub-token: the word's tag on its first sub-token, IGNORE on specials and padding,
    and on later sub-tokens IGNORE (or the word's tag with all_subtokens)."""
    labels, previous = [], None
    for word in word_ids:
        if word is None:
            labels.append(IGNORE)
        elif word != previous:
            labels.append(int(tags[word]))
        else:
            labels.append(int(tags[word]) if all_subtokens else IGNORE)
        previous = word
    return labels


def first_positions(word_ids: Sequence[int | None]) -> list[int]:
    """Sub-token positions that start a word (the positions a word is scored on)."""
    positions, previous = [], None
    for i, word in enumerate(word_ids):
        if word is not None and word != previous:
            positions.append(i)
        previous = word
    return positions


def encoded_word_ids(encoding, count: int) -> list[list[int | None]]:
    return [encoding.word_ids(i) for i in range(count)]


def gather_words(logits: np.ndarray, word_ids: Sequence[Sequence[int | None]]) -> np.ndarray:
    """(rows, seq, labels) sub-token logits -> (words, labels): each word's first sub-token, row by row."""
    logits = np.asarray(logits)
    picked = [logits[row, first_positions(ids)] for row, ids in enumerate(word_ids)]
    return np.concatenate(picked) if picked else np.zeros((0, logits.shape[-1]), logits.dtype)


def gold_words(tags: Sequence[Sequence[int]], word_ids: Sequence[Sequence[int | None]]) -> tuple[list[int], list[int]]:
    """(flat gold labels of the words that fit, words per row), matching gather_words' order."""
    flat, counts = [], []
    for row_tags, ids in zip(tags, word_ids):
        # by word index, not by count: a word the tokenizer turns into nothing (a zero-width space)
        # has no sub-token and is skipped in the middle of a row
        scored = [int(row_tags[ids[p]]) for p in first_positions(ids)]
        flat.extend(scored)
        counts.append(len(scored))
    return flat, counts


def flat_labelled(logits: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """Sub-token logits and aligned labels of a batch -> (word logits, word labels, words per row)."""
    mask = np.asarray(labels) != IGNORE
    return np.asarray(logits)[mask], np.asarray(labels)[mask], mask.sum(axis=1).astype(int).tolist()


def word_counts(labels_per_row: Sequence[Sequence[int]]) -> list[int]:
    """Scored words per row of a tokenized split (its "labels" column)."""
    return [sum(1 for label in row if label != IGNORE) for row in labels_per_row]


def split_rows(flat: Sequence, counts: Sequence[int]) -> list[list]:
    out, start = [], 0
    for count in counts:
        out.append(list(flat[start:start + count]))
        start += count
    if start != len(flat):
        raise ShrinkbertError(f"{len(flat)} word predictions for {start} words")
    return out
