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

from shrinkbert.core.data.dataspec import load_splits
from shrinkbert.core.data.tasks import Task
from shrinkbert.core.errors import ShrinkbertError
from shrinkbert.core.kinds import kind_of


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
        self.kind.check_test_rows(self.task, self.texts, self.labels, self.pairs, self.words)

    @property
    def kind(self):
        """The task's kind (core/kinds): how these rows are scored and reported."""
        return kind_of(self.task)

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
    """A word-tagging task's rows: one word list and one tag list (label indices of the task) per row."""
    if "tokens" not in kind_of(task).columns:
        raise ShrinkbertError(f"task '{task.name}' is a {task.kind} task; from_words takes token tasks")
    return TestRows(task, source=source, **kind_of(task).test_rows({"tokens": words, "tags": tags}, task))


def load_test_rows(spec, split: str = "test", max_rows: int | None = None, cache_dir: str | None = None) -> TestRows:
    """The stored split of a data spec (core.data.dataspec): fixed by its split seed, so every variant and
    every stage sees the same rows."""
    # max_rows keeps a prefix of the stored split, so a quick run's rows are the full run's first rows.
    task, seed = spec.task, spec.split_seed
    task_obj, splits = load_splits(spec, cache_dir, max_rows=max_rows)
    if split not in splits:
        raise ShrinkbertError(f"task '{task}' has no '{split}' split (has: {', '.join(splits)})")
    data = splits[split]
    where = f"{task} [{split}, seed {seed}{f', at most {max_rows} rows' if max_rows else ''}]"
    return TestRows(task_obj, source=where, **kind_of(task_obj).test_rows(data, task_obj))
