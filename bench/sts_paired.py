"""Two embedding models on the same STS pairs: each one's Spearman x100 and their difference with a
paired 95% bootstrap interval over the pairs (core/sts.spearman_difference), so "above" can be told
from the test set's sampling noise (1,379 STS-B test pairs carry about a point).

    python bench/sts_paired.py runs/levers/sim300-bundle minilm
    python bench/sts_paired.py A B --pairs ../shared/data/stsb/test.csv --resamples 2000

A and B: any embedding artifact the report reads (a model name such as minilm, a distilled student, an
ONNX graph, a bundle; eval/encoders.open_encoder). Accuracy only: nothing is timed.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("a")
    parser.add_argument("b")
    parser.add_argument("--pairs", default=str(ROOT.parent / "shared" / "data" / "stsb" / "test.csv"))
    parser.add_argument("--resamples", type=int, default=2000)
    parser.add_argument("--max-length", type=int, default=128)
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    from shrinkbert.core.scored_pairs import read_scored_pairs
    from shrinkbert.core.kinds.sts import distinct_sentences, pair_cosines, spearman_difference, spearman_x100
    from shrinkbert.eval.encoders import open_encoder

    pairs = read_scored_pairs(args.pairs)
    cosines = {}
    for name in (args.a, args.b):
        encode, runtime = open_encoder(name, threads=0, max_length=args.max_length)
        cosines[name] = pair_cosines(encode(distinct_sentences(pairs)), pairs)
        print(f"{name} ({runtime}): Spearman {spearman_x100(cosines[name], pairs.scores):.2f} on {len(pairs.scores):,} pairs")
    difference, low, high = spearman_difference(cosines[args.a], cosines[args.b], pairs.scores, args.resamples)
    print(f"{args.a} minus {args.b}: {difference:+.2f} points, 95% paired bootstrap interval [{low:+.2f}, {high:+.2f}] "
          f"({args.resamples:,} resamples of the pairs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
