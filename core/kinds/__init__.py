"""The task kinds' registry: one module per kind, found here, asked by every stage.

    from shrinkbert.core.kinds import kind_of, get_kind

    kind = kind_of(task)            # a Task, a kind name, a manifest, a model, its config or its directory
    kind.model_class().from_pretrained(path)
    kind.score(task, logits, labels)

Adding a kind is adding one module to this package that defines a `TaskKind` subclass (base.py)
decorated with `@register`: every module here is imported on first use of the registry, so no
list needs editing. Stages never compare kind names; they call the kind's methods.
"""
from __future__ import annotations

import importlib
import json
import pkgutil
from pathlib import Path
from typing import Any

from shrinkbert.core.errors import ShrinkbertError
from shrinkbert.core.kinds.base import TaskKind

DEFAULT_KIND = "sequence"  # what a task, manifest or model that names no kind has always been

_KINDS: dict[str, TaskKind] = {}
_LOADED = False


def register(cls: type[TaskKind]) -> type[TaskKind]:
    """Class decorator: make a TaskKind subclass known by its `name` (one instance per kind)."""
    if cls.name in _KINDS and type(_KINDS[cls.name]) is not cls:
        raise ValueError(f"two task kinds named {cls.name!r}: {type(_KINDS[cls.name]).__name__} and {cls.__name__}")
    _KINDS[cls.name] = cls()
    return cls


def _load_all() -> None:
    """Import every kind module of this package once (each registers itself)."""
    global _LOADED
    if _LOADED:
        return
    _LOADED = True
    for module in pkgutil.iter_modules(__path__):
        if module.name != "base" and not module.name.startswith("_") and not module.ispkg:
            importlib.import_module(f"{__name__}.{module.name}")


def all_kinds() -> dict[str, TaskKind]:
    """{name: kind} of every registered kind, sequence first."""
    _load_all()
    return dict(sorted(_KINDS.items(), key=lambda item: item[0] != DEFAULT_KIND))


def kind_names() -> tuple[str, ...]:
    return tuple(all_kinds())


def get_kind(name: str | None) -> TaskKind:
    """The kind of this name (None or "": the default, sequence); ShrinkbertError for an unknown name."""
    kinds = all_kinds()
    name = name or DEFAULT_KIND
    if name not in kinds:
        raise ShrinkbertError(f"unknown task kind {name!r} (known: {', '.join(kinds)})")
    return kinds[name]


def check_task(task) -> None:
    """Refuse a Task declaration that does not fit its kind: first a metric another kind owns
    ("seqeval scores token tasks only"; only the registry sees every kind), then the kind's own checks."""
    kind = get_kind(task.kind)
    for metric in task.metrics:
        owners = [k.name for k in all_kinds().values() if metric in k.known_metrics]
        if owners and metric not in kind.known_metrics:
            raise ShrinkbertError(f"task '{task.name}': {metric} scores {' or '.join(owners)} tasks only")
    kind.check_task(task)


def kind_of_architectures(architectures) -> TaskKind:
    """The kind whose model class the architectures name (none matching: the default kind)."""
    for kind in all_kinds().values():
        if kind.matches_architectures(architectures):
            return kind
    return get_kind(DEFAULT_KIND)


def _kind_of_dir(path: Path) -> TaskKind:
    """A saved artifact's kind: its manifest's task kind, else its config.json's architectures."""
    for name in ("shrinkbert.json", "config.json", "labels.json"):
        file = path / name
        if file.is_file():
            try:
                values = json.loads(file.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            found = _kind_in_dict(values)
            if found is not None:
                return found
    return get_kind(DEFAULT_KIND)


def _kind_in_dict(values: dict[str, Any]) -> TaskKind | None:
    """The kind a manifest (shrinkbert.json), a labels.json or a config dict names; None if none."""
    task = values.get("task")
    if isinstance(task, dict) and task.get("kind"):
        return get_kind(task["kind"])
    if isinstance(values.get("data"), dict) and isinstance(values["data"].get("task"), dict):
        nested = values["data"]["task"]
        if nested.get("kind"):
            return get_kind(nested["kind"])
    if isinstance(values.get("kind"), str) and values["kind"] in all_kinds():
        return get_kind(values["kind"])
    if values.get("architectures"):
        return kind_of_architectures(values["architectures"])
    return None


def kind_of(thing: Any) -> TaskKind:
    """The task kind of almost anything a stage holds:

    a TaskKind (itself); a kind name; None (the default kind); a Task (its `kind`); a manifest,
    labels.json or config dict; a transformers model or config (its `architectures`); or an
    artifact directory (its shrinkbert.json, config.json or labels.json).
    """
    if isinstance(thing, TaskKind):
        return thing
    if thing is None:
        return get_kind(DEFAULT_KIND)
    if isinstance(thing, str) and thing in all_kinds():
        return get_kind(thing)
    if isinstance(thing, (str, Path)):
        path = Path(thing).expanduser()
        if path.is_dir():
            return _kind_of_dir(path)
        raise ShrinkbertError(f"cannot tell the task kind of {thing!r}: neither a task kind "
                              f"({', '.join(all_kinds())}) nor an artifact directory")
    if isinstance(thing, dict):
        return _kind_in_dict(thing) or get_kind(DEFAULT_KIND)
    kind = getattr(thing, "kind", None)
    if isinstance(kind, str) and hasattr(thing, "label_names"):  # a Task
        return get_kind(kind)
    if hasattr(thing, "config"):  # a model: its own class first (a new one's config names no architecture)
        return kind_of_architectures([type(thing).__name__, *(getattr(thing.config, "architectures", None) or [])])
    return kind_of_architectures(getattr(thing, "architectures", None))  # a config


def kind_for_stage(artifact: Any, stage: str) -> TaskKind:
    """The kind `stage` treats the artifact directory `artifact` as: `kind_of` it, unless no manifest
    marks it and a kind claims such a folder for this stage (`TaskKind.claims_unmarked`: a
    sentence-transformers folder as it ships is exported as a sentence embedder)."""
    path = Path(str(artifact or "")).expanduser()
    if path.is_dir() and not (path / "shrinkbert.json").is_file():
        claimed = next((kind for kind in all_kinds().values() if kind.claims_unmarked(path, stage)), None)
        if claimed is not None:
            return claimed
    return kind_of(path if path.is_dir() else None)


def require_stage(kind: TaskKind, stage: str) -> TaskKind:
    """`kind` where its models go through `stage`; else one ShrinkbertError line with the kind's reason
    (`TaskKind.stages_not_built`)."""
    why = kind.stages_not_built.get(stage)
    if why:
        raise ShrinkbertError(f"{stage} does not handle {kind.description or kind.name} models ({why})")
    return kind


def kind_of_rows(rows) -> TaskKind:
    """The kind whose row shape (`columns`) the rows have, e.g. {"tokens", "tags"}; no rows: the default."""
    if not rows:
        return get_kind(DEFAULT_KIND)
    keys = set(rows[0])
    for kind in sorted(all_kinds().values(), key=lambda k: k.read_priority):
        if set(kind.columns) <= keys:
            return kind
    raise ShrinkbertError(f"rows with fields {sorted(keys)} fit no task kind ({', '.join(all_kinds())})")


def by_read_priority() -> list[TaskKind]:
    """The kinds in the order a user's data source is offered to them (`read_user_splits`)."""
    return sorted(all_kinds().values(), key=lambda k: k.read_priority)


# A stage mode that trains another kind of model than its data's or its teacher's kind
# (`finetune --mode embeddings` on an NLI task, `distill --objective vectors` from a classifier's encoder).
MODE_KINDS = {"embeddings": "embedding"}


def kind_for_mode(mode: str, otherwise: Any = None) -> TaskKind:
    """The kind of model a stage's `--mode` trains: MODE_KINDS', else the kind of `otherwise` (the
    task, or the teacher)."""
    return get_kind(MODE_KINDS[mode]) if mode in MODE_KINDS else kind_of(otherwise)


def score_split(model, dataset, collate, task, batch_size: int = 64) -> dict[str, float]:
    """The task's scores (and "loss") of a PyTorch model on a tokenized split: its kind's `score_split`."""
    return kind_of(task).score_split(model, dataset, collate, task, batch_size)


def primary_metric(task) -> tuple[str, str]:
    """(key in the scores, name for tables) of the number a task is judged by (None: accuracy)."""
    return kind_of(task).primary_metric(task)


__all__ = ["TaskKind", "register", "get_kind", "kind_of", "kind_of_architectures", "all_kinds", "kind_names",
           "kind_for_stage", "require_stage", "kind_for_mode", "MODE_KINDS",
           "DEFAULT_KIND",
           "kind_of_rows", "by_read_priority", "score_split", "primary_metric"]
