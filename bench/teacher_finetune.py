"""Fine-tune the real pretrained MiniLM (L6-H384, uncased) on movie-snippets; print test accuracy and wall time.

    .venv/bin/python bench/teacher_finetune.py                # full data, 3 epochs, seq 64
    .venv/bin/python bench/teacher_finetune.py --max-rows 500 # a quick look

Goal: >= 85% test accuracy. The artifact is kept at runs/bench/teacher for the other stages to reuse
(students distil from it, compress prunes it, eval reports it).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output-dir", default=str(ROOT / "runs" / "bench" / "teacher"))
    parser.add_argument("--task", default="movie-snippets")
    parser.add_argument("--max-length", type=int, default=64, help="movie snippets are short: 99%% fit in 64 tokens")
    parser.add_argument("--epochs", type=float, default=3)
    parser.add_argument("--learning-rate", type=float, default=1e-4)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--max-rows", type=int, default=0)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (default: all cores)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    from shrinkbert.core.device import describe_machine, set_threads
    from shrinkbert.teachers import finetune

    threads = set_threads(args.threads or None)
    cfg = finetune.Config(output_dir=args.output_dir, model="minilm", task=args.task, max_length=args.max_length,
                          epochs=args.epochs, learning_rate=args.learning_rate, batch_size=args.batch_size,
                          max_train_rows=args.max_rows, seed=args.seed, checkpoint_every=250, log_every=25)
    start = time.perf_counter()
    out = finetune.run(cfg)
    wall = time.perf_counter() - start
    metrics = json.loads((Path(out) / "shrinkbert.json").read_text())["metrics"]
    print(f"machine: {describe_machine()}, {threads} torch threads")
    print(f"MiniLM-L6-H384 on {args.task}: {metrics['train_examples']} train rows, seq {args.max_length}, "
          f"{args.epochs:g} epochs, lr {args.learning_rate:g}, batch {args.batch_size}")
    print("validation accuracy per epoch: " + ", ".join(f"{a:.4f}" for a in metrics["validation_accuracy_per_epoch"]))
    print(f"test accuracy: {metrics['test_accuracy']:.4f} ({metrics['test_examples']} rows)")
    print(f"training time: {metrics['train_time_s']:.0f} s; wall time (load + tokenize + train + eval + save): {wall:.0f} s")
    print(f"artifact: {out}")
    return 0 if metrics["test_accuracy"] >= 0.85 else 1


if __name__ == "__main__":
    sys.exit(main())
