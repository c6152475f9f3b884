"""The leak guard: no validation or test text of a task, nor a near-duplicate, enters a training set.

The one home for "does this text leak an evaluation row?". A text leaks when, after normalising
(Unicode NFKC, case folded, every character that is not a letter or digit dropped, so punctuation,
spacing and tokenisation differences such as "don't" / "do n't" or "co-writer" / "co writer" vanish):
  - the whole text equals a protected row (or one of its sentences), or
  - one of its sentences (at least MIN_PIECE_CHARS normalised characters long, so "Great." in a
    review does not count) equals a protected row or a sentence of one.

Where it is applied (the callers, not this module, decide what is protected):
  - the built-in corpora drawn from the same source as movie-snippets (imdb, rotten-tomatoes:
    core/data/builtin_data.py) drop every movie-snippets row, whatever its split: the split seed of a
    later stage is not known when a corpus is read, so every row could become a test row;
  - distillation (students/distill.py) filters its corpus (mode general) and its transfer set
    (--transfer-corpus, --augment copies) against the validation and test rows of the task in use.

    guard = LeakGuard.for_splits(splits)            # a task's validation + test rows
    kept, removed = guard.filter(lines)
"""
from __future__ import annotations

import re
import unicodedata
from typing import Iterable, Sequence

MIN_PIECE_CHARS = 20   # a sentence shorter than this (normalised) is matched only as a whole text
PROTECTED_SPLITS = ("validation", "test")
TEXT_COLUMNS = ("text", "text_pair")
_DROP = re.compile(r"[\W_]+")
_SENTENCE = re.compile(r"(?<=[.!?])\s+")


def normalise(text: str) -> str:
    """Case, punctuation and whitespace normalised away: the key two near-duplicates share."""
    return _DROP.sub("", unicodedata.normalize("NFKC", str(text)).casefold())


def _piece_keys(text: str) -> list[str]:
    return [key for key in (normalise(p) for p in _SENTENCE.split(str(text))) if len(key) >= MIN_PIECE_CHARS]


class LeakGuard:
    """Texts that must not be trained on, and a filter that drops any text leaking one."""

    def __init__(self, protected: Iterable[str], name: str = ""):
        self.name = name
        self.keys: set[str] = set()
        count = 0
        for text in protected:
            if text is None:
                continue
            count += 1
            whole = normalise(text)
            if whole:
                self.keys.add(whole)
            self.keys.update(_piece_keys(text))
        self.protected_rows = count

    def __len__(self) -> int:
        return len(self.keys)

    def leaks(self, text: str, pair: str | None = None) -> bool:
        for part in (text, pair):
            if part is None:
                continue
            if normalise(part) in self.keys or any(key in self.keys for key in _piece_keys(part)):
                return True
        return False

    def keep_mask(self, texts: Sequence[str], pairs: Sequence[str] | None = None) -> list[bool]:
        return [not self.leaks(t, pairs[i] if pairs is not None else None) for i, t in enumerate(texts)]

    def filter(self, texts: Sequence[str]) -> tuple[list[str], int]:
        """(the texts that leak nothing, in order; how many were removed)."""
        kept = [t for t in texts if not self.leaks(t)]
        return kept, len(texts) - len(kept)

    @classmethod
    def for_splits(cls, splits, which: Sequence[str] = PROTECTED_SPLITS, name: str = "",
                   columns: Sequence[str] = TEXT_COLUMNS) -> "LeakGuard":
        """Protect the given splits (default validation + test) of a DatasetDict: its text columns
        (text and text_pair; a scored-pairs task's sentence1 and sentence2)."""
        return cls(protected_texts(splits, which, columns), name=name)

def protected_texts(splits, which: Sequence[str] = PROTECTED_SPLITS, columns: Sequence[str] = TEXT_COLUMNS) -> list[str]:
    texts: list[str] = []
    for name in which:
        if name not in splits:
            continue
        split = splits[name]
        for column in columns:
            if column in split.column_names:
                texts.extend(t for t in split[column] if t)
    return texts


def describe(removed: int, total: int, guard: LeakGuard, what: str) -> str:
    return (f"leak guard: removed {removed:,} of {total:,} {what} matching one of {guard.protected_rows:,} "
            f"protected {guard.name + ' ' if guard.name else ''}rows (case, punctuation, whitespace normalised)")
