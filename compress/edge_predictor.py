"""Edge predictor: run the bundled int8 ONNX classifier with onnxruntime, tokenizers and numpy only.

    python predict.py "some text"                 # label<TAB>score
    python predict.py "premise" --pair "hypothesis"
    echo "one text per line" | python predict.py   # or --batch FILE; pairs as "a<TAB>b" lines
    python predict.py --json "some text"          # all class probabilities as JSON

    from predict import Predictor
    Predictor().predict(["some text"])            # [{"label": ..., "score": ..., "scores": {...}}]

Needs: onnxruntime, tokenizers, numpy (requirements.txt). No torch, no transformers.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import numpy as np
import onnxruntime as ort
from tokenizers import Tokenizer

HERE = Path(__file__).resolve().parent


class Predictor:
    def __init__(self, bundle_dir: str | os.PathLike | None = None, threads: int | None = None):
        root = Path(bundle_dir) if bundle_dir else HERE
        meta = json.loads((root / "labels.json").read_text(encoding="utf-8"))
        self.labels = [meta["id2label"][str(i)] for i in range(len(meta["id2label"]))]
        self.max_length = int(meta.get("max_length", 128))
        self.tokenizer = Tokenizer.from_file(str(root / "tokenizer.json"))
        self.tokenizer.enable_truncation(self.max_length)
        self.tokenizer.enable_padding(pad_id=int(meta.get("pad_token_id", 0)), pad_token=meta.get("pad_token", "[PAD]"))
        options = ort.SessionOptions()
        if threads:
            options.intra_op_num_threads = threads
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self.session = ort.InferenceSession(str(root / meta.get("model_file", "model.onnx")), options,
                                            providers=["CPUExecutionProvider"])
        self.input_names = [i.name for i in self.session.get_inputs()]

    def logits(self, texts: list[str], pairs: list[str] | None = None) -> np.ndarray:
        inputs = list(zip(texts, pairs)) if pairs is not None else list(texts)
        encodings = self.tokenizer.encode_batch(inputs)
        columns = {"input_ids": [e.ids for e in encodings], "attention_mask": [e.attention_mask for e in encodings],
                   "token_type_ids": [e.type_ids for e in encodings]}
        feed = {name: np.asarray(columns[name], dtype=np.int64) for name in self.input_names}
        return self.session.run(None, feed)[0]

    def predict(self, texts: list[str] | str, pairs: list[str] | None = None, batch_size: int = 32) -> list[dict]:
        texts = [texts] if isinstance(texts, str) else list(texts)
        results = []
        for start in range(0, len(texts), batch_size):
            chunk_pairs = pairs[start:start + batch_size] if pairs is not None else None
            logits = self.logits(texts[start:start + batch_size], chunk_pairs).astype(np.float64)
            probs = np.exp(logits - logits.max(-1, keepdims=True))
            probs /= probs.sum(-1, keepdims=True)
            for row in probs:
                best = int(row.argmax())
                results.append({"label": self.labels[best], "score": float(row[best]),
                                "scores": {name: float(p) for name, p in zip(self.labels, row)}})
        return results


def _read_lines(handle) -> tuple[list[str], list[str] | None]:
    lines = [line.rstrip("\n") for line in handle if line.strip()]
    if lines and all("\t" in line for line in lines):
        split = [line.split("\t", 1) for line in lines]
        return [a for a, _ in split], [b for _, b in split]
    return lines, None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Classify text with the bundled int8 ONNX model.")
    parser.add_argument("text", nargs="*", help="text(s) to classify; none: read lines from stdin")
    parser.add_argument("--pair", action="append", help="second text of a pair (one per text)")
    parser.add_argument("--batch", help="file with one text per line (a<TAB>b for pairs)")
    parser.add_argument("--json", action="store_true", help="print one JSON object per text")
    parser.add_argument("--threads", type=int, default=None, help="ONNX Runtime threads")
    args = parser.parse_args(argv)
    if args.batch:
        with open(args.batch, encoding="utf-8") as handle:
            texts, pairs = _read_lines(handle)
    elif args.text:
        texts, pairs = args.text, args.pair
        if pairs is not None and len(pairs) != len(texts):
            parser.error("give one --pair per text")
    else:
        texts, pairs = _read_lines(sys.stdin)
    if not texts:
        parser.error("no text given (pass it as an argument, --batch FILE, or on stdin)")
    predictor = Predictor(threads=args.threads)
    for text, result in zip(texts, predictor.predict(texts, pairs)):
        if args.json:
            print(json.dumps({"text": text, **result}, ensure_ascii=False))
        else:
            print(f"{result['label']}\t{result['score']:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
