"""Where shrinkbert keeps what it fetches and builds: downloads, stored splits, tokenized splits,
teacher outputs. One home for the cache directory, below every module that reads or writes it."""
from __future__ import annotations

import os
from pathlib import Path


def default_cache_dir() -> Path:
    """$SHRINKBERT_CACHE, or ~/.cache/shrinkbert."""
    env = os.environ.get("SHRINKBERT_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "shrinkbert"


def cache_root(cache_dir: str | Path | None = None) -> Path:
    """The cache directory a stage was given (~ expanded), else the default one."""
    return Path(cache_dir).expanduser() if cache_dir else default_cache_dir()
