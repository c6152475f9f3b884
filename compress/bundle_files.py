"""A bundle checks its own files at start (issue 41): each file its shrinkbert.json lists (the model
graph, the vector table) must have the recorded size and sha256, so a bundle damaged in transit or
edited by hand fails in one line instead of answering wrongly. Copied into every bundle beside
predict.py; needs the standard library only (a few MB hash in milliseconds)."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path


class BundleDamaged(RuntimeError):
    pass


def check_files(root: str | Path) -> None:
    root = Path(root)
    manifest = root / "shrinkbert.json"
    if not manifest.is_file():  # a bundle being written, or one from before files were recorded
        return
    for name, expected in (json.loads(manifest.read_text()).get("files") or {}).items():
        file = root / name
        if not file.is_file():
            raise BundleDamaged(f"{file} is missing (the bundle's shrinkbert.json lists it)")
        if file.stat().st_size != expected["size"]:
            raise BundleDamaged(f"{file} has {file.stat().st_size:,} bytes, the bundle recorded {expected['size']:,}: "
                                "it was cut or replaced; copy the bundle again")
        digest = hashlib.sha256()
        with open(file, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
        if digest.hexdigest() != expected["sha256"]:
            raise BundleDamaged(f"{file} does not match the sha256 the bundle recorded: it was changed after the "
                                "bundle was written; copy the bundle again")
