"""`shrinkbert bundle` for sentence-embedding artifacts (core/kinds/embedding.py `own_stages`).

The bundle is torch-free (compress/static_bundle.py): an exported graph's (onnxruntime, tokenizers
and numpy) or a static student's (numpy and tokenizers only); its vectors are checked equal to the
model's before it is written, with a manifest (kind embedding, its parent, the data record it
inherits), atomically. Export, prune and quantize run through the stages every kind uses; sparsify
and trim-vocab refuse in one line (`EmbeddingKind.stages_not_built`).
"""
from __future__ import annotations

from pathlib import Path

from shrinkbert.core.artifacts import is_artifact, read_manifest
from shrinkbert.core.errors import ShrinkbertError


def parent_record(path: Path) -> tuple[dict, dict | None]:
    """(the parent's manifest, its data record) — {} and None for a folder that is not an artifact."""
    if not is_artifact(path):
        return {}, None
    manifest = read_manifest(path)
    return manifest, manifest.get("data") or None


def bundle(cfg) -> Path:
    """The bundle stage for an embedding model: a static student's or an ONNX graph's torch-free bundle."""
    from shrinkbert.compress import static_bundle

    source = Path(cfg.model)
    if not cfg.output_dir:
        raise ShrinkbertError("bundle needs --output-dir")
    return static_bundle.run(source, cfg.output_dir, data=parent_record(source)[1], spin=cfg.spin, target=cfg.target, threads=cfg.threads)
