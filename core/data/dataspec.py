"""The data contract: which rows an artifact was made from, recorded in its manifest and inherited.

A user names the data once (`--task` plus, for their own files, the column names); every later
stage reads the spec from its parent artifact's manifest, so `export`, `quantize`, `bundle` and
`eval` need no `--task` (a flag still overrides). The split seed is the data's own setting, not
the training seed: a student trained with `--seed 1` sees exactly the teacher's train rows and
never one of its validation or test rows.

    spec = resolve_spec(cfg, parents=[cfg.model])   # cfg's fields, blanks filled from the lineage
    task, splits = load_splits(spec, cfg.cache_dir) # the stored train/validation/test splits
    write_manifest(..., data=spec.record(task, max_length=cfg.max_length))
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from shrinkbert.core.artifacts import is_artifact, read_manifest
from shrinkbert.core.data.tasks import BUILTIN_TASKS
from shrinkbert.core.errors import ShrinkbertError

DEFAULTS = {"text_column": "text", "text_pair_column": "", "label_column": "label", "split_seed": 0,
            "tsv_quoting": False}


@dataclass(frozen=True)
class DataSpec:
    task: str
    text_column: str = "text"
    text_pair_column: str = ""
    label_column: str = "label"
    split_seed: int = 0
    tsv_quoting: bool = False

    def record(self, task=None, **extra: Any) -> dict[str, Any]:
        """What goes into a manifest's "data": the spec, the task's label names, and anything the
        stage adds (max_length, which split and how many rows it read)."""
        record = dataclasses.asdict(self)
        if task is not None:
            record["label_names"] = list(task.label_names)
            record["task_name"] = task.name
        record.update(extra)
        return record


def lineage_spec(paths: Sequence[str | Path]) -> dict[str, Any] | None:
    """The data spec recorded by the first of `paths` that is an artifact carrying one."""
    for path in paths:
        if path and is_artifact(path):
            recorded = read_manifest(path).get("data")
            if isinstance(recorded, dict) and recorded.get("task"):
                return recorded
    return None


def _absolute_if_file(task: str) -> str:
    """A user file is recorded by absolute path, so a later stage run from elsewhere finds it."""
    if task in BUILTIN_TASKS:
        return task
    path = Path(task).expanduser()
    return str(path.resolve()) if path.exists() else task


def resolve_spec(cfg: Any, parents: Sequence[str | Path] = (), required: bool = True) -> DataSpec | None:
    """The stage's data spec: its own non-empty fields, the rest from the lineage, then defaults.

    Columns and split seed are inherited only along with the task they belong to: a user who
    names another task does not get the parent's column names for it.
    """
    inherited = lineage_spec(parents) or {}
    task = getattr(cfg, "task", "") or ""
    own_task = bool(task)
    if not task:
        task = inherited.get("task", "")
    if not task:
        if required:
            raise ShrinkbertError("no task given and the parent artifact records none: pass --task NAME_OR_FILE")
        return None
    base = inherited if (not own_task or _absolute_if_file(task) == inherited.get("task")) else {}
    values = {}
    for key, default in DEFAULTS.items():
        mine = getattr(cfg, key, None)
        values[key] = mine if mine not in (None, "") else base.get(key, default)
    return DataSpec(task=_absolute_if_file(task), text_column=values["text_column"] or "text",
                    text_pair_column=values["text_pair_column"] or "", label_column=values["label_column"] or "label",
                    split_seed=int(values["split_seed"]), tsv_quoting=bool(values["tsv_quoting"]))


def inherited_max_length(parents: Sequence[str | Path], task: str = "") -> int | None:
    """The max_length the first parent artifact was made with (its manifest's resolved record), so a length
    given once holds down the lineage. Only along with its task, like the columns: a parent that
    records no task (a pre-trained model) or another task than the stage names gives None, and the
    stage starts from its task kind's default (QA's 384, not an MLM corpus's 128)."""
    for path in parents:
        if path and is_artifact(path):
            manifest = read_manifest(path)
            recorded_task = (manifest.get("data") or {}).get("task", "")
            if not recorded_task or (task and _absolute_if_file(task) != recorded_task):
                return None
            # the resolved record; an artifact written before it existed kept the resolved value in its config
            length = (manifest.get("resolved") or {}).get("max_length") or (manifest.get("config") or {}).get("max_length")
            return int(length) if length else None
    return None


def resolve_max_length(cfg: Any, kind, parents: Sequence[str | Path]) -> tuple[Any, int | None]:
    """(a copy of a stage's config whose max_length is the stage's, the max_length as given). The stage runs
    on the copy and writes the given value to its manifest's config, the resolved one to its "resolved"
    record (`length_records`); the config the caller passed is not changed."""
    return dataclasses.replace(cfg, max_length=stage_max_length(cfg, kind, parents)), cfg.max_length


def length_records(cfg: Any, asked: int | None) -> dict[str, dict]:
    """write_manifest's `config` and `resolved` for a config from `resolve_max_length`."""
    from shrinkbert.core.config import to_dict

    return {"config": {**to_dict(cfg), "max_length": asked}, "resolved": {"max_length": cfg.max_length}}


def stage_max_length(cfg: Any, kind, parents: Sequence[str | Path]) -> int:
    """A stage's max_length: its own flag, else its parent's (inherited_max_length), else the kind's default."""
    return kind.max_length(getattr(cfg, "max_length", None) or inherited_max_length(parents, getattr(cfg, "task", "")))


def load_splits(spec: DataSpec, cache_dir: str | None = None, max_rows: int | None = None):
    """(Task, DatasetDict train/validation/test) of a spec: the stored splits, the same for every stage."""
    # deferred: load imports datasets (~1 s), and every stage's --help imports this module
    from shrinkbert.core.data.load import load_task

    return load_task(spec.task, text_column=spec.text_column, text_pair_column=spec.text_pair_column or None,
                     label_column=spec.label_column, split_seed=spec.split_seed, cache_dir=cache_dir or None,
                     max_rows=max_rows, tsv_quoting=spec.tsv_quoting)


def split_pairs(spec, split: str = "validation", max_rows: int = 0, cache_dir: str | None = None):
    """(the task, the scored pairs of one of its stored splits), the first `max_rows` (0: all): a stage's
    scored-pairs task as distillation, pruning and quantization read it."""
    import numpy as np  # deferred, as load is: every stage's --help imports this module

    from shrinkbert.core.scored_pairs import ScoredPairs

    task, splits = load_splits(spec, cache_dir or None)
    rows = splits[split]
    if max_rows:
        rows = rows.select(range(min(max_rows, len(rows))))
    return task, ScoredPairs(list(rows["sentence1"]), list(rows["sentence2"]), np.asarray(rows["score"]))
