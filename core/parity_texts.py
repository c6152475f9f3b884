"""The texts every embedding parity check runs (export: graph against PyTorch; bundle: the bundle's
Predictor against its model): short sentences, an empty one, accents, and texts at and past the
model's max_length. A bundle that truncates, pads or normalises differently from its model differs
only on the long ones, so no check may use short texts alone (a bundle cut at half its max_length
passes every check that does)."""
from __future__ import annotations

PARITY_SENTENCES = ["A man is playing a guitar.", "The stock market fell sharply today.", "a cat", "",
                    "Résumé naïve café — émigré!",
                    "Three dogs run through the snow while a child watches from the porch window."]
LONG_SENTENCE = "the quick brown fox jumps over the lazy dog ."


def parity_texts(max_length: int) -> list[str]:
    """PARITY_SENTENCES, then a text of exactly `max_length` tokens for a WordPiece tokenizer ("the"
    is one token; [CLS] and [SEP] the other two) and one of about 2.5 times `max_length`."""
    at_limit = " ".join(["the"] * max(1, max_length - 2))
    past_limit = " ".join([LONG_SENTENCE] * max(1, max_length // 4))
    return [*PARITY_SENTENCES, at_limit, past_limit]
