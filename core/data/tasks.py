"""A task is declared, not coded: its text field(s), its label names and the metrics it reports.

Every room sees datasets in one shape (columns "text", optional "text_pair", "label" as an int
index into `label_names`), so nothing downstream needs to know where the rows came from.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from shrinkbert.core.catalogue import BUILTIN_TASK_SPECS
from shrinkbert.core.errors import ShrinkbertError
from shrinkbert.core.kinds import DEFAULT_KIND, all_kinds, check_task


def known_metrics() -> tuple[str, ...]:
    """Every metric some task kind can report, in the kinds' order."""
    return tuple(dict.fromkeys(m for kind in all_kinds().values() for m in kind.known_metrics))


@dataclass(frozen=True)
class Task:
    name: str
    label_names: tuple[str, ...]
    pair: bool = False  # True: rows have "text" and "text_pair" ([CLS] a [SEP] b [SEP])
    metrics: tuple[str, ...] = ("accuracy",)  # names of evaluate metrics
    # the task kind's name (core/kinds): what a row holds, how it is encoded, scored and distilled
    kind: str = DEFAULT_KIND

    def __post_init__(self):
        # Accept lists from YAML/JSON but store tuples, so a Task stays hashable and frozen.
        object.__setattr__(self, "label_names", tuple(str(n) for n in self.label_names))
        object.__setattr__(self, "metrics", tuple(self.metrics))
        if len(self.label_names) < 2:
            raise ShrinkbertError(f"task '{self.name}' needs at least 2 labels, got {list(self.label_names)}")
        if len(set(self.label_names)) != len(self.label_names):
            raise ShrinkbertError(f"task '{self.name}' has duplicate label names: {list(self.label_names)}")
        if self.kind not in all_kinds():
            raise ShrinkbertError(f"task '{self.name}': kind must be one of {', '.join(all_kinds())}, got {self.kind!r}")
        check_task(self)
        known = known_metrics()
        unknown = [m for m in self.metrics if m not in known]
        if unknown:
            raise ShrinkbertError(f"task '{self.name}': unknown metric(s) {unknown} (known: {', '.join(known)})")

    @property
    def num_labels(self) -> int:
        return len(self.label_names)

    @property
    def id2label(self) -> dict[int, str]:
        return dict(enumerate(self.label_names))

    @property
    def label2id(self) -> dict[str, int]:
        return {name: i for i, name in enumerate(self.label_names)}

    def to_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "label_names": list(self.label_names), "metrics": list(self.metrics)}

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> "Task":
        return cls(name=values["name"], label_names=tuple(values["label_names"]),
                   pair=bool(values.get("pair", False)), metrics=tuple(values.get("metrics", ("accuracy",))),
                   kind=values.get("kind", DEFAULT_KIND))


# The built-in tasks, declared in core/catalogue.py (which --help reads without the kinds).
BUILTIN_TASKS = {name: Task(name, **spec) for name, spec in BUILTIN_TASK_SPECS.items()}
