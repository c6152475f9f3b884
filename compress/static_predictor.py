"""A static embedding bundle's predictor: numpy and tokenizers only (no torch, no onnxruntime).

Copied into the bundle as predict.py beside vectors.npy (the token-vector table) and
tokenizer.json. It is also the one home of the static student's inference: the kit's
StaticEmbedder calls `embed_with_table` from here, so the bundle computes exactly what was measured.

    from predict import Predictor
    predictor = Predictor("bundle/")
    vectors = predictor.embed(["a sentence", "another one"])      # float32 [n, dim], unit rows
    predictor.similarity(vectors, vectors)                         # cosine matrix [n, n]
    predictor.search("query text", vectors, k=5)                   # [(row, cosine), ...]

    python predict.py --embed texts.txt --out vectors.npy          # one text a line; .npy or .json
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer

VECTORS_FILE, TOKENIZER_FILE = "vectors.npy", "tokenizer.json"


def normalize_rows(vectors: np.ndarray) -> np.ndarray:
    """Unit-length rows; an all-zero row (an empty text) stays zero."""
    norms = np.linalg.norm(vectors, axis=-1, keepdims=True)
    return (vectors / np.maximum(norms, 1e-12)).astype(np.float32, copy=False)


def embed_with_table(tokenizer: Tokenizer, table: np.ndarray, texts: list[str]) -> np.ndarray:
    """Mean of each text's token vectors (no [CLS]/[SEP]), L2-normalised; an empty text gives zeros.
    The sum stands in for the mean (normalising removes the length). A plain loop over the texts:
    at batch 1, the latency that matters, tokenizing is most of the time and vectorising across
    texts only adds overhead."""
    sums = np.zeros((len(texts), table.shape[1]), dtype=np.float32)
    for row, encoding in enumerate(tokenizer.encode_batch(list(texts), add_special_tokens=False)):
        if encoding.ids:
            sums[row] = table[encoding.ids].sum(axis=0)
    return normalize_rows(sums)


class Predictor:
    def __init__(self, path: str | Path = "."):
        path = Path(path)
        self.table = np.load(path / VECTORS_FILE, allow_pickle=False)  # plain array: no pickle ever
        self.tokenizer = Tokenizer.from_file(str(path / TOKENIZER_FILE))
        self.tokenizer.no_padding()
        self.tokenizer.no_truncation()  # a mean has no length limit

    @property
    def dim(self) -> int:
        return self.table.shape[1]

    def embed(self, texts: list[str] | str) -> np.ndarray:
        """float32 [n, dim] unit vectors (cosine similarity is their dot product)."""
        return embed_with_table(self.tokenizer, self.table, [texts] if isinstance(texts, str) else list(texts))

    def similarity(self, a, b) -> np.ndarray:
        """Cosine similarity matrix [len(a), len(b)] of texts or vectors."""
        return self._vectors(a) @ self._vectors(b).T

    def search(self, query, vectors, k: int = 10) -> list[tuple[int, float]]:
        """The k rows of `vectors` (an index: embedded texts) most similar to the query, best first."""
        scores = self.similarity(query, vectors)[0]
        top = np.argsort(-scores, kind="stable")[:k]
        return [(int(row), float(scores[row])) for row in top]

    def _vectors(self, texts_or_vectors) -> np.ndarray:
        if isinstance(texts_or_vectors, str) or (isinstance(texts_or_vectors, (list, tuple))
                                                 and texts_or_vectors and isinstance(texts_or_vectors[0], str)):
            return self.embed(texts_or_vectors)
        return normalize_rows(np.atleast_2d(np.asarray(texts_or_vectors, dtype=np.float32)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="embed texts with this static bundle")
    parser.add_argument("--embed", required=True, help="a text file, one text a line ('-': stdin)")
    parser.add_argument("--out", default="-", help="vectors.npy, vectors.json or '-' (JSON to stdout)")
    args = parser.parse_args(argv)
    handle = sys.stdin if args.embed == "-" else open(args.embed, encoding="utf-8-sig")
    with handle:
        texts = [line.rstrip("\n") for line in handle]
    if not any(text.strip() for text in texts):
        print(f"error: {args.embed} holds no text", file=sys.stderr)
        return 2
    vectors = Predictor(Path(__file__).resolve().parent).embed(texts)
    if args.out.endswith(".npy"):
        np.save(args.out, vectors)
    else:
        text = json.dumps(vectors.tolist())
        print(text) if args.out == "-" else Path(args.out).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
