"""The test rows every variant is measured on: one stored split, the same for all of them.

A token task's rows keep their words (`words`: one word list per row) and one gold tag per word
(`labels`: one tag list per row); `texts` are the words joined by spaces, the inputs latency is
timed on (so the timed batches have the rows' real lengths).
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Sequence

from shrinkbert.core.errors import ShrinkbertError
from shrinkbert.core.tasks import Task


@dataclass
class TestRows:
    task: Task
    texts: list[str]
    labels: list  # one label index per row; a token task: one tag list per row
    pairs: list[str] | None = None
    source: str = ""
    words: list[list[str]] | None = None  # token tasks: the words of each row (labels: a tag list per row)

    __test__ = False  # not a pytest class

    def __post_init__(self):
        if not self.texts:
            raise ShrinkbertError(f"no test rows for task '{self.task.name}' ({self.source or 'given rows'})")
        if len(self.labels) != len(self.texts) or (self.pairs is not None and len(self.pairs) != len(self.texts)):
            raise ShrinkbertError("test rows: texts, pairs and labels differ in length")
        if self.task.is_token:
            if self.words is None or len(self.words) != len(self.texts):
                raise ShrinkbertError(f"token task '{self.task.name}': test rows need their words (one list per row)")
            for i, (words, tags) in enumerate(zip(self.words, self.labels)):
                if len(words) != len(tags):
                    raise ShrinkbertError(f"test row {i}: {len(words)} words but {len(tags)} tags")
        elif self.words is not None:
            raise ShrinkbertError(f"task '{self.task.name}' is a sequence task: its test rows have no words")

    @property
    def is_token(self) -> bool:
        return self.task.is_token

    @property
    def num_words(self) -> int:
        """Words in all rows (token tasks; 0 for a sequence task)."""
        return sum(len(w) for w in self.words) if self.words is not None else 0

    def __len__(self) -> int:
        return len(self.texts)

    @property
    def fingerprint(self) -> str:
        """sha256 of the rows themselves: a cached measurement is reused only on the same rows."""
        parts = [self.task.to_dict(), self.texts, self.pairs, self.labels]
        if self.words is not None:  # token rows: the word split too (same joined text, other words)
            parts.append(self.words)
        blob = json.dumps(parts, ensure_ascii=False)
        return hashlib.sha256(blob.encode()).hexdigest()


def from_lists(task: Task, texts: Sequence[str], labels: Sequence[int], pairs: Sequence[str] | None = None,
               source: str = "") -> TestRows:
    return TestRows(task, [str(t) for t in texts], [int(x) for x in labels],
                    [str(p) for p in pairs] if pairs is not None else None, source)


def from_words(task: Task, words: Sequence[Sequence[str]], tags: Sequence[Sequence[int]], source: str = "") -> TestRows:
    """A token task's rows: one word list and one tag list (label indices of the task) per row."""
    if not task.is_token:
        raise ShrinkbertError(f"task '{task.name}' is a sequence task; from_words takes token tasks")
    words = [[str(w) for w in row] for row in words]
    labels = [[int(t) for t in row] for row in tags]
    bad = [i for i, row in enumerate(labels) for t in row if not 0 <= t < task.num_labels]
    if bad:
        raise ShrinkbertError(f"test row {bad[0]}: a tag outside 0..{task.num_labels - 1}")
    return TestRows(task, [" ".join(row) for row in words], labels, None, source, words=words)


def load_test_rows(spec, split: str = "test", max_rows: int | None = None, cache_dir: str | None = None) -> TestRows:
    """The stored split of a data spec (core.dataspec): fixed by its split seed, so every variant and
    every stage sees the same rows."""
    from shrinkbert.core.dataspec import load_splits

    # max_rows keeps a prefix of the stored split, so a quick run's rows are the full run's first rows.
    task, seed = spec.task, spec.split_seed
    task_obj, splits = load_splits(spec, cache_dir, max_rows=max_rows)
    if split not in splits:
        raise ShrinkbertError(f"task '{task}' has no '{split}' split (has: {', '.join(splits)})")
    data = splits[split]
    where = f"{task} [{split}, seed {seed}{f', at most {max_rows} rows' if max_rows else ''}]"
    if task_obj.is_token:
        return from_words(task_obj, list(data["tokens"]), list(data["tags"]), source=where)
    pairs = list(data["text_pair"]) if task_obj.pair and "text_pair" in data.column_names else None
    return from_lists(task_obj, list(data["text"]), list(data["label"]), pairs, source=where)
