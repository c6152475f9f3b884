"""Finished measurements, cached in the output directory so an interrupted run picks up where it was.

One JSON file per measurement, named by a hash of everything that defines it (artifact content
hash, settings, machine, test rows); written to a temporary sibling and renamed, so a kill
leaves the old file or none.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from shrinkbert.core.artifacts import write_files


def cache_key(*parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


class MeasurementCache:
    def __init__(self, directory: str | Path | None, enabled: bool = True):
        self.directory = Path(directory) if directory else None
        self.enabled = enabled and self.directory is not None
        self.hits = 0

    def _file(self, kind: str, key: str) -> Path:
        return self.directory / f"{kind}-{key[:24]}.json"

    def get(self, kind: str, key: str, count: bool = True) -> dict[str, Any] | None:
        """The cached value or None; `count` False looks without counting it as reused."""
        if not self.enabled:
            return None
        file = self._file(kind, key)
        try:
            record = json.loads(file.read_text())
        except (OSError, ValueError):
            return None  # missing, or unreadable: measure again
        if record.get("key") != key:
            return None
        self.hits += count
        return record["value"]

    def put(self, kind: str, key: str, value: dict[str, Any]) -> None:
        if not self.enabled:
            return
        self.directory.mkdir(parents=True, exist_ok=True)
        write_files({self._file(kind, key): json.dumps({"key": key, "value": value}, default=float)})
