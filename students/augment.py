"""A transfer set for task distillation: perturbed copies of the training texts, labelled by the teacher.

A small student learns more from the teacher than 8k labelled sentences can carry: on texts the
teacher has an opinion about but no gold label exists for, its soft logits still teach. Following
Tang et al. 2019 ("Distilling task-specific knowledge from BERT into simple neural networks"),
each copy of a training text is made by
  - masking: every word, with probability `p_mask`, becomes the tokenizer's mask token;
  - n-gram sampling: with probability `p_ngram`, the copy is cut to a random n-gram (n in 1..5).
Copies equal to their source or to an earlier copy are dropped. A pair's two texts are masked
independently and never cut (cutting could remove the part the label is about).

The copies carry no gold label (-100, which cross-entropy ignores): only the teacher's logits and
hidden states, cached like any training row, supervise them.
"""
from __future__ import annotations

import random

NO_LABEL = -100  # torch.nn.functional.cross_entropy's default ignore_index


def perturb(text: str, rng: random.Random, mask_token: str, p_mask: float, p_ngram: float, cut: bool = True) -> str:
    words = text.split()
    words = [mask_token if rng.random() < p_mask else word for word in words]
    if cut and len(words) > 1 and rng.random() < p_ngram:
        n = rng.randint(1, min(5, len(words)))
        start = rng.randint(0, len(words) - n)
        words = words[start:start + n]
    return " ".join(words)


def transfer_rows(texts: list[str], pairs: list[str] | None, copies: int, seed: int, mask_token: str,
                  p_mask: float = 0.1, p_ngram: float = 0.25) -> tuple[list[str], list[str] | None]:
    """Up to `copies` new (text, pair) rows per source row, in source order; deterministic in `seed`."""
    rng = random.Random(seed)
    out_texts: list[str] = []
    out_pairs: list[str] | None = [] if pairs is not None else None
    for i, text in enumerate(texts):
        seen = {(text, pairs[i] if pairs is not None else None)}
        for _ in range(copies):
            new_text = perturb(text, rng, mask_token, p_mask, p_ngram, cut=pairs is None)
            new_pair = perturb(pairs[i], rng, mask_token, p_mask, 0.0, cut=False) if pairs is not None else None
            if (new_text, new_pair) in seen or not new_text:
                continue
            seen.add((new_text, new_pair))
            out_texts.append(new_text)
            if out_pairs is not None:
                out_pairs.append(new_pair)
    return out_texts, out_pairs
