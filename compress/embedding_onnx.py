"""A sentence embedder's ONNX graph, whose output is the sentence vector: its int8 twins (dynamic, or
static with calibrated activation ranges) and `OnnxEmbedder`, which runs it.

The graph itself is the export stage's (compress/export.py): the kind's SentenceEncoder
(core/sentence_module.py: the encoder, its pooling, its projection when the folder has one, and its
normalisation) traced into one graph, so ONNX Runtime, an index builder or another language needs
nothing else; inputs input_ids/attention_mask(/token_type_ids), output "sentence_embedding" [batch, dim].
"""
from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np

from shrinkbert.compress.int8 import (FLOAT_KINDS, STATIC_OPS, calibrate, float_nodes, quantization_config,
                                  quantize_file)
from shrinkbert.core.artifacts import MANIFEST
from shrinkbert.core.embedder import read_pooling
from shrinkbert.core.errors import ShrinkbertError
from shrinkbert.core.models import load_tokenizer
from shrinkbert.core.ortsession import ort_session

ONNX_FILE, OUTPUT = "model.onnx", "sentence_embedding"
INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def quantize(src_dir: str | Path, out_dir: str | Path, isa: str = "auto", exclude_nodes: list[str] = ()) -> dict:
    """Dynamic int8 of an exported embedder (weights by the CPU's ISA, compress/int8.py), the nodes
    in `exclude_nodes` left float; the tokenizer and pooling files travel along. Returns the ISA
    choice that was applied."""
    src_dir, out_dir = Path(src_dir), Path(out_dir)
    if not (src_dir / ONNX_FILE).is_file():
        raise ShrinkbertError(f"{src_dir} holds no {ONNX_FILE}: export the embedder first")
    shutil.copytree(src_dir, out_dir, dirs_exist_ok=True, ignore=shutil.ignore_patterns(ONNX_FILE, MANIFEST))
    qconfig, choice = quantization_config(isa, False, None, list(exclude_nodes))
    quantize_file(src_dir / ONNX_FILE, out_dir / ONNX_FILE, qconfig, fused=True)
    return choice


def static_ranges(src_dir: str | Path, sentences: list[str], calibration: str = "percentile",
                  percentile: float = 99.999, max_length: int = 128, static_ops: list[str] = STATIC_OPS) -> dict:
    """Activation ranges of an exported embedder calibrated on `sentences` (tokenized to max_length,
    as the sequence classifiers' static int8 is)."""
    src_dir = Path(src_dir)
    if not (src_dir / ONNX_FILE).is_file():
        raise ShrinkbertError(f"{src_dir} holds no {ONNX_FILE}: export the embedder first")
    tokens = load_tokenizer(src_dir)(list(sentences), padding="max_length", truncation=True, max_length=max_length,
                                     return_token_type_ids=True, return_tensors="np")
    import onnx

    graph_inputs = {i.name for i in onnx.load(str(src_dir / ONNX_FILE), load_external_data=False).graph.input}
    features = {name: tokens[name].astype(np.int64) for name in INPUTS if name in graph_inputs}
    return calibrate(src_dir / ONNX_FILE, features, calibration, percentile=percentile,
                     operators=list(static_ops) or None)


def quantize_static(src_dir: str | Path, out_dir: str | Path, sentences: list[str], isa: str = "auto",
                    calibration: str = "percentile", percentile: float = 99.999, max_length: int = 128,
                    keep_float: list[str] = FLOAT_KINDS, static_ops: list[str] = STATIC_OPS,
                    exclude_nodes: list[str] = (), ranges: dict | None = None) -> dict:
    """Static int8 (QDQ) of an exported embedder: activation ranges calibrated on `sentences`
    (`static_ranges`, unless `ranges` gives them), the node kinds in `keep_float` and the nodes in
    `exclude_nodes` left float, `static_ops` quantized; the pooling and normalisation at the graph's
    end stay float (they are none of those ops). Returns the ISA choice, with the calibration recorded."""
    import onnx

    src_dir, out_dir = Path(src_dir), Path(out_dir)
    if ranges is None:
        ranges = static_ranges(src_dir, sentences, calibration, percentile, max_length, static_ops)
    kinds = float_nodes(onnx.load(str(src_dir / ONNX_FILE)), list(keep_float))
    float_only = sorted({node for nodes in kinds.values() for node in nodes} | set(exclude_nodes))
    shutil.copytree(src_dir, out_dir, dirs_exist_ok=True, ignore=shutil.ignore_patterns(ONNX_FILE, MANIFEST))
    qconfig, choice = quantization_config(isa, True, None, float_only, operators=list(static_ops) or None)
    quantize_file(src_dir / ONNX_FILE, out_dir / ONNX_FILE, qconfig, ranges)
    return {**choice, "calibration": calibration, "calibration_sentences": len(sentences),
            "keep_float": {kind: len(nodes) for kind, nodes in kinds.items()}}


class OnnxEmbedder:
    """An exported embedder run by ONNX Runtime: `encode(texts)` -> float32 [n, dim]."""

    def __init__(self, path: str | Path, threads: int = 0, max_length: int = 128, spin: bool = False):
        path = Path(path)
        # The kit's one thread policy (core/ortsession.py): spinning off unless `spin`, as a timing
        # worker alone in its process asks for it.
        self.session = ort_session(path / ONNX_FILE, threads, spin=spin)
        self.tokenizer, self.max_length = load_tokenizer(path), max_length
        self.spec = read_pooling(path)
        self.inputs = [i.name for i in self.session.get_inputs()]  # MPNet's and DistilBERT's take no token types

    def encode(self, texts: list[str], batch_size: int = 64, padding: str | bool = True) -> np.ndarray:
        chunks = []
        for start in range(0, len(texts), batch_size):
            batch = self.tokenizer(list(texts[start:start + batch_size]), padding=padding, truncation=True,
                                   max_length=self.max_length, return_token_type_ids=True, return_tensors="np")
            chunks.append(self.session.run([OUTPUT], {name: batch[name].astype(np.int64) for name in self.inputs})[0])
        return np.concatenate(chunks).astype(np.float32, copy=False)
