"""`shrinkbert predict BUNDLE --input PATH... --output OUT`: a bundle over a whole corpus (deploy/corpus.py)."""
from __future__ import annotations

import argparse
import sys

from shrinkbert.core.errors import error_line

DESCRIPTION = ("Run a bundle (any kind) over every row of csv, tsv, jsonl, parquet or text files and write its "
               "answers as Parquet shards with a manifest; run the same command again to resume.")


def parser() -> argparse.ArgumentParser:
    from shrinkbert.deploy.corpus_batches import BATCH_TOKENS  # numpy and pyarrow: no torch

    p = argparse.ArgumentParser(prog="shrinkbert predict", description=DESCRIPTION)
    p.add_argument("bundle", help="the bundle folder (shrinkbert bundle's output)")
    p.add_argument("--input", nargs="+", required=True, metavar="PATH",
                   help="input files or globs: .csv .tsv .jsonl .parquet, or .txt (one text a line)")
    p.add_argument("--output", required=True, metavar="OUT",
                   help="the output folder: new, empty, or this same run's (to resume)")
    p.add_argument("--text-column", help="the text column (default: text; a QA bundle's question, default "
                                         "question; a tagger's text, or word lists under tokens)")
    p.add_argument("--text-pair-column", help="a pair classifier's second text; a QA bundle's context "
                                              "(default: context)")
    p.add_argument("--id-column", help="the input's id column, carried to the output's id (default: the file's "
                                       "name and the row's line number)")
    p.add_argument("--batch-tokens", type=int, default=BATCH_TOKENS,
                   help="most tokens a batch holds, rows x the longest row (default: %(default)s)")
    p.add_argument("--window", type=int, default=4096,
                   help="rows sorted by length together: larger pads less (default: %(default)s)")
    p.add_argument("--shard-rows", type=int, default=20000,
                   help="rows an output shard holds: the unit of resume and of Dask work (default: %(default)s)")
    p.add_argument("--threads", type=int, help="ONNX Runtime threads in all (default: every core of this process; "
                                               "on Dask, the worker's threads)")
    p.add_argument("--streams", type=int, help="model calls run at once, each on threads/streams threads "
                                               "(default: one a thread)")
    p.add_argument("--dtype", default="float32", choices=("float32", "float16"),
                   help="an embedding bundle's vectors (default: %(default)s)")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--cluster", metavar="local:N", help="run on a Dask LocalCluster of N one-thread workers")
    where.add_argument("--scheduler", metavar="tcp://HOST:8786",
                       help="run on the Dask cluster of this scheduler (its workers must see the bundle's path)")
    p.add_argument("--no-progress", dest="progress", action="store_false", help="no progress bar")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    from shrinkbert.deploy.corpus import predict_corpus  # deferred: --help answers without pyarrow

    try:
        out = predict_corpus(args.bundle, args.input, args.output, text_column=args.text_column,
                             text_pair_column=args.text_pair_column, id_column=args.id_column,
                             batch_tokens=args.batch_tokens, window=args.window, shard_rows=args.shard_rows,
                             threads=args.threads, streams=args.streams, dtype=args.dtype, cluster=args.cluster, scheduler=args.scheduler,
                             progress=args.progress)
    except KeyboardInterrupt:
        print(f"interrupted: the shards in {args.output} are kept; run the same command again to resume",
              file=sys.stderr)
        return 130
    except Exception as err:  # a user's error or the machine's is one line; anything else is a bug
        line = error_line(err)
        if line is None:
            raise
        print(f"error: {line}", file=sys.stderr)
        return 2
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
