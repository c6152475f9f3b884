"""The artifact contract: every stage writes one directory, atomically, with a shrinkbert.json.

A PyTorch artifact is a `save_pretrained` directory; an ONNX artifact is Optimum's layout.
Both carry shrinkbert.json (stage, parents and their hashes, resolved config, metrics,
parameter count, library versions, seed). The manifest is written last, inside a temporary
sibling that is renamed into place, so a directory with a manifest is a finished artifact and
a killed stage leaves the old artifact or none.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import time
from importlib import metadata
from pathlib import Path
from typing import Any, Iterator

from shrinkbert.core.errors import ShrinkbertError

MANIFEST = "shrinkbert.json"
TMP_MARK = ".partial-"
# Files whose bytes define what an artifact computes; their hash is the artifact's identity.
CONTENT_SUFFIXES = (".safetensors", ".onnx", ".json", ".txt", ".model")
TRACKED_LIBRARIES = ("torch", "transformers", "tokenizers", "accelerate", "optimum", "optimum-onnx",
                     "onnx", "onnxruntime", "datasets", "evaluate", "safetensors", "numpy")


def library_versions() -> dict[str, str]:
    versions = {}
    for name in TRACKED_LIBRARIES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return versions


def is_artifact(path: str | Path) -> bool:
    """A finished artifact is a directory whose manifest exists (it is written last)."""
    return (Path(path) / MANIFEST).is_file()


def read_manifest(path: str | Path) -> dict[str, Any]:
    path = Path(path)
    if not path.exists():
        raise ShrinkbertError(f"artifact {path} does not exist")
    if not is_artifact(path):
        raise ShrinkbertError(f"{path} is not a finished shrinkbert artifact (no {MANIFEST})")
    try:
        return json.loads((path / MANIFEST).read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ShrinkbertError(f"{path / MANIFEST} is not valid JSON: {err}") from None


def artifact_hash(path: str | Path) -> str:
    """sha256 over the content files (weights, graphs, configs, vocab), manifest excluded."""
    path = Path(path)
    digest = hashlib.sha256()
    for file in sorted(p for p in path.rglob("*") if p.is_file()):
        if file.name == MANIFEST or not file.name.endswith(CONTENT_SUFFIXES):
            continue
        digest.update(str(file.relative_to(path)).encode())
        with open(file, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def parent_record(path: str | Path) -> dict[str, str]:
    path = Path(path).resolve()
    record = {"path": str(path), "hash": artifact_hash(path) if path.is_dir() else ""}
    if is_artifact(path):
        record["stage"] = read_manifest(path).get("stage", "")
    return record


def write_manifest(out_dir: str | Path, *, stage: str, parents: list[str | Path] = (),
                   config: dict[str, Any] | None = None, metrics: dict[str, Any] | None = None,
                   seed: int | None = None, num_parameters: int | None = None,
                   extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """Write shrinkbert.json into out_dir (normally the temporary dir of `atomic_artifact`)."""
    manifest = {
        "stage": stage,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "parents": [parent_record(p) for p in parents],
        "config": config or {},
        "metrics": metrics or {},
        "num_parameters": num_parameters,
        "seed": seed,
        "versions": library_versions(),
        "hash": artifact_hash(out_dir),
    }
    manifest.update(extra or {})
    tmp = Path(out_dir) / (MANIFEST + ".tmp")
    tmp.write_text(json.dumps(manifest, indent=2, default=str))
    os.replace(tmp, Path(out_dir) / MANIFEST)
    return manifest


@contextlib.contextmanager
def atomic_artifact(out_dir: str | Path) -> Iterator[Path]:
    """Yield a temporary sibling of out_dir to write into; rename it into place on success.

    On any exception the temporary directory is removed and an existing out_dir is untouched.
    Leftovers of killed runs (`.partial-*` siblings) are never mistaken for artifacts because
    they have a different name, and are swept on the next write.
    """
    out_dir = Path(out_dir).resolve()
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    for stale in out_dir.parent.glob(f"{TMP_MARK}{out_dir.name}-*"):
        shutil.rmtree(stale, ignore_errors=True)
    tmp = out_dir.parent / f"{TMP_MARK}{out_dir.name}-{os.getpid()}"
    tmp.mkdir()
    try:
        yield tmp
        if not is_artifact(tmp):
            raise RuntimeError(f"stage wrote no {MANIFEST} into {tmp}")
        if out_dir.exists():
            old = out_dir.parent / f"{TMP_MARK}{out_dir.name}-old-{os.getpid()}"
            os.replace(out_dir, old)
            os.replace(tmp, out_dir)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def safe_output_path(root: str | Path, relative: str | Path) -> Path:
    """Resolve `relative` under `root`, refusing paths (.., absolute, links) that escape it."""
    root = Path(root).resolve()
    target = (root / relative).resolve()
    if target != root and root not in target.parents:
        raise ShrinkbertError(f"path {relative!s} escapes the output directory {root}")
    return target
