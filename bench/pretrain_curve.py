"""Pretrain a tiny BERT from scratch on State-of-the-Union text; print the MLM loss curve.

    .venv/bin/python bench/pretrain_curve.py                   # WordPiece 8k on SOTU, preset tiny, 600 steps
    .venv/bin/python bench/pretrain_curve.py --nsp --max-steps 200

Trains the tokenizer (teachers.tokenizer) and then MLM (teachers.pretrain, dynamic masking); prints
held-out MLM loss before and after, and the training loss per logged step.
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
    parser.add_argument("--output-dir", default=str(ROOT / "runs" / "bench" / "pretrain-tiny"))
    parser.add_argument("--corpus", default="sotu")
    parser.add_argument("--max-lines", type=int, default=8000)
    parser.add_argument("--vocab-size", type=int, default=8000)
    parser.add_argument("--preset", default="tiny")
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--max-steps", type=int, default=600)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--learning-rate", type=float, default=1e-3)
    parser.add_argument("--nsp", action="store_true")
    parser.add_argument("--threads", type=int, default=0)
    args = parser.parse_args()

    from shrinkbert.core.device import set_threads
    from shrinkbert.teachers import pretrain, tokenizer

    set_threads(args.threads or None)
    out = Path(args.output_dir)
    start = time.perf_counter()
    tok_dir = tokenizer.run(tokenizer.Config(output_dir=str(out) + "-tokenizer", corpus=args.corpus.split(","),
                                             max_train_rows=args.max_lines, vocab_size=args.vocab_size))
    cfg = pretrain.Config(output_dir=str(out), preset=args.preset, tokenizer=str(tok_dir),
                          corpus=args.corpus.split(","), max_train_rows=args.max_lines, max_length=args.max_length,
                          max_steps=args.max_steps, batch_size=args.batch_size, learning_rate=args.learning_rate,
                          warmup_ratio=0.05, nsp=args.nsp, log_every=max(1, args.max_steps // 30),
                          checkpoint_every=0)
    pretrain.run(cfg)
    metrics = json.loads((out / "shrinkbert.json").read_text())["metrics"]
    print(f"preset {args.preset} from scratch, {args.corpus} ({metrics['train_examples']} examples of "
          f"{args.max_length} tokens), {metrics['steps']} steps x {args.batch_size}, nsp={args.nsp}")
    print("step  mlm_loss")
    for step, loss in metrics["mlm_loss_curve"]:
        print(f"{step:5d}  {loss:.3f}")
    print(f"held-out MLM loss: {metrics['heldout_mlm_loss_before']:.3f} -> {metrics['heldout_mlm_loss_after']:.3f}")
    print(f"wall time: {time.perf_counter() - start:.0f} s (training {metrics['train_time_s']:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
