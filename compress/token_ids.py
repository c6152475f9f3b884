"""A text's token ids by whole-word lookups: the static student's fast path past `tokenizers`' encode.

Copied into every embedding bundle beside predict.py. A tokenizer whose pre-tokenizer splits at
whitespace first (BERT's, `Whitespace`) and whose normalizer changes characters one at a time
(BERT's, lowercasing, accent stripping) tokenizes each whitespace-separated word on its own, so a
text's ids are its words' ids one after another, and each word's ids can be kept. At batch 1, `encode` is
most of a static student's time, and the cached lookup a small part of it (bench/token_ids.py times
both).

Where the two could differ the text goes through `encode` as before: any text that is not ASCII
(Unicode whitespace and control characters are split by Python and cleaned by BERT's normalizer
differently), ASCII's vertical tab, form feed and separator characters (whitespace to `str.split`,
control characters that BERT's normalizer removes), a text that holds an added token which strips
the spaces beside it (MPNet's `<mask>`), and every text of a tokenizer this reasoning does not cover
(a byte-level BPE or SentencePiece pre-tokenizer, an added token with spaces in it).
tests/test_token_ids.py checks the ids equal `encode`'s on real text of several styles.
"""
from __future__ import annotations

import json
import re

# pre-tokenizers that split at whitespace before anything else, and normalizers that change each
# character on its own (for ASCII text: BERT's cleaning of \t\n\r to spaces, lowercasing, accents)
WORD_SPLITTERS = {"BertPreTokenizer", "Whitespace", "WhitespaceSplit"}
CHARACTER_NORMALIZERS = {"BertNormalizer", "Lowercase", "NFD", "NFC", "NFKD", "NFKC", "StripAccents"}
# ASCII characters that str.split() treats as whitespace and BERT's normalizer deletes as control characters
SPLIT_DIFFERS = re.compile("[\x0b\x0c\x1c-\x1f]")
MAX_WORDS = 1 << 16  # kept words; the cache starts afresh when full, so memory stays bounded


def splits_at_whitespace(tokenizer) -> bool:
    """Whether `tokenizer` (a `tokenizers.Tokenizer`) tokenizes ASCII text word by word (see above)."""
    return _word_by_word(json.loads(tokenizer.to_str()))


def _word_by_word(config: dict) -> bool:
    """`splits_at_whitespace` of a tokenizer's parsed tokenizer.json."""
    def types(part) -> list[str]:
        if part is None:
            return []
        if part.get("type") == "Sequence":
            return [name for inner in part.get("normalizers") or part.get("pretokenizers") or [] for name in types(inner)]
        return [part.get("type")]

    pre = types(config.get("pre_tokenizer"))
    added = config.get("added_tokens") or []
    return (bool(pre) and pre[0] in WORD_SPLITTERS and all(name in WORD_SPLITTERS for name in pre)
            and all(name in CHARACTER_NORMALIZERS for name in types(config.get("normalizer")))
            and not any(re.search(r"\s", t["content"]) for t in added))


class WordIds:
    """`ids(text)`: the text's token ids without special tokens, `tokenizer.encode(text,
    add_special_tokens=False).ids` exactly, by whole-word lookups where that is the same thing."""

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer
        config = json.loads(tokenizer.to_str())  # parsed once: a vocabulary's JSON takes milliseconds
        # truncating or padding the whole text is not doing it to each word: those go through encode
        self.by_word = tokenizer.truncation is None and tokenizer.padding is None and _word_by_word(config)
        self.words: dict[str, list[int]] = {}
        # an added token that strips the spaces beside it is matched across a word break: a text that
        # holds one (in any case: a normalised token is matched after lowercasing) goes through encode
        stripping = [t["content"] for t in config.get("added_tokens") or [] if t.get("lstrip") or t.get("rstrip")]
        self.stripping = re.compile("|".join(map(re.escape, stripping)), re.IGNORECASE) if stripping else None

    def fits(self, text: str) -> bool:
        """Whether `text`'s ids are its words' ids one after another (see the module's docstring)."""
        return self.by_word and text.isascii() and not SPLIT_DIFFERS.search(text) and not self._strips(text)

    def _strips(self, text: str) -> bool:
        return self.stripping is not None and self.stripping.search(text) is not None

    def __call__(self, text: str) -> list[int]:
        if not self.fits(text):
            return self.tokenizer.encode(text, add_special_tokens=False).ids
        return self._by_words(text)

    def batch(self, texts: list[str]) -> list[list[int]]:
        """Each text's ids; those that do not fit go through one `encode_batch` (threaded by tokenizers)."""
        ids: list = [self._by_words(text) if self.fits(text) else None for text in texts]
        rest = [row for row, found in enumerate(ids) if found is None]
        if rest:
            encodings = self.tokenizer.encode_batch([texts[row] for row in rest], add_special_tokens=False)
            for row, encoding in zip(rest, encodings):
                ids[row] = encoding.ids
        return ids

    def _by_words(self, text: str) -> list[int]:
        if len(self.words) > MAX_WORDS:
            self.words.clear()
        ids: list[int] = []
        words, encode = self.words, self.tokenizer.encode
        for word in text.split():
            found = words.get(word)
            if found is None:
                found = words[word] = encode(word, add_special_tokens=False).ids
            ids.extend(found)
        return ids
