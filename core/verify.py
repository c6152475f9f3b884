"""Artifacts checked on load: every stage that reads an artifact compares its files with the sizes
and sha256 its shrinkbert.json recorded when it was written, so a damaged or hand-edited weight file
stops the chain in one line instead of flowing on into a bundle.

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

from shrinkbert.core.cache import cache_root
from shrinkbert.core.errors import ShrinkbertError

SKIP_ENV = "SHRINKBERT_NO_VERIFY"
MANIFEST = "shrinkbert.json"


def skipped() -> bool:
    return os.environ.get(SKIP_ENV, "") not in ("", "0")


def file_sha256(path: str | Path, digest=None):
    """sha256 of a file's bytes, streamed (hex); or, given a running digest, feed the file into it."""
    running = digest if digest is not None else hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            running.update(block)
    return running.hexdigest() if digest is None else running


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
        actual = remembered_sha256(file)
        if actual != expected["sha256"]:
            raise ShrinkbertError(f"{file} does not match the sha256 its {MANIFEST} recorded ({actual[:12]}... "
                                  f"against {expected['sha256'][:12]}...): the file was changed after it was "
                                  f"written. {_HINT}")


_HINT = ("Re-run the stage that made it, or pass --no-verify to use it as it is "
         "(recorded in the new artifact's manifest)")


def remembered_sha256(file: Path) -> str:
    """The file's sha256, from <cache>/verified/ when its path, size and mtime are unchanged."""
    memo, seen = _memo(file)
    try:
        text = memo.read_text()
        if text.startswith(seen):
            return text[len(seen):]
    except OSError:
        pass
    actual = file_sha256(file)
    remember(file, actual)
    return actual


def remember(file: Path, sha256: str) -> None:
    """Record a hash just computed for `file` (as it is now), so its next check costs a stat."""
    memo, seen = _memo(file)
    try:
        memo.parent.mkdir(parents=True, exist_ok=True)
        tmp = memo.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(seen + sha256)
        os.replace(tmp, memo)
    except OSError:
        pass  # a read-only cache only costs the hash next time


def _memo(file: Path) -> tuple[Path, str]:
    stat = file.stat()
    key = hashlib.sha256(str(file.resolve()).encode()).hexdigest()[:32]
    return cache_root() / "verified" / key, f"{stat.st_size} {stat.st_mtime_ns} "
