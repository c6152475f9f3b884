"""The test rows every variant is measured on: one stored split, the same for all of them."""
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
    labels: list[int]
    pairs: list[str] | None = None
    source: str = ""

    __test__ = False  # not a pytest class

    def __post_init__(self):
        if not self.texts:
            raise ShrinkbertError(f"no test rows for task '{self.task.name}' ({self.source or 'given rows'})")
        if len(self.labels) != len(self.texts) or (self.pairs is not None and len(self.pairs) != len(self.texts)):
            raise ShrinkbertError("test rows: texts, pairs and labels differ in length")

    def __len__(self) -> int:
        return len(self.texts)

    @property
    def fingerprint(self) -> str:
        """sha256 of the rows themselves: a cached measurement is reused only on the same rows."""
        blob = json.dumps([self.task.to_dict(), self.texts, self.pairs, self.labels], ensure_ascii=False)
        return hashlib.sha256(blob.encode()).hexdigest()


def from_lists(task: Task, texts: Sequence[str], labels: Sequence[int], pairs: Sequence[str] | None = None,
               source: str = "") -> TestRows:
    return TestRows(task, [str(t) for t in texts], [int(x) for x in labels],
                    [str(p) for p in pairs] if pairs is not None else None, source)


def load_rows(spec, split: str = "test", max_rows: int | None = None, cache_dir: str | None = None) -> TestRows:
    """The stored split of a data spec (core.dataspec): fixed by its split seed, so every variant and
    every stage sees the same rows."""
    from shrinkbert.core.dataspec import load_splits

    # max_rows keeps a prefix of the stored split, so a quick run's rows are the full run's first rows.
    task, seed = spec.task, spec.split_seed
    task_obj, splits = load_splits(spec, cache_dir, max_rows=max_rows)
    if split not in splits:
        raise ShrinkbertError(f"task '{task}' has no '{split}' split (has: {', '.join(splits)})")
    data = splits[split]
    pairs = list(data["text_pair"]) if task_obj.pair and "text_pair" in data.column_names else None
    return from_lists(task_obj, list(data["text"]), list(data["label"]), pairs,
                      source=f"{task} [{split}, seed {seed}{f', at most {max_rows} rows' if max_rows else ''}]")
