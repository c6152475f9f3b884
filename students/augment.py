"""A transfer set for task distillation: perturbed copies of the training texts, labelled by the teacher.

A small student learns more from the teacher than a few thousand labelled sentences can carry: on texts the
teacher has an opinion about but no gold label exists for, its soft logits still teach. Following
Tang et al. 2019 ("Distilling task-specific knowledge from BERT into simple neural networks"),
each copy of a training text is made by
  - masking: every word, with probability `p_mask`, becomes the tokenizer's mask token;
  - n-gram sampling: with probability `p_ngram`, the copy is cut to a random n-gram (n in 1..5).
Copies equal to their source or to an earlier copy are dropped. A pair's two texts are masked
independently and never cut (cutting could remove the part the label is about).

The copies carry no gold label (-100, which cross-entropy ignores): only the teacher's logits and
hidden states, cached like any training row, supervise them.

TinyBERT's transfer set adds in-domain text the task never labelled: `corpus_transfer_rows` draws
lines of a corpus (e.g. the IMDB review sentences) in a fixed order independent of the training
seed (so every seed's student shares one cached teacher pass), skipping duplicates and any line
the leak guard flags as a validation/test row of the task or a near-duplicate of one. A pair task's
corpus rows are pairs (`corpus_transfer_pairs`): each drawn line with the line that follows it in the
corpus or, as often, a line drawn at random, as BERT's next-sentence pairs are made, so the teacher
labels pairs of the kind the task reads rather than a text with an empty second one.
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


TRANSFER_SAMPLE_SEED = 0  # fixed: the same transfer lines and perturbed copies for every --seed


def corpus_transfer_rows(corpus, max_rows: int, guard, cache_dir=None) -> tuple[list[str], int, int]:
    """(up to max_rows distinct corpus lines that leak nothing, in a fixed shuffled order; how many
    lines were read to find them; how many of those the guard removed). max_rows 0 takes every line."""
    from shrinkbert.core.data.load import load_corpus

    lines = load_corpus(corpus, cache_dir=cache_dir)
    order = list(range(len(lines)))
    random.Random(TRANSFER_SAMPLE_SEED).shuffle(order)
    kept: list[str] = []
    seen: set[str] = set()
    read = leaks = 0
    for index in order:
        if max_rows and len(kept) >= max_rows:
            break
        read += 1
        line = lines[index]
        if line in seen:
            continue
        if guard.leaks(line):
            leaks += 1
            continue
        seen.add(line)
        kept.append(line)
    return kept, read, leaks


def corpus_transfer_pairs(corpus, max_rows: int, guard, cache_dir=None) -> tuple[list[str], list[str], int, int]:
    """(first texts, second texts) of up to max_rows distinct corpus pairs that leak nothing, in a fixed
    shuffled order: a line with the line after it, or (every other draw, and for the corpus's last line) a
    line drawn at random; with how many pairs were drawn to find them and how many of those leaked."""
    from shrinkbert.core.data.load import load_corpus

    lines = load_corpus(corpus, cache_dir=cache_dir)
    rng = random.Random(TRANSFER_SAMPLE_SEED)
    order = list(range(len(lines)))
    rng.shuffle(order)
    firsts: list[str] = []
    seconds: list[str] = []
    seen: set[tuple[str, str]] = set()
    read = leaks = 0
    for draw, index in enumerate(order):
        if max_rows and len(firsts) >= max_rows:
            break
        read += 1
        follows = draw % 2 == 0 and index + 1 < len(lines)
        first, second = lines[index], lines[index + 1] if follows else lines[rng.randrange(len(lines))]
        if (first, second) in seen or first == second:
            continue
        if guard.leaks(first, second):
            leaks += 1
            continue
        seen.add((first, second))
        firsts.append(first)
        seconds.append(second)
    return firsts, seconds, read, leaks
