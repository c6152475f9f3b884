"""Pretrained artifacts reused by content: the same start, text, steps and seed train once.

The key, like the teacher-output cache's (students/cache.py), is a sha256 over
  - every config field that changes what is trained (output, logging and cache fields left out),
  - the content hash of each model the run reads (the start model, the tokenizer, the teacher a
    student is sliced from, the MLM-KD teacher),
  - the training text itself (every line, in order, after the leak guard).
A finished artifact is stored under <cache>/pretrained/<key>/; a later run with the same key copies
it to its own output_dir instead of training (a few seconds against minutes or hours), so the
frontier's seeds, the plateau bench and the demo share one pretrained student. Change one line of
text, a step, the seed, the shape or the teacher, and the key changes.
"""
from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Iterable

from shrinkbert.core.artifacts import atomic_artifact, is_artifact, read_manifest
from shrinkbert.core.cache import cache_root
from shrinkbert.students.cache import teacher_identity, text_fingerprint

KEY_VERSION = 1
# Fields that say where things go or how they are logged, not what is trained.
NOT_CONTENT = frozenset({"output_dir", "cache_dir", "reuse", "resume", "checkpoint_every", "log_every", "log_with",
                         "num_workers", "eval_batch_size"})


def content_key(config: dict, models: dict[str, str | Path | None], lines: Iterable[str]) -> str:
    """The key of one pretraining run: its config (content fields), its models' hashes, its text."""
    parts = {"v": KEY_VERSION,
             "config": {k: v for k, v in sorted(config.items()) if k not in NOT_CONTENT},
             "models": {name: teacher_identity(path) for name, path in sorted(models.items()) if path},
             "text": text_fingerprint(lines)}
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:24]


def stored_path(key: str, cache_dir: str | Path | None = None) -> Path:
    return cache_root(cache_dir) / "pretrained" / key


def find(key: str, cache_dir: str | Path | None = None) -> Path | None:
    """The stored artifact of this key, or None (an unfinished or foreign entry is never trusted)."""
    path = stored_path(key, cache_dir)
    if is_artifact(path) and read_manifest(path).get("content_key") == key:
        return path
    return None


def copy_artifact(source: Path, destination: str | Path) -> Path:
    """source's files into destination, atomically (a killed copy leaves the old destination or none)."""
    with atomic_artifact(destination) as tmp:
        shutil.copytree(source, tmp, dirs_exist_ok=True)
    return Path(destination)


def store(artifact: str | Path, key: str, cache_dir: str | Path | None = None) -> Path:
    """Keep a finished artifact under its key (a copy: the output_dir stays the user's to change)."""
    path = stored_path(key, cache_dir)
    if Path(artifact).resolve() != path.resolve():
        copy_artifact(Path(artifact), path)
    return path
