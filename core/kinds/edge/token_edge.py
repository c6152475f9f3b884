"""Edge postprocessing of a token classifier: a tag per word, and BIO tags merged into entities.

Shipped inside a bundle beside predict.py (see core/kinds/edge/__init__.py): numpy and
tokenizers only. Words are the tokenizer's own pre-tokenizer words (whitespace and punctuation
splits), with character offsets into the original text; each is tagged by its first sub-token,
and B-X/I-X words merge into entities as in transformers' token-classification pipeline with
aggregation_strategy="first". Texts are truncated to labels.json's max_length tokens: words past
it get no tag and are left out of the output.
"""
from __future__ import annotations

import bisect
import json

import numpy as np
from tokenizers import PreTokenizedString


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
        prefix, entity_type = split_tag(word["tag"])
        if current is not None and prefix == "I" and current["entity_group"] == entity_type:
            current["end"] = word["end"]
            current["_scores"].append(word["score"])
            continue
        current = {"entity_group": entity_type, "start": word["start"], "end": word["end"], "_scores": [word["score"]]}
        entities.append(current)
    out = []
    for entity in entities:
        start, end = entity["start"], entity["end"]
        out.append({"entity_group": entity["entity_group"],
                    "word": text[start:end] if text is not None else None,
                    "score": float(np.mean(entity["_scores"])), "start": start, "end": end})
    return out


def is_bio(labels) -> bool:
    return any(label.startswith(("B-", "I-")) for label in labels)


def _gather(logits: np.ndarray, encodings, num_labels: int) -> np.ndarray:
    """(rows, seq, labels) sub-token logits -> (words, labels): each word's first sub-token, row by row."""
    picked = [logits[row, first_positions(encoding.word_ids)] for row, encoding in enumerate(encodings)]
    return np.concatenate(picked) if picked else np.zeros((0, num_labels), logits.dtype)


def logits(p, texts, pairs=None) -> np.ndarray:
    """(words, labels): the first sub-token's logits of every word that fits in max_length, text
    after text (the words of `predict`)."""
    if pairs is not None:
        raise ValueError("a token classifier tags single texts; pairs are not supported")
    encodings = p.encode(list(texts))
    return _gather(p.run(encodings), encodings, len(p.labels))


def word_logits(p, word_lists) -> np.ndarray:
    """Pre-split input: (words, labels), the first sub-token's logits of every word that fits in
    max_length, list after list (a word the tokenizer turns into nothing is skipped)."""
    encodings = p.encode(word_lists, pretokenized=True)
    return _gather(p.run(encodings), encodings, len(p.labels))


def rows_logits(p, rows, batch_size: int = 16) -> np.ndarray:
    return np.concatenate([word_logits(p, [r["tokens"] for r in rows[i:i + batch_size]])
                           for i in range(0, len(rows), batch_size)])


def predict(p, texts, pairs=None, batch_size: int = 32) -> list[dict]:
    """[{"words": [{"word", "tag", "score", "start", "end"}], "entities": [...]}] per text."""
    if pairs is not None:
        raise ValueError("a token classifier tags single texts; pairs are not supported")
    bio = is_bio(p.labels)
    results = []
    for start in range(0, len(texts), batch_size):
        chunk = texts[start:start + batch_size]
        encodings = p.encode(chunk)
        probs = p.probabilities(encodings)
        for text, encoding, row in zip(chunk, encodings, probs):
            words = []
            for position, (word_start, word_end) in _word_spans(p.tokenizer, text, encoding):
                best = int(row[position].argmax())
                words.append({"word": text[word_start:word_end], "tag": p.labels[best],
                              "score": float(row[position, best]), "start": word_start, "end": word_end})
            results.append({"words": words, "entities": group_entities(text, words, bio)})
    return results


def predict_words(p, word_lists, batch_size: int = 32) -> list[list[dict]]:
    """Tags of pre-split words: per list, [{"word", "tag", "score"}, ...] in order, for the words that
    fit in max_length (the rest, and words the tokenizer turns into nothing, are left out)."""
    word_lists = [list(words) for words in word_lists]
    results = []
    for start in range(0, len(word_lists), batch_size):
        chunk = word_lists[start:start + batch_size]
        encodings = p.encode(chunk, pretokenized=True)
        probs = p.probabilities(encodings)
        for words, encoding, row in zip(chunk, encodings, probs):
            tagged = []
            for position in first_positions(encoding.word_ids):
                best = int(row[position].argmax())
                tagged.append({"word": words[encoding.word_ids[position]], "tag": p.labels[best],
                               "score": float(row[position, best])})
            results.append(tagged)
    return results


def _word_spans(tokenizer, text: str, encoding) -> list[tuple[int, tuple[int, int]]]:
    """(first sub-token position, (start, end) in text) of each word the encoding holds. Spans are
    the pre-tokenizer's words in the original text, so a word cut by truncation keeps its whole span."""
    offsets = encoding.offsets
    splits = _splits(tokenizer, text)
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
            ends = [offsets[q][1] for q, w in enumerate(encoding.word_ids) if w == word]
            span = (char, max(ends))
        spans.append((position, span))
    return spans


def _splits(tokenizer, text: str) -> list[tuple[int, int]]:
    """The pre-tokenizer's words as character spans of the original text (surrounding spaces trimmed)."""
    if tokenizer.pre_tokenizer is None:
        return []
    pretokenized = PreTokenizedString(text)
    if tokenizer.normalizer is not None:
        pretokenized.normalize(lambda normalized: tokenizer.normalizer.normalize(normalized))
    tokenizer.pre_tokenizer.pre_tokenize(pretokenized)
    spans = []
    for _, (start, end), _ in pretokenized.get_splits(offset_referential="original", offset_type="char"):
        while start < end and text[start].isspace():
            start += 1
        while end > start and text[end - 1].isspace():
            end -= 1
        if end > start:
            spans.append((start, end))
    return spans


def read_lines(handle) -> tuple[list[str], None]:
    """One text per line (a tab is no pair separator for tagging)."""
    return [line.rstrip("\n") for line in handle if line.strip()], None


def print_results(p, texts, pairs, as_json: bool, error) -> None:
    """One JSON object per text, always."""
    if pairs is not None:
        error("this bundle tags words of single texts: --pair is not supported")
    for text, result in zip(texts, predict(p, texts)):
        print(json.dumps({"text": text, **result}, ensure_ascii=False))
