"""Words in each built-in corpus: lines and whitespace words
of every corpus `shrinkbert pretrain --corpus all` reads, as built (IMDB and Rotten Tomatoes already
leak-guarded against movie-snippets), and, with --task, what is left after that task's leak guard
(the guard `pretrain --teacher` applies when the teacher records a task).

    python bench/corpus_words.py                      # the built-in corpora as built
    python bench/corpus_words.py --task movie-snippets
"""
from __future__ import annotations

import argparse
import os
import sys
import time


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--task", default="", help="also apply this task's leak guard (its validation + test texts)")
    args = p.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from shrinkbert.core.data.builtin_data import CORPORA
    from shrinkbert.core.data.leakguard import LeakGuard
    from shrinkbert.core.data.load import load_corpus, load_task
    from shrinkbert.teachers.pretrain import count_words

    guard = None
    if args.task:
        _, splits = load_task(args.task)
        guard = LeakGuard.for_splits(splits, name=args.task)
    rows, total_lines, total_words, total_bytes = [], 0, 0, 0
    for name in CORPORA:
        started = time.perf_counter()
        lines = load_corpus([name])
        if guard is not None:
            lines, _ = guard.filter(lines)
        words = count_words(lines)
        size = sum(len(line.encode("utf-8")) + 1 for line in lines)  # UTF-8 bytes, a newline per line
        rows.append((name, len(lines), words, size, time.perf_counter() - started))
        total_lines, total_words, total_bytes = total_lines + len(lines), total_words + words, total_bytes + size
    print(f"| corpus | lines | words | MB |{' (after the ' + args.task + ' leak guard)' if guard else ''}")
    print("|---|--:|--:|--:|")
    for name, n_lines, words, size, _ in rows:
        print(f"| {name} | {n_lines:,} | {words:,} | {size / 1e6:.1f} |")
    print(f"| **all** | {total_lines:,} | **{total_words:,}** | {total_bytes / 1e6:.1f} |")
    print(f"read in {sum(r[4] for r in rows):.1f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
