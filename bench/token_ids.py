"""The static student's text -> vector call with token ids from tokenizers' encode against whole-word
lookups (compress/token_ids.WordIds), interleaved in one process, at batch 1.

    python bench/token_ids.py runs/embeddings/static-bundle          # a static bundle (or static student)
    python bench/token_ids.py runs/embeddings/static-bundle --tokens 32 --rounds 9

The texts are STS-B test sentences' words (../shared/data/stsb) joined to --tokens tokens by the
bundle's tokenizer, one text per call, a different one each call. By default the word cache has seen
every text once before the timing (a server's steady state; the embedding report, which embeds the
same text every call, times that too); with --cold it starts empty, so a word's first use pays for
its encode. Each round times --calls calls of each setting in turn, token ids alone then the whole
embed() on other texts; prints the median of the rounds' medians, the ratio, and the host's CPU and
ISA. The vectors of both settings are checked equal first.
"""
from __future__ import annotations

import argparse
import csv
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
STSB = ROOT.parent / "shared" / "data" / "stsb" / "test.csv"


def texts_of(tokenizer, tokens: int, count: int) -> list[str]:
    """`count` texts of STS-B test words, each about `tokens` tokens long (special tokens left out)."""
    with open(STSB, newline="", encoding="utf-8") as handle:
        words = [w for row in csv.DictReader(handle) for w in (row["sentence1"] + " " + row["sentence2"]).split()]
    texts, start = [], 0
    for _ in range(count):
        taken = []
        while len(tokenizer.encode(" ".join(taken), add_special_tokens=False).ids) < tokens:
            taken.append(words[start % len(words)])
            start += 1
        texts.append(" ".join(taken))
    return texts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", help="a static bundle or a static student folder")
    parser.add_argument("--tokens", type=int, default=126, help="tokens per text (126 + [CLS]/[SEP] = the report's 128)")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--cold", action="store_true", help="start with an empty word cache")
    args = parser.parse_args(argv)
    from shrinkbert.compress.static_predictor import Predictor, embed_with_table
    from shrinkbert.compress.token_ids import WordIds
    from shrinkbert.core.device import cpu_model, detect_isa
    from shrinkbert.students.static import StaticEmbedder

    folder = Path(args.model)
    if (folder / "vectors.npy").is_file():
        predictor = Predictor(folder)
        table, tokenizer = predictor.table, predictor.tokenizer
    else:
        student = StaticEmbedder.load(folder)
        table, tokenizer = student.vectors, student.tokenizer
    texts = texts_of(tokenizer, args.tokens, args.rounds * args.calls * 2)
    by_words, by_encode = WordIds(tokenizer), WordIds(tokenizer)
    by_encode.by_word = False  # every text through encode: the predictor as it was
    assert by_words.by_word, f"{folder}'s tokenizer is not read word by word: nothing to compare"
    np.testing.assert_array_equal(embed_with_table(by_words, table, texts[:200]),
                                  embed_with_table(by_encode, table, texts[:200]))
    by_words.words.clear()
    if not args.cold:
        by_words.batch(texts)

    def timed(fn, batch: list[str]) -> float:
        samples = []
        for text in batch:
            start = time.perf_counter()
            fn(text)
            samples.append(time.perf_counter() - start)
        return statistics.median(samples) * 1e3

    settings = {"encode": by_encode, "word lookups": by_words}
    ids_ms = {name: [] for name in settings}
    embed_ms = {name: [] for name in settings}
    feed = iter(texts)
    for _ in range(args.rounds):
        for name, word_ids in settings.items():
            ids_ms[name].append(timed(word_ids, [next(feed) for _ in range(args.calls // 2)]))
            embed_ms[name].append(timed(lambda text: embed_with_table(word_ids, table, [text]),
                                        [next(feed) for _ in range(args.calls // 2)]))
    print(f"host: {cpu_model()}, {detect_isa()}, {os.cpu_count()} cores; {folder}; texts of {args.tokens} tokens, "
          f"batch 1; word cache {'empty at the start' if args.cold else 'warm'}; median of {args.rounds} rounds' "
          f"medians ({args.calls // 2} calls each)")
    for what, found in (("token ids", ids_ms), ("embed()", embed_ms)):
        medians = {name: statistics.median(values) for name, values in found.items()}
        print(f"{what:10s} encode {medians['encode']:.4f} ms, word lookups {medians['word lookups']:.4f} ms: "
              f"{medians['encode'] / medians['word lookups']:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
