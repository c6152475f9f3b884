"""The static student: one vector per vocabulary token, a sentence is the mean of its tokens' vectors.

Model2vec's method, written here: every vocabulary token goes through the teacher alone (as the
one-token sentence `[CLS] token [SEP]`, pooled as the teacher pools), the vectors are reduced by
PCA to `dim`, and each is weighted by SIF with a Zipf estimate of its frequency from its rank in
the vocabulary (WordPiece vocabularies list frequent pieces first), so that frequent, empty words
weigh little in the mean. Inference is tokenize -> look up -> mean -> normalise, numpy alone.

The artifact is a sentence-transformers folder (StaticEmbedding -> Normalize), so
`SentenceTransformer(path)` loads it too: `0_StaticEmbedding/model.safetensors` holds the table
as "embedding.weight", `0_StaticEmbedding/tokenizer.json` the teacher's tokenizer.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
from safetensors.numpy import load_file, save_file
from sklearn.decomposition import PCA
from tokenizers import Tokenizer

from shrinkbert.core.embedder import MODULES_FILE, ST_MODULE, Embedder, l2_normalize, pool
from shrinkbert.core.errors import ShrinkbertError

STATIC_DIR, NORMALIZE_DIR = "0_StaticEmbedding", "1_Normalize"
WEIGHTS_FILE, TOKENIZER_FILE, WEIGHTS_KEY = "model.safetensors", "tokenizer.json", "embedding.weight"
# BERT vocabularies reserve [unusedN] slots no text ever maps to: they would only skew the PCA fit
# and push every real token down the Zipf ranking (model2vec drops them for the same reason).
UNUSED_TOKEN = re.compile(r"\[unused\d+\]")
SIF_COEFFICIENT = 1e-4  # model2vec's default: the 'a' in SIF's a / (a + p(token))


def zipf_weights(n: int, sif: float = SIF_COEFFICIENT) -> np.ndarray:
    """SIF weight a / (a + p) of the tokens ranked 0..n-1, p from Zipf's law (p ~ 1 / (rank + 2))."""
    if not 0 < sif < 1:
        raise ShrinkbertError(f"the SIF coefficient must lie in (0, 1), got {sif}")
    inverse_rank = 1.0 / np.arange(2, n + 2)
    probability = inverse_rank / inverse_rank.sum()
    return sif / (sif + probability)


def pca_reduce(vectors: np.ndarray, dim: int, fit_rows: np.ndarray | None = None) -> np.ndarray:
    """Every row projected on the top `dim` principal components of the `fit_rows` rows (all by default)."""
    if not 1 <= dim <= vectors.shape[1]:
        raise ShrinkbertError(f"--dim {dim} must lie between 1 and the teacher's width {vectors.shape[1]}")
    fitted = vectors if fit_rows is None else vectors[fit_rows]
    if dim > len(fitted):
        raise ShrinkbertError(f"--dim {dim} exceeds the {len(fitted)} vocabulary tokens the PCA is fitted on")
    return PCA(n_components=dim, svd_solver="full").fit(fitted).transform(vectors).astype(np.float32)


def zipf_ranks(kept: np.ndarray) -> np.ndarray:
    """Rank of each token id: kept tokens in vocabulary order first, the rest after them."""
    order = np.argsort(~kept, kind="stable")
    ranks = np.empty(len(kept), dtype=np.int64)
    ranks[order] = np.arange(len(kept))
    return ranks


def token_vectors(teacher: Embedder, batch_size: int = 512) -> np.ndarray:
    """The teacher's pooled (not normalised) vector of each vocabulary token as a one-token sentence."""
    import torch  # deferred: only building the table needs torch; inference is numpy

    tokenizer = teacher.tokenizer
    ids = torch.arange(teacher.model.config.vocab_size)
    chunks = []
    with torch.inference_mode():
        for start in range(0, len(ids), batch_size):
            middle = ids[start:start + batch_size, None]
            input_ids = torch.cat([torch.full_like(middle, tokenizer.cls_token_id), middle,
                                   torch.full_like(middle, tokenizer.sep_token_id)], dim=1)
            mask = torch.ones_like(input_ids)
            hidden = teacher.model(input_ids=input_ids, attention_mask=mask,
                                   token_type_ids=torch.zeros_like(input_ids)).last_hidden_state
            chunks.append(pool(hidden, mask, teacher.spec.mode).float().numpy())
    return np.concatenate(chunks)


class StaticEmbedder:
    """A token-vector table and a tokenizer: `encode(texts)` -> float32 [n, dim], unit rows."""

    def __init__(self, vectors: np.ndarray, tokenizer: Tokenizer):
        self.vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        self.tokenizer = tokenizer
        self.tokenizer.no_padding()
        self.tokenizer.no_truncation()  # a mean has no length limit

    @property
    def dim(self) -> int:
        return self.vectors.shape[1]

    @classmethod
    def distill(cls, teacher_path: str | Path, dim: int = 256, sif: float = SIF_COEFFICIENT) -> "StaticEmbedder":
        """Build the table from a teacher (a model folder or "minilm"): vocabulary -> teacher -> PCA -> SIF."""
        teacher = Embedder.load(teacher_path)
        tokens = teacher.tokenizer.convert_ids_to_tokens(list(range(teacher.model.config.vocab_size)))
        kept = np.array([not UNUSED_TOKEN.fullmatch(token or "") for token in tokens])
        vectors = pca_reduce(token_vectors(teacher), dim, fit_rows=kept)
        vectors *= zipf_weights(len(vectors), sif)[zipf_ranks(kept)][:, None].astype(np.float32)
        return cls(vectors, teacher.tokenizer.backend_tokenizer)

    @classmethod
    def load(cls, path: str | Path) -> "StaticEmbedder":
        folder = Path(path) / STATIC_DIR
        if not (folder / WEIGHTS_FILE).is_file() or not (folder / TOKENIZER_FILE).is_file():
            raise ShrinkbertError(f"{path} is not a static embedding model (no {STATIC_DIR}/{WEIGHTS_FILE} "
                                  f"and {TOKENIZER_FILE})")
        return cls(load_file(str(folder / WEIGHTS_FILE))[WEIGHTS_KEY], Tokenizer.from_file(str(folder / TOKENIZER_FILE)))

    def save(self, out_dir: str | Path) -> None:
        """The sentence-transformers layout (StaticEmbedding -> Normalize) into out_dir."""
        out_dir = Path(out_dir)
        (out_dir / STATIC_DIR).mkdir(parents=True, exist_ok=True)
        (out_dir / NORMALIZE_DIR).mkdir(exist_ok=True)
        save_file({WEIGHTS_KEY: self.vectors}, str(out_dir / STATIC_DIR / WEIGHTS_FILE))
        self.tokenizer.save(str(out_dir / STATIC_DIR / TOKENIZER_FILE))
        modules = [{"idx": 0, "name": "0", "path": STATIC_DIR, "type": ST_MODULE + "StaticEmbedding"},
                   {"idx": 1, "name": "1", "path": NORMALIZE_DIR, "type": ST_MODULE + "Normalize"}]
        (out_dir / MODULES_FILE).write_text(json.dumps(modules, indent=2))

    def encode(self, texts: list[str]) -> np.ndarray:
        """Mean of each text's token vectors (no [CLS]/[SEP]), L2-normalised; an empty text gives zeros."""
        encodings = self.tokenizer.encode_batch(list(texts), add_special_tokens=False)
        lengths = np.array([len(encoding.ids) for encoding in encodings])
        ids = np.fromiter((i for encoding in encodings for i in encoding.ids), dtype=np.int64, count=lengths.sum())
        sums = np.zeros((len(encodings), self.dim), dtype=np.float32)
        filled = lengths > 0
        if filled.any():
            starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])[filled]
            sums[filled] = np.add.reduceat(self.vectors[ids], starts, axis=0)
        return l2_normalize(sums / np.maximum(lengths, 1)[:, None])
