"""Artifacts checked on load: every stage that reads an artifact compares its files with the sizes
and sha256 its shrinkbert.json recorded when it was written, so a damaged or hand-edited weight file
stops the chain in one line instead of flowing on into a bundle (issue 41).

Size first (free), then the content hash, which is remembered per file by path, size and mtime in
<cache>/verified/ so a 440 MB teacher is hashed once, not at every stage. `--no-verify` on any
stage (or SHRINKBERT_NO_VERIFY=1) skips the check for a deliberately edited artifact; the stage's
own artifact then records it in its manifest ("verify": "skipped").
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from shrinkbert.core.data.cache import cache_root
from shrinkbert.core.errors import ShrinkbertError

SKIP_ENV = "SHRINKBERT_NO_VERIFY"
VERIFIED_FILES = (".safetensors", ".onnx", ".npy", ".data")  # weights and graphs: what a model computes with
MANIFEST = "shrinkbert.json"


def skipped() -> bool:
    return os.environ.get(SKIP_ENV, "") not in ("", "0")


def file_records(folder: str | Path) -> dict[str, dict[str, Any]]:
    """{relative path: {size, sha256}} of an artifact's weight and graph files (the manifest's "files")."""
    folder = Path(folder)
    records = {}
    for file in sorted(p for p in folder.rglob("*") if p.is_file() and p.name.endswith(VERIFIED_FILES)):
        records[str(file.relative_to(folder))] = {"size": file.stat().st_size, "sha256": _sha256(file)}
    return records


def verify_artifact(folder: str | Path) -> None:
    """Raise one ShrinkbertError line unless the artifact's recorded files are there, of their
    recorded size and hash. Artifacts from before the manifest recorded files pass unchecked."""
    folder = Path(folder)
    manifest_file = folder / MANIFEST
    if skipped() or not manifest_file.is_file():
        return
    try:
        recorded = json.loads(manifest_file.read_text()).get("files") or {}
    except (json.JSONDecodeError, UnicodeDecodeError):
        return  # read_manifest reports a broken manifest where a stage reads it
    for name, expected in recorded.items():
        file = folder / name
        if not file.is_file():
            raise ShrinkbertError(f"{file} is missing: its artifact's {MANIFEST} lists it. {_HINT}")
        size = file.stat().st_size
        if size != expected["size"]:
            raise ShrinkbertError(f"{file} has {size:,} bytes, its {MANIFEST} recorded {expected['size']:,}: "
                                  f"the file was cut or replaced. {_HINT}")
        actual = _remembered_sha256(file)
        if actual != expected["sha256"]:
            raise ShrinkbertError(f"{file} does not match the sha256 its {MANIFEST} recorded ({actual[:12]}... "
                                  f"against {expected['sha256'][:12]}...): the file was changed after it was "
                                  f"written. {_HINT}")


_HINT = ("Re-run the stage that made it, or pass --no-verify to use it as it is "
         "(recorded in the new artifact's manifest)")


def _sha256(file: Path) -> str:
    digest = hashlib.sha256()
    with open(file, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _remembered_sha256(file: Path) -> str:
    """The file's sha256, from <cache>/verified/ when its path, size and mtime are unchanged."""
    stat = file.stat()
    key = hashlib.sha256(str(file.resolve()).encode()).hexdigest()[:32]
    memo = cache_root() / "verified" / key
    seen = f"{stat.st_size} {stat.st_mtime_ns} "
    try:
        text = memo.read_text()
        if text.startswith(seen):
            return text[len(seen):]
    except OSError:
        pass
    actual = _sha256(file)
    try:
        memo.parent.mkdir(parents=True, exist_ok=True)
        tmp = memo.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(seen + actual)
        os.replace(tmp, memo)
    except OSError:
        pass  # a read-only cache only costs the hash next time
    return actual
