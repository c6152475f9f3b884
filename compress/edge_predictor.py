"""Edge predictor: run the bundled int8 ONNX classifier with onnxruntime, tokenizers and numpy only.

A sequence classifier (one label per text):

    python predict.py "some text"                 # label<TAB>score
    python predict.py "premise" --pair "hypothesis"
    echo "one text per line" | python predict.py   # or --batch FILE; pairs as "a<TAB>b" lines
    python predict.py --json "some text"          # all class probabilities as JSON

    from predict import Predictor
    Predictor().predict(["some text"])            # [{"label": ..., "score": ..., "scores": {...}}]

A token classifier (a tag per word: NER, part of speech; labels.json "kind": "token"):

    python predict.py "Apple is looking at buying a U.K. startup"   # one JSON object per text

    Predictor().predict(["Apple is looking ..."])
    # [{"words": [{"word": "Apple", "tag": "B-ORG", "score": 0.98, "start": 0, "end": 5}, ...],
    #   "entities": [{"entity_group": "ORG", "word": "Apple", "score": 0.98, "start": 0, "end": 5}, ...]}]
    Predictor().predict_words([["Apple", "is", "looking"]])   # [[{"word", "tag", "score"}, ...]]

Words are the tokenizer's own pre-tokenizer words (whitespace and punctuation splits), with
character offsets into the original text; each is tagged by its first sub-token, and B-X/I-X
words merge into entities as in transformers' token-classification pipeline with
aggregation_strategy="first". Texts are truncated to labels.json's max_length tokens: words past
it get no tag and are left out of the output.

Needs: onnxruntime, tokenizers, numpy (requirements.txt). No torch, no transformers.
"""
from __future__ import annotations

import argparse
import bisect
import json
import os
import sys
from pathlib import Path

import numpy as np
import onnxruntime as ort
from tokenizers import PreTokenizedString, Tokenizer

HERE = Path(__file__).resolve().parent


def softmax(logits: np.ndarray) -> np.ndarray:
    logits = np.asarray(logits, dtype=np.float64)
    probs = np.exp(logits - logits.max(-1, keepdims=True))
    return probs / probs.sum(-1, keepdims=True)


def first_positions(word_ids) -> list[int]:
    """Sub-token positions that start a word (the position each word is tagged on)."""
    positions, previous = [], None
    for position, word in enumerate(word_ids):
        if word is not None and word != previous:
            positions.append(position)
        previous = word
    return positions


def split_tag(tag: str) -> tuple[str, str]:
    """("B" | "I", entity type) of a BIO tag; a tag without a B-/I- prefix continues, like the pipeline."""
    if tag.startswith(("B-", "I-")):
        return tag[0], tag[2:]
    return "I", tag


def group_entities(text: str | None, words: list[dict], bio: bool = True, outside: str = "O") -> list[dict]:
    """Entities of tagged words (dicts with "tag", "score", "start", "end"): a B-X word starts an X
    entity, following I-X words extend it, an I-X word after anything but an X word starts a new
    one, "O" words belong to none. Score: the mean of its words' scores; word: text[start:end].
    A tag set without BIO tags (part of speech) has no entities."""
    if not bio:
        return []
    entities, current = [], None
    for word in words:
        if word["tag"] == outside:
            current = None
            continue
        prefix, kind = split_tag(word["tag"])
        if current is not None and prefix == "I" and current["entity_group"] == kind:
            current["end"] = word["end"]
            current["_scores"].append(word["score"])
            continue
        current = {"entity_group": kind, "start": word["start"], "end": word["end"], "_scores": [word["score"]]}
        entities.append(current)
    out = []
    for entity in entities:
        start, end = entity["start"], entity["end"]
        out.append({"entity_group": entity["entity_group"],
                    "word": text[start:end] if text is not None else None,
                    "score": float(np.mean(entity["_scores"])), "start": start, "end": end})
    return out


class Predictor:
    def __init__(self, bundle_dir: str | os.PathLike | None = None, threads: int | None = None):
        root = Path(bundle_dir) if bundle_dir else HERE
        meta = json.loads((root / "labels.json").read_text(encoding="utf-8"))
        self.labels = [meta["id2label"][str(i)] for i in range(len(meta["id2label"]))]
        self.kind = meta.get("kind", "sequence")  # bundles written before token support are sequence ones
        self.bio = any(label.startswith(("B-", "I-")) for label in self.labels)
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

    @property
    def is_token(self) -> bool:
        return self.kind == "token"

    def _run(self, encodings) -> np.ndarray:
        columns = {"input_ids": [e.ids for e in encodings], "attention_mask": [e.attention_mask for e in encodings],
                   "token_type_ids": [e.type_ids for e in encodings]}
        feed = {name: np.asarray(columns[name], dtype=np.int64) for name in self.input_names}
        return self.session.run(None, feed)[0]

    def _encode(self, inputs, pretokenized: bool = False):
        if pretokenized:
            return self.tokenizer.encode_batch([list(words) for words in inputs], is_pretokenized=True)
        return self.tokenizer.encode_batch(inputs)

    def logits(self, texts: list[str], pairs: list[str] | None = None) -> np.ndarray:
        """Sequence model: (texts, labels). Token model: (words, labels), the first sub-token's logits of
        every word that fits in max_length, text after text (the words of `predict`)."""
        if self.is_token:
            if pairs is not None:
                raise ValueError("a token classifier tags single texts; pairs are not supported")
            encodings = self._encode(list(texts))
            return _gather(self._run(encodings), encodings, len(self.labels))
        inputs = list(zip(texts, pairs)) if pairs is not None else list(texts)
        return self._run(self._encode(inputs))

    def word_logits(self, word_lists: list[list[str]]) -> np.ndarray:
        """Token model, pre-split input: (words, labels), the first sub-token's logits of every word
        that fits in max_length, list after list (a word the tokenizer turns into nothing is skipped)."""
        self._need_token()
        encodings = self._encode(word_lists, pretokenized=True)
        return _gather(self._run(encodings), encodings, len(self.labels))

    def predict(self, texts: list[str] | str, pairs: list[str] | None = None, batch_size: int = 32) -> list[dict]:
        texts = [texts] if isinstance(texts, str) else list(texts)
        if self.is_token:
            if pairs is not None:
                raise ValueError("a token classifier tags single texts; pairs are not supported")
            return self._predict_texts(texts, batch_size)
        results = []
        for start in range(0, len(texts), batch_size):
            chunk_pairs = pairs[start:start + batch_size] if pairs is not None else None
            probs = softmax(self.logits(texts[start:start + batch_size], chunk_pairs))
            for row in probs:
                best = int(row.argmax())
                results.append({"label": self.labels[best], "score": float(row[best]),
                                "scores": {name: float(p) for name, p in zip(self.labels, row)}})
        return results

    def predict_words(self, word_lists: list[list[str]], batch_size: int = 32) -> list[list[dict]]:
        """Tags of pre-split words: per list, [{"word", "tag", "score"}, ...] in order, for the words that
        fit in max_length (the rest, and words the tokenizer turns into nothing, are left out)."""
        self._need_token()
        word_lists = [list(words) for words in word_lists]
        results = []
        for start in range(0, len(word_lists), batch_size):
            chunk = word_lists[start:start + batch_size]
            encodings = self._encode(chunk, pretokenized=True)
            probs = softmax(self._run(encodings))
            for words, encoding, row in zip(chunk, encodings, probs):
                tagged = []
                for position in first_positions(encoding.word_ids):
                    best = int(row[position].argmax())
                    tagged.append({"word": words[encoding.word_ids[position]], "tag": self.labels[best],
                                   "score": float(row[position, best])})
                results.append(tagged)
        return results

    def _predict_texts(self, texts: list[str], batch_size: int) -> list[dict]:
        results = []
        for start in range(0, len(texts), batch_size):
            chunk = texts[start:start + batch_size]
            encodings = self._encode(chunk)
            probs = softmax(self._run(encodings))
            for text, encoding, row in zip(chunk, encodings, probs):
                words = []
                for position, (word_start, word_end) in self._word_spans(text, encoding):
                    best = int(row[position].argmax())
                    words.append({"word": text[word_start:word_end], "tag": self.labels[best],
                                  "score": float(row[position, best]), "start": word_start, "end": word_end})
                results.append({"words": words, "entities": group_entities(text, words, self.bio)})
        return results

    def _word_spans(self, text: str, encoding) -> list[tuple[int, tuple[int, int]]]:
        """(first sub-token position, (start, end) in text) of each word the encoding holds. Spans are
        the pre-tokenizer's words in the original text, so a word cut by truncation keeps its whole span."""
        offsets = encoding.offsets
        splits = self._splits(text)
        starts = [s for s, _ in splits]
        spans, seen = [], set()
        for position in first_positions(encoding.word_ids):
            char = offsets[position][0]
            index = bisect.bisect_right(starts, char) - 1
            if 0 <= index < len(splits) and char < splits[index][1] and index not in seen:
                seen.add(index)
                span = splits[index]
            else:  # no pre-tokenizer word here: the word's own sub-tokens
                word = encoding.word_ids[position]
                ends = [offsets[p][1] for p, w in enumerate(encoding.word_ids) if w == word]
                span = (char, max(ends))
            spans.append((position, span))
        return spans

    def _splits(self, text: str) -> list[tuple[int, int]]:
        """The pre-tokenizer's words as character spans of the original text (surrounding spaces trimmed)."""
        if self.tokenizer.pre_tokenizer is None:
            return []
        pretokenized = PreTokenizedString(text)
        if self.tokenizer.normalizer is not None:
            pretokenized.normalize(lambda normalized: self.tokenizer.normalizer.normalize(normalized))
        self.tokenizer.pre_tokenizer.pre_tokenize(pretokenized)
        spans = []
        for _, (start, end), _ in pretokenized.get_splits(offset_referential="original", offset_type="char"):
            while start < end and text[start].isspace():
                start += 1
            while end > start and text[end - 1].isspace():
                end -= 1
            if end > start:
                spans.append((start, end))
        return spans

    def _need_token(self) -> None:
        if not self.is_token:
            raise ValueError("this bundle is a sequence classifier: use predict()/logits() on texts")


def _gather(logits: np.ndarray, encodings, num_labels: int) -> np.ndarray:
    """(rows, seq, labels) sub-token logits -> (words, labels): each word's first sub-token, row by row."""
    picked = [logits[row, first_positions(encoding.word_ids)] for row, encoding in enumerate(encodings)]
    return np.concatenate(picked) if picked else np.zeros((0, num_labels), logits.dtype)


def _read_lines(handle) -> tuple[list[str], list[str] | None]:
    lines = [line.rstrip("\n") for line in handle if line.strip()]
    if lines and all("\t" in line for line in lines):
        split = [line.split("\t", 1) for line in lines]
        return [a for a, _ in split], [b for _, b in split]
    return lines, None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Classify text (or tag its words) with the bundled int8 ONNX model.")
    parser.add_argument("text", nargs="*", help="text(s) to classify; none: read lines from stdin")
    parser.add_argument("--pair", action="append", help="second text of a pair (one per text)")
    parser.add_argument("--batch", help="file with one text per line (a<TAB>b for pairs)")
    parser.add_argument("--json", action="store_true", help="print one JSON object per text (always, for tagging)")
    parser.add_argument("--threads", type=int, default=None, help="ONNX Runtime threads")
    args = parser.parse_args(argv)
    predictor = Predictor(threads=args.threads)
    if args.batch:
        with open(args.batch, encoding="utf-8") as handle:
            if predictor.is_token:  # a tab is no pair separator for tagging: one text per line
                texts, pairs = [line.rstrip("\n") for line in handle if line.strip()], None
            else:
                texts, pairs = _read_lines(handle)
    elif args.text:
        texts, pairs = args.text, args.pair
        if pairs is not None and len(pairs) != len(texts):
            parser.error("give one --pair per text")
    elif predictor.is_token:
        texts, pairs = [line.rstrip("\n") for line in sys.stdin if line.strip()], None
    else:
        texts, pairs = _read_lines(sys.stdin)
    if not texts:
        parser.error("no text given (pass it as an argument, --batch FILE, or on stdin)")
    if predictor.is_token:
        if pairs is not None:
            parser.error("this bundle tags words of single texts: --pair is not supported")
        for text, result in zip(texts, predictor.predict(texts)):
            print(json.dumps({"text": text, **result}, ensure_ascii=False))
        return 0
    for text, result in zip(texts, predictor.predict(texts, pairs)):
        if args.json:
            print(json.dumps({"text": text, **result}, ensure_ascii=False))
        else:
            print(f"{result['label']}\t{result['score']:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
