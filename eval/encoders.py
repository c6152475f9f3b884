"""An embedding artifact of any form, opened as texts -> unit vectors: a bundle (its Predictor), an
exported or int8 ONNX graph, a static student, or a PyTorch model (an artifact or a model name).

Its own module so that the report (eval/vector_report.py) and the timing worker (eval/worker.py)
both open variants the same way without importing each other.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable

import numpy as np

from shrinkbert.core.artifacts import is_artifact, read_manifest


def open_encoder(path: str, threads: int, max_length: int, spin: bool = False,
                 flush_denormals: bool = False) -> tuple[Callable[[list[str]], np.ndarray], str]:
    """(texts -> unit vectors, the runtime's name) of an embedding artifact or model name. `spin`:
    ONNX Runtime's spinning for an ONNX graph (on only where nothing else runs in the process);
    `flush_denormals`: its denormal floats flushed to zero as a bundle's are (core/ortsession.py: only
    in a process of its own)."""
    # static_predictor's name for the graph file: importing embedding_onnx (torch, onnxruntime) here would
    # load both runtimes into every timing worker
    from shrinkbert.compress.static_predictor import ONNX_FILE
    from shrinkbert.compress.static_table import StaticTable, is_static_model

    folder = Path(path)
    manifest = read_manifest(folder) if is_artifact(folder) else {}
    if str(manifest.get("stage", "")).startswith("bundle"):
        from shrinkbert.compress.bundle_files import runs_on_caller
        from shrinkbert.compress.static_predictor import Predictor

        # one thread flushes denormals on this thread (bundle_files.open_session): only in a process of its own
        predictor = Predictor(folder, threads=threads,
                              flush_denormals=None if flush_denormals or not runs_on_caller(threads) else False)
        return predictor.embed, f"bundle ({manifest.get('runtime', 'onnxruntime')})"
    if (folder / ONNX_FILE).is_file():
        from shrinkbert.compress.embedding_onnx import OnnxEmbedder

        graph = OnnxEmbedder(folder, threads=threads, max_length=max_length, spin=spin, flush_denormals=flush_denormals)
        return graph.encode, "ONNX Runtime " + ("int8" if manifest.get("stage") == "quantize" else "fp32")
    if is_static_model(folder):
        return StaticTable.load(folder).encode, "numpy (static)"
    from shrinkbert.core.builtin import resolve_model
    from shrinkbert.core.kinds.embedder import Embedder

    embedder = Embedder.load(resolve_model(path), max_length=max_length)
    return (lambda texts: embedder.encode(list(texts))), "PyTorch fp32"
