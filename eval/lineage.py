"""Where a variant came from, read from the shrinkbert.json manifests along its parent chain."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from core.artifacts import MANIFEST, read_manifest
from core.errors import ShrinkbertError

ARROW = " → "
MAX_DEPTH = 32


def lineage(path: str | Path, manifest: dict[str, Any] | None = None) -> dict[str, Any]:
    """{'stages': [oldest ... this], 'ancestors': [{path, hash, stage}, nearest first], 'text': 'a → b'}.

    The first parent is followed (a stage with several parents, e.g. distillation from a teacher
    and a student init, lists its first as the main line). A parent that no longer exists ends
    the chain with the stage its record names.
    """
    path = Path(path).resolve()
    if manifest is None:
        try:
            manifest = read_manifest(path)
        except ShrinkbertError:
            manifest = {}
    stages = [manifest.get("stage") or "?"]
    ancestors: list[dict[str, str]] = []
    seen = {str(path)}
    current = manifest
    while len(ancestors) < MAX_DEPTH:
        parents = current.get("parents") or []
        if not parents or not isinstance(parents[0], dict):
            break
        parent = parents[0]
        parent_path = str(parent.get("path", ""))
        record = {"path": parent_path, "hash": str(parent.get("hash", "")), "stage": str(parent.get("stage", "") or "?")}
        if parent_path in seen:
            break
        seen.add(parent_path)
        try:
            current = read_manifest(parent_path) if parent_path and (Path(parent_path) / MANIFEST).is_file() else None
        except ShrinkbertError:
            current = None
        if current is not None:
            record["stage"] = current.get("stage") or record["stage"]
        ancestors.append(record)
        stages.append(record["stage"])
        if current is None:
            break
    stages.reverse()
    return {"stages": stages, "ancestors": ancestors, "text": ARROW.join(stages)}


def parity_failure(manifest: dict[str, Any]) -> str | None:
    """A line saying the export parity check failed, from the manifest's metrics; None if it passed or is absent."""
    metrics = manifest.get("metrics") or {}
    for key, value in _walk(metrics):
        if "parity" not in key.lower():
            continue
        leaf = key.rsplit(".", 1)[-1].lower()
        if isinstance(value, bool) and leaf in ("parity", "passed", "ok", "parity_ok", "parity_passed", "pass") and not value:
            return f"export parity failed ({key}=False)"
        if isinstance(value, str) and value.lower() in ("fail", "failed", "false"):
            return f"export parity failed ({key}={value})"
    return None


def _walk(tree: Any, prefix: str = ""):
    if isinstance(tree, dict):
        for key, value in tree.items():
            yield from _walk(value, f"{prefix}.{key}" if prefix else str(key))
    else:
        yield prefix, tree
