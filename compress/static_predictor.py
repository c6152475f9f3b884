"""An embedding bundle's predictor: numpy and tokenizers (and onnxruntime for a transformer), no torch.

Copied into the bundle as predict.py beside tokenizer.json and either vectors.npy (a static
student's token-vector table: numpy alone, onnxruntime never imported) or model.onnx (a transformer
embedder exported as one graph whose output is the sentence vector, compress/embedding_onnx.py,
with embedding.json giving its max_length; a web bundle's graph is onnx/model_quantized.onnx, its output renamed
for transformers.js, both named in embedding.json). It is also the one home of the static student's inference: the kit's
static table (compress/static_table.py) calls `embed_with_table` from here, so the bundle computes exactly what was measured.

    from predict import Predictor
    predictor = Predictor("bundle/")
    vectors = predictor.embed(["a sentence", "another one"])      # float32 [n, dim], unit rows
    predictor.similarity(vectors, vectors)                         # cosine matrix [n, n]
    predictor.search("query text", vectors, k=5)                   # [(row, cosine), ...]

    python predict.py --embed texts.txt --out vectors.npy          # one text a line; .npy or .json
    python predict.py --benchmark 50                               # p50 of embed() at batch 1, 128 tokens (JSON)

A graph's ONNX Runtime threads spin while they wait (faster alone in a process) unless
embedding.json's "runtime" says otherwise (the bundle stage's choice) or `spin=False` / `--no-spin`.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer

try:  # in a bundle: the copies beside predict.py; in the kit: its own modules
    from bundle_files import BundleDamaged, check_files, open_session
    from token_ids import WordIds
except ImportError:
    from shrinkbert.compress.bundle_files import BundleDamaged, check_files, open_session
    from shrinkbert.compress.token_ids import WordIds

VECTORS_FILE, TOKENIZER_FILE = "vectors.npy", "tokenizer.json"
ONNX_FILE, META_FILE, ONNX_OUTPUT = "model.onnx", "embedding.json", "sentence_embedding"
ONNX_INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def normalize_rows(vectors: np.ndarray) -> np.ndarray:
    """Unit-length rows; an all-zero row (an empty text) stays zero."""
    norms = np.linalg.norm(vectors, axis=-1, keepdims=True)
    return (vectors / np.maximum(norms, 1e-12)).astype(np.float32, copy=False)


def embed_with_table(word_ids: WordIds, table: np.ndarray, texts: list[str]) -> np.ndarray:
    """Mean of each text's token vectors (no [CLS]/[SEP]), L2-normalised; an empty text gives zeros.
    The sum stands in for the mean (normalising removes the length). The ids come by whole-word
    lookups where that equals the tokenizer's encode (token_ids.WordIds): at batch 1, the latency
    that matters, encode was most of the time. A plain loop over the texts: vectorising the sums
    across texts only adds overhead."""
    sums = np.zeros((len(texts), table.shape[1]), dtype=np.float32)
    for row, ids in enumerate(word_ids.batch(list(texts))):
        if ids:
            sums[row] = table[ids].sum(axis=0)
    return normalize_rows(sums)


class OnnxGraph:
    """A sentence-vector ONNX graph and its tokenizer: padded to the batch's longest text, truncated to max_length."""

    def __init__(self, path: Path, threads: int | None = None, spin: bool | None = None, model_file: str | None = None,
                 flush_denormals: bool | None = None):
        import onnxruntime as ort  # deferred: a static bundle never needs it

        meta = json.loads((path / META_FILE).read_text())
        # where the graph sits and what its vector output is called: model.onnx's "sentence_embedding",
        # or a web bundle's onnx/model_quantized.onnx, whose output transformers.js reads by its name
        model_file = model_file or meta.get("model_file", ONNX_FILE)
        self.output = meta.get("output", ONNX_OUTPUT)
        # None: the bundle's own default (embedding.json "runtime"; a bundle written before it: off, and
        # ONNX Runtime's thread count); 0 threads: ONNX Runtime's (one per physical core)
        defaults = meta.get("runtime") or {}
        spin = bool(defaults.get("spin", False)) if spin is None else spin
        threads = int(defaults.get("threads") or 0) if threads is None else int(threads)
        # flush-to-zero on ONNX Runtime's threads (bundle_files.open_session): on unless the bundle says not
        flush = bool(defaults.get("flush_denormals", True)) if flush_denormals is None else flush_denormals
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.add_session_config_entry("session.intra_op.allow_spinning", "1" if spin else "0")
        self.runtime = {"threads": threads or None, "spin": spin, "flush_denormals": flush}
        self.session = open_session(path / model_file, options, flush)
        self.tokenizer = Tokenizer.from_file(str(path / TOKENIZER_FILE))
        self.tokenizer.enable_truncation(int(meta["max_length"]))
        self.tokenizer.enable_padding(pad_id=int(meta.get("pad_id", 0)), pad_token=meta.get("pad_token", "[PAD]"))
        self.dim = int(meta["dim"])
        self.inputs = [i.name for i in self.session.get_inputs()]  # MPNet's and DistilBERT's take no token types

    def embed(self, texts: list[str], batch_size: int = 32) -> np.ndarray:
        chunks = [np.zeros((0, self.dim), np.float32)]
        for start in range(0, len(texts), batch_size):
            chunks.append(self.vectors(self.tokenizer.encode_batch(texts[start:start + batch_size])))
        return np.concatenate(chunks).astype(np.float32, copy=False)

    def vectors(self, encodings) -> np.ndarray:
        """The graph's vectors for encodings padded alike (this tokenizer's, or any padded as it pads)."""
        feeds = {"input_ids": np.array([e.ids for e in encodings], dtype=np.int64),
                 "attention_mask": np.array([e.attention_mask for e in encodings], dtype=np.int64),
                 "token_type_ids": np.array([e.type_ids for e in encodings], dtype=np.int64)}
        return self.session.run([self.output], {name: feeds[name] for name in self.inputs})[0]


class Predictor:
    def __init__(self, path: str | Path = ".", threads: int | None = None, spin: bool | None = None,
                 model_file: str | None = None, flush_denormals: bool | None = None):
        """model_file: a graph bundle's graph to run (default: embedding.json's; a mobile bundle's
        "mobile/model.ort" runs too). A bundle with embedding.json runs a graph, one without a table.
        flush_denormals: the graph's ONNX Runtime threads flush denormal floats to zero (None: the
        bundle's "runtime", on where it does not say)."""
        path = Path(path)
        check_files(path)
        self.graph = (OnnxGraph(path, threads, spin, model_file, flush_denormals) if (path / META_FILE).is_file()
                      else None)
        if self.graph is None:
            self.table = np.load(path / VECTORS_FILE, allow_pickle=False)  # plain array: no pickle ever
            self.tokenizer = Tokenizer.from_file(str(path / TOKENIZER_FILE))
            self.tokenizer.no_padding()
            self.tokenizer.no_truncation()  # a mean has no length limit
            self.word_ids = WordIds(self.tokenizer)

    @property
    def dim(self) -> int:
        return self.graph.dim if self.graph is not None else self.table.shape[1]

    def embed(self, texts: list[str] | str, batch_size: int = 32) -> np.ndarray:
        """float32 [n, dim] unit vectors (cosine similarity is their dot product)."""
        texts = [texts] if isinstance(texts, str) else list(texts)
        if self.graph is not None:
            return self.graph.embed(texts, batch_size)
        return embed_with_table(self.word_ids, self.table, texts)

    def benchmark(self, batch_size: int = 1, seq_len: int = 128, runs: int = 50, warmup: int = 5) -> dict:
        """Median and spread of embed() on texts of seq_len tokens ([CLS] and [SEP] included), timed in
        this process: text to vector, tokenizing included, as the kit's embedding report times it."""
        texts = [" ".join(["word"] * max(1, seq_len - 2))] * batch_size  # "word" is one WordPiece token
        for _ in range(warmup):
            self.embed(texts, batch_size)
        samples = []
        for _ in range(runs):
            start = time.perf_counter()
            self.embed(texts, batch_size)
            samples.append((time.perf_counter() - start) * 1000.0)
        runtime = self.graph.runtime if self.graph is not None else {"runtime": "numpy"}
        return {"case": f"b{batch_size}/s{seq_len}", "p50_ms": float(np.median(samples)),
                "p90_ms": float(np.percentile(samples, 90)), "min_ms": float(min(samples)), "runs": runs, **runtime}

    def similarity(self, a, b) -> np.ndarray:
        """Cosine similarity matrix [len(a), len(b)] of texts or vectors."""
        return self._vectors(a) @ self._vectors(b).T

    def load_index(self, path) -> np.ndarray:
        """An index built elsewhere, as unit float32 rows [n, dim]: a .npy of a teacher's vectors (its
        bundle's `predict.py --embed FILE --out index.npy`, or sentence-transformers' `encode` saved with
        np.save), checked against this bundle: the same dimension, finite non-zero rows. Rows that are
        not unit length (an encode without normalize_embeddings) are normalised: the search is cosine."""
        vectors = np.load(path, allow_pickle=False)  # a plain array: no pickle ever
        if vectors.ndim != 2 or vectors.shape[1] != self.dim:
            raise ValueError(f"{path}: an index of shape {tuple(vectors.shape)}, but this bundle's vectors have "
                             f"{self.dim} dimensions (build the index with the model this bundle stands in for)")
        norms = np.linalg.norm(vectors, axis=1)
        if not np.all(np.isfinite(norms)) or (len(norms) and norms.min() == 0):
            raise ValueError(f"{path}: the index has empty or non-finite rows")
        return normalize_rows(vectors.astype(np.float32, copy=False))

    def search(self, query, vectors, k: int = 10) -> list[tuple[int, float]]:
        """The k rows of `vectors` (an index: embedded texts, or a .npy file's path: `load_index`) most
        similar to the query, best first."""
        if isinstance(vectors, (str, Path)):
            vectors = self.load_index(vectors)
        scores = self.similarity(query, vectors)[0]
        top = np.argsort(-scores, kind="stable")[:k]
        return [(int(row), float(scores[row])) for row in top]

    def _vectors(self, texts_or_vectors) -> np.ndarray:
        if isinstance(texts_or_vectors, str) or (isinstance(texts_or_vectors, (list, tuple))
                                                 and texts_or_vectors and isinstance(texts_or_vectors[0], str)):
            return self.embed(texts_or_vectors)
        return normalize_rows(np.atleast_2d(np.asarray(texts_or_vectors, dtype=np.float32)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="embed texts with this embedding bundle")
    parser.add_argument("--embed", help="a text file, one text a line ('-': stdin)")
    parser.add_argument("--out", default="-", help="vectors.npy, vectors.json or '-' (JSON to stdout)")
    parser.add_argument("--threads", type=int, default=None,
                        help="ONNX Runtime threads (0: one per physical core; default: embedding.json's runtime)")
    parser.add_argument("--no-spin", dest="spin", action="store_false", default=None,
                        help="ONNX Runtime threads block instead of spinning while they wait: for a CPU shared "
                             "with other busy threads (default: embedding.json's runtime)")
    parser.add_argument("--benchmark", type=int, metavar="RUNS", default=0,
                        help="time RUNS embed() calls on texts of --seq-len tokens; print JSON")
    parser.add_argument("--search", metavar="TEXT", help="print the --k rows of --index most similar to TEXT (JSON)")
    parser.add_argument("--index", metavar="FILE.npy", help="the index --search looks in (e.g. a teacher's vectors)")
    parser.add_argument("--k", type=int, default=10, help="rows --search prints")
    parser.add_argument("--seq-len", type=int, default=128, help="tokens per text for --benchmark")
    parser.add_argument("--batch-size", type=int, default=1, help="texts per call for --benchmark")
    args = parser.parse_args(argv)
    try:
        predictor = Predictor(Path(__file__).resolve().parent, threads=args.threads, spin=args.spin)
    except BundleDamaged as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if args.benchmark:
        print(json.dumps(predictor.benchmark(args.batch_size, args.seq_len, runs=args.benchmark)))
        return 0
    if args.search is not None:
        if not args.index:
            parser.error("--search needs --index FILE.npy")
        try:
            print(json.dumps(predictor.search(args.search, args.index, args.k)))
        except (OSError, ValueError) as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
        return 0
    if not args.embed:
        parser.error("give --embed FILE (or --search TEXT --index FILE.npy, or --benchmark RUNS)")
    handle = sys.stdin if args.embed == "-" else open(args.embed, encoding="utf-8-sig")
    with handle:
        texts = [line.rstrip("\n") for line in handle]
    if not any(text.strip() for text in texts):
        print(f"error: {args.embed} holds no text", file=sys.stderr)
        return 2
    vectors = predictor.embed(texts)
    if args.out.endswith(".npy"):
        np.save(args.out, vectors)
    else:
        text = json.dumps(vectors.tolist())
        print(text) if args.out == "-" else Path(args.out).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
