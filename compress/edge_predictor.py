"""Edge predictor: run the bundled int8 ONNX classifier with onnxruntime, tokenizers and numpy only.

A sequence classifier (one label per text):

    python predict.py "some text"                 # label<TAB>score
    python predict.py "premise" --pair "hypothesis"
    echo "one text per line" | python predict.py   # or --batch FILE; pairs as "a<TAB>b" lines
    python predict.py --json "some text"          # all class probabilities as JSON
    python predict.py --benchmark 50              # p50 of the model call at batch 1, 128 tokens (JSON)
    python predict.py --threads 1 --no-spin ...   # for a CPU shared with other busy threads

    from predict import Predictor
    Predictor().predict(["some text"])            # [{"label": ..., "score": ..., "scores": {...}}]

An extractive QA model (an answer span of a context):

    python predict.py --question "Who wrote it?" --context context.txt    # text<TAB>score
    echo '{"question": "...", "context": "..."}' | python predict.py --json
    Predictor().answer("Who wrote it?", context)   # {"text", "start", "end", "score"}

A token classifier (a tag per word: NER, part of speech):

    python predict.py "Apple is looking at buying a U.K. startup"   # one JSON object per text

    Predictor().predict(["Apple is looking ..."])
    # [{"words": [{"word": "Apple", "tag": "B-ORG", "score": 0.98, "start": 0, "end": 5}, ...],
    #   "entities": [{"entity_group": "ORG", "word": "Apple", "score": 0.98, "start": 0, "end": 5}, ...]}]
    Predictor().predict_words([["Apple", "is", "looking"]])   # [[{"word", "tag", "score"}, ...]]

What a model's outputs become is its task kind's business: the bundle ships the kind's own
postprocessing file beside this one (labels.json "kind_module", e.g. token_edge.py: words are the
tokenizer's pre-tokenizer words, tagged by their first sub-token, B-X/I-X words merged into
entities), and this file only loads the model and the tokenizer and hands them over.

Needs: onnxruntime, tokenizers, numpy (requirements.txt). No torch, no transformers.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort
from tokenizers import Tokenizer

try:  # in a bundle: the copy beside predict.py; in the kit: its own module
    from bundle_files import BundleDamaged, check_files, open_session
except ImportError:
    from shrinkbert.compress.bundle_files import BundleDamaged, check_files, open_session

HERE = Path(__file__).resolve().parent


def softmax(logits: np.ndarray) -> np.ndarray:
    logits = np.asarray(logits, dtype=np.float64)
    probs = np.exp(logits - logits.max(-1, keepdims=True))
    return probs / probs.sum(-1, keepdims=True)


def load_kind_module(root: Path, meta: dict):
    """The kind's postprocessing file shipped beside predict.py (labels.json "kind_module"); a
    bundle written before it was shipped is a sequence classifier's or a tagger's of that name."""
    name = meta.get("kind_module") or f"{meta.get('kind', 'sequence')}_edge.py"
    for folder in (root, HERE.parent / "core" / "kinds" / "edge"):  # the bundle, else the kit's own copy
        if (folder / name).is_file():
            spec = importlib.util.spec_from_file_location(f"_edge_kind_{abs(hash(str(folder / name)))}", folder / name)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            return module
    raise FileNotFoundError(f"{root} has no {name} (the postprocessing of its task kind)")


class Predictor:
    def __init__(self, bundle_dir: str | os.PathLike | None = None, threads: int | None = None,
                 spin: bool | None = None, model_file: str | None = None, flush_denormals: bool | None = None):
        """model_file: the graph to run, relative to the bundle (None: labels.json's; a mobile bundle's
        "mobile/model.ort" runs too). threads / spin: ONNX Runtime's intra-op threads and whether they spin while waiting for
        work. None: the bundle's defaults (labels.json "runtime", the fastest setting measured for a
        process of its own). A bundle that shares its CPU with other busy threads (a PyTorch model in
        the same process, another server) runs better with spin=False and fewer threads.
        flush_denormals: ONNX Runtime's threads flush denormal floats to zero (bundle_files.open_session;
        None: labels.json "runtime", on where it does not say). On one thread ONNX Runtime computes on
        your thread, which then flushes too: in a process whose PyTorch must keep denormals, pass
        flush_denormals=False or more threads."""
        root = Path(bundle_dir) if bundle_dir else HERE
        check_files(root)
        meta = json.loads((root / "labels.json").read_text(encoding="utf-8"))
        self.meta = meta  # the kind's own entries too (a QA bundle's null threshold)
        self.labels = [meta["id2label"][str(i)] for i in range(len(meta["id2label"]))]
        self.kind = meta.get("kind", "sequence")  # bundles written before token support are sequence ones
        self.edge = load_kind_module(root, meta)  # what outputs become: the task kind's own file
        self.bio = any(label.startswith(("B-", "I-")) for label in self.labels)
        self.max_length = int(meta.get("max_length", 128))
        self.tokenizer = Tokenizer.from_file(str(root / "tokenizer.json"))
        self.tokenizer.enable_truncation(self.max_length)
        self.tokenizer.enable_padding(pad_id=int(meta.get("pad_token_id", 0)), pad_token=meta.get("pad_token", "[PAD]"))
        defaults = meta.get("runtime") or {}
        threads = defaults.get("threads") if threads is None else threads
        spin = defaults.get("spin", True) if spin is None else spin  # ORT's own default: spinning on
        flush = defaults.get("flush_denormals", True) if flush_denormals is None else flush_denormals
        options = ort.SessionOptions()
        if threads:
            options.intra_op_num_threads = int(threads)
        options.add_session_config_entry("session.intra_op.allow_spinning", "1" if spin else "0")
        self.session = open_session(root / (model_file or meta.get("model_file", "model.onnx")), options, bool(flush))
        self.input_names = [i.name for i in self.session.get_inputs()]
        self.runtime = {"threads": int(threads) if threads else None, "spin": bool(spin),  # None: ORT's default
                        "flush_denormals": bool(flush)}

    def feed(self, encodings) -> dict[str, np.ndarray]:
        """The graph's inputs for encoded texts (MPNet's and DistilBERT's graphs take no token types)."""
        columns = {"input_ids": [e.ids for e in encodings], "attention_mask": [e.attention_mask for e in encodings],
                   "token_type_ids": [e.type_ids for e in encodings]}
        return {name: np.asarray(columns[name], dtype=np.int64) for name in self.input_names}

    def run(self, encodings) -> np.ndarray:
        return self.session.run(None, self.feed(encodings))[0]

    def encode(self, inputs, pretokenized: bool = False):
        if pretokenized:
            return self.tokenizer.encode_batch([list(words) for words in inputs], is_pretokenized=True)
        return self.tokenizer.encode_batch(inputs)

    def probabilities(self, encodings) -> np.ndarray:
        """Softmax of the model's outputs for encoded inputs."""
        return softmax(self.run(encodings))

    def logits(self, texts: list[str], pairs: list[str] | None = None) -> np.ndarray:
        """The rows the kit compares: a sequence model's (texts, labels); a token model's (words,
        labels), the first sub-token's logits of every word that fits, text after text."""
        return self.edge.logits(self, list(texts), pairs)

    def word_logits(self, word_lists: list[list[str]]) -> np.ndarray:
        """Token model, pre-split input: (words, labels), one row per word that fits in max_length."""
        return self.edge.word_logits(self, [list(words) for words in word_lists])

    def rows_logits(self, rows: list[dict], batch_size: int = 16) -> np.ndarray:
        """`logits` of the kit's own rows (dicts of the task kind's columns), in batches."""
        return self.edge.rows_logits(self, rows, batch_size)

    def predict(self, texts: list[str] | str, pairs: list[str] | None = None, batch_size: int = 32) -> list[dict]:
        texts = [texts] if isinstance(texts, str) else list(texts)
        return self.edge.predict(self, texts, pairs, batch_size)

    def answer(self, question: str, context: str) -> dict:
        """Extractive QA bundle: {"text", "start", "end", "score"} of the answer span in `context`
        (text "" and start/end/score None when a SQuAD v2 bundle finds no answer)."""
        if not hasattr(self.edge, "answer"):
            raise ValueError(f"this bundle is a {self.kind} model: answer() is for question-answering bundles")
        return self.edge.answer(self, question, context)

    def predict_words(self, word_lists: list[list[str]], batch_size: int = 32) -> list[list[dict]]:
        """Tags of pre-split words: per list, [{"word", "tag", "score"}, ...] for the words that fit."""
        return self.edge.predict_words(self, word_lists, batch_size)

    def benchmark(self, text: str = "the movie was good", batch_size: int = 1, seq_len: int = 128,
                  runs: int = 50, warmup: int = 5) -> dict:
        """Median and spread of the model call alone (inputs tokenized beforehand, padded to seq_len
        tokens), timed in this process with this Predictor's threads and spin: what the report's
        latency table calls bN/sNNN."""
        saved = self.tokenizer.padding, self.tokenizer.truncation
        self.tokenizer.enable_truncation(seq_len)
        self.tokenizer.enable_padding(length=seq_len, pad_id=saved[0]["pad_id"], pad_token=saved[0]["pad_token"])
        try:
            encodings = self.encode([text] * batch_size)
        finally:
            self.tokenizer.enable_padding(**{k: saved[0][k] for k in ("pad_id", "pad_token")})
            self.tokenizer.enable_truncation(saved[1]["max_length"])
        feed = self.feed(encodings)
        for _ in range(warmup):
            self.session.run(None, feed)
        samples = []
        for _ in range(runs):
            start = time.perf_counter()
            self.session.run(None, feed)
            samples.append((time.perf_counter() - start) * 1000.0)
        return {"case": f"b{batch_size}/s{seq_len}", "p50_ms": float(np.median(samples)),
                "p90_ms": float(np.percentile(samples, 90)), "min_ms": float(min(samples)), "runs": runs,
                **self.runtime}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Classify text (or tag its words) with the bundled int8 ONNX model.")
    parser.add_argument("text", nargs="*", help="text(s) to classify; none: read lines from stdin")
    parser.add_argument("--pair", action="append", help="second text of a pair (one per text)")
    parser.add_argument("--batch", help="file with one text per line (a<TAB>b for pairs)")
    parser.add_argument("--question", help="question-answering bundles: the question (with --context FILE)")
    parser.add_argument("--context", help="question-answering bundles: a text file holding the context")
    parser.add_argument("--json", action="store_true", help="print one JSON object per text (always, for tagging)")
    parser.add_argument("--threads", type=int, default=None,
                        help="ONNX Runtime threads (default: labels.json's runtime, else one per physical core)")
    parser.add_argument("--no-spin", dest="spin", action="store_false", default=None,
                        help="ONNX Runtime threads block instead of spinning while they wait: for a CPU shared "
                             "with other busy threads")
    parser.add_argument("--benchmark", type=int, metavar="RUNS", default=0,
                        help="time RUNS model calls on one text (or the given one) padded to --seq-len; print JSON")
    parser.add_argument("--seq-len", type=int, default=128, help="tokens per row for --benchmark")
    parser.add_argument("--batch-size", type=int, default=1, help="rows per call for --benchmark")
    args = parser.parse_args(argv)
    try:
        predictor = Predictor(threads=args.threads, spin=args.spin)
    except BundleDamaged as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if args.benchmark:
        text = args.text[0] if args.text else "the movie was good"
        print(json.dumps(predictor.benchmark(text, args.batch_size, args.seq_len, runs=args.benchmark)))
        return 0
    if args.question is not None or args.context is not None:
        if args.question is None or args.context is None:
            parser.error("give both --question and --context FILE")
        try:
            context = Path(args.context).read_text(encoding="utf-8")
        except OSError as err:
            parser.error(f"cannot read --context {args.context}: {err.strerror}")
        try:
            result = predictor.answer(args.question, context)
        except ValueError as err:
            parser.error(str(err))
        print(json.dumps(result) if args.json else f"{result['text']}\t{result['score']}")
        return 0
    if args.batch:
        with open(args.batch, encoding="utf-8") as handle:
            texts, pairs = predictor.edge.read_lines(handle)
    elif args.text:
        texts, pairs = args.text, args.pair
        if pairs is not None and len(pairs) != len(texts):
            parser.error("give one --pair per text")
    else:
        texts, pairs = predictor.edge.read_lines(sys.stdin)
    if not texts:
        parser.error("no text given (pass it as an argument, --batch FILE, or on stdin)")
    predictor.edge.print_results(predictor, texts, pairs, args.json, parser.error)
    return 0


if __name__ == "__main__":
    sys.exit(main())
