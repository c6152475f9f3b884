"""`OnnxEmbedder`: a sentence embedder's ONNX graph, whose output is the sentence vector, run by ONNX
Runtime (`encode(texts)`); int8 graphs are the quantize stage's, as for every kind (compress/quantize.py).

The graph itself is the export stage's (compress/export.py): the kind's SentenceEncoder
(core/kinds/sentence_module.py: the encoder, its pooling, its projection when the folder has one, and its
normalisation) traced into one graph, so ONNX Runtime, an index builder or another language needs
nothing else; inputs input_ids/attention_mask(/token_type_ids), output "sentence_embedding" [batch, dim].
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from shrinkbert.core.kinds.embedder import read_pooling
from shrinkbert.core.models import load_tokenizer
from shrinkbert.core.ortsession import ort_session

ONNX_FILE, OUTPUT = "model.onnx", "sentence_embedding"


class OnnxEmbedder:
    """An exported embedder run by ONNX Runtime: `encode(texts)` -> float32 [n, dim]."""

    def __init__(self, path: str | Path, threads: int = 0, max_length: int = 128, spin: bool = False,
                 flush_denormals: bool = False):
        path = Path(path)
        # The kit's one thread policy (core/ortsession.py): spinning off unless `spin`, as a timing
        # worker alone in its process asks for it.
        self.session = ort_session(path / ONNX_FILE, threads, spin=spin, flush_denormals=flush_denormals)
        self.tokenizer, self.max_length = load_tokenizer(path), max_length
        self.spec = read_pooling(path)
        self.inputs = [i.name for i in self.session.get_inputs()]  # MPNet's and DistilBERT's take no token types

    def encode(self, texts: list[str], batch_size: int = 32, padding: str | bool = True) -> np.ndarray:
        # batches of 32, as a bundle's Predictor.embed takes them: dynamic int8 scales each MatMul's
        # activations by the largest in the batch, so a text's vector moves (~1e-2) with its batch mates,
        # and a graph and its bundle agree to the digit only on the same batches
        chunks = []
        for start in range(0, len(texts), batch_size):
            batch = self.tokenizer(list(texts[start:start + batch_size]), padding=padding, truncation=True,
                                   max_length=self.max_length, return_token_type_ids=True, return_tensors="np")
            chunks.append(self.session.run([OUTPUT], {name: batch[name].astype(np.int64) for name in self.inputs})[0])
        return np.concatenate(chunks).astype(np.float32, copy=False)
