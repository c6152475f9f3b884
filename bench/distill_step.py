"""Distillation step time: KD with the teacher's logits, hidden states and attention maps read from the
teacher-output cache vs training the student alone (goal <= 1.1x), the live teacher for reference.

    flock /tmp/cpu.lock .venv/bin/python bench/distill_step.py --teacher runs/shared-teacher

A 4-layer student (the teacher's first 4 layers, full width) on movie-snippets, batches as the
training loop makes them (length-grouped, seq <= --max-length), batch 32, one optimizer step
(forward, losses, backward, fused AdamW) per variant per batch, variants interleaved on the same
batches, median of --steps after 2 untimed warm-up rounds. Losses: logits KD + hidden MSE +
attention KL on the uniform layer map. The student alone trains with cross-entropy and the
library's default attention (SDPA); attention KD needs eager attention on both sides.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--teacher", default=str(ROOT / "runs/shared-teacher"))
    p.add_argument("--task", default="movie-snippets")
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--max-length", type=int, default=64)
    p.add_argument("--rows", type=int, default=1024, help="training rows the cache is built for (the steps use the first)")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: all cores)")
    args = p.parse_args(argv)

    import tempfile

    import torch
    from transformers import AutoModelForSequenceClassification

    from shrinkbert.core.data.load import load_task, tokenize_task
    from shrinkbert.core.device import describe_machine, set_threads
    from shrinkbert.core.models import load_model, load_tokenizer
    from shrinkbert.core.train import LengthGroupedSampler
    from shrinkbert.students.cache import load_or_compute
    from shrinkbert.students.distill_data import make_collate, with_row_index
    from shrinkbert.students.distill_loss import make_loss_fn
    from shrinkbert.students.losses import DistillLoss, LossWeights, format_layer_map, parse_layer_map


    threads = set_threads(args.threads or None)
    print(f"machine: {describe_machine()}; torch {torch.__version__}, {threads} threads", flush=True)
    teacher_dir = Path(args.teacher)
    tokenizer = load_tokenizer(teacher_dir)
    task, splits = load_task(args.task)
    train = tokenize_task(splits, tokenizer, task, max_length=args.max_length)["train"]
    train = with_row_index(train.select(range(min(args.rows, len(train)))))
    collate = make_collate(tokenizer)
    teacher = load_model(AutoModelForSequenceClassification, teacher_dir, attn_implementation="eager").eval()
    t_layers = teacher.config.num_hidden_layers
    layer_map = parse_layer_map(None, args.layers, t_layers)
    kd = DistillLoss(LossWeights(logits=1.0, hidden=1.0, attention=1.0), layer_map, teacher.config.hidden_size,
                     teacher.config.hidden_size, temperature=2.0)
    logits_kd = DistillLoss(LossWeights(logits=1.0), {}, 1, 1, temperature=2.0)
    with tempfile.TemporaryDirectory() as cache_dir:
        start = time.perf_counter()
        cache, path, _ = load_or_compute(teacher_dir, lambda: teacher, train, collate, args.max_length,
                                         kd.teacher_hidden_layers(), cache_dir, 64, log=lambda _: None,
                                         attention_layers=kd.teacher_attention_layers())
        built = time.perf_counter() - start
        size_mb = path.stat().st_size / 1e6
    print(f"teacher {teacher_dir} ({t_layers} layers); student: its first {args.layers} layers; layer map "
          f"{format_layer_map(layer_map)}; cache for {len(train):,} rows (logits, hidden {kd.teacher_hidden_layers()}, "
          f"attention layers {[i + 1 for i in kd.teacher_attention_layers()]}): {size_mb:.1f} MB, built in {built:.1f} s",
          flush=True)

    def student(eager: bool):
        torch.manual_seed(0)
        kwargs = {"attn_implementation": "eager"} if eager else {}
        return load_model(AutoModelForSequenceClassification, teacher_dir, num_hidden_layers=args.layers,
                          **kwargs).train()

    inputs = ("input_ids", "attention_mask", "token_type_ids")
    variants = {  # name: (student, loss_fn)
        "student alone (CE, SDPA)": (student(False), lambda m, b: (m(**{k: b[k] for k in inputs},
                                                                     labels=b["labels"]).loss, {})),
        "KD logits, cached": (student(False), make_loss_fn(logits_kd, cache=cache)),
        "KD logits+hidden+attn, cached": (student(True), make_loss_fn(kd, cache=cache)),
        "KD logits+hidden+attn, live": (student(True), make_loss_fn(kd, teacher=teacher)),
    }
    optimizers = {name: torch.optim.AdamW(m.parameters(), lr=1e-5, fused=True) for name, (m, _) in variants.items()}
    sampler = LengthGroupedSampler([len(x) for x in train["input_ids"]], args.batch_size, 1, seed=0)
    order = list(sampler)
    batches = [order[i:i + args.batch_size] for i in range(0, len(order), args.batch_size)]
    times = {name: [] for name in variants}
    lengths = []
    for step in range(args.steps + 2):
        batch = collate([train[i] for i in batches[step % len(batches)]])
        if step >= 2:
            lengths.append(batch["input_ids"].shape[1])
        for name, (model, loss_fn) in variants.items():
            begin = time.perf_counter()
            loss, _ = loss_fn(model, batch)
            loss.backward()
            optimizers[name].step()
            optimizers[name].zero_grad(set_to_none=True)
            if step >= 2:
                times[name].append((time.perf_counter() - begin) * 1000)
    medians = {name: statistics.median(v) for name, v in times.items()}
    alone = medians["student alone (CE, SDPA)"]
    print(f"\nstep time, batch {args.batch_size}, median of {args.steps} interleaved steps "
          f"(padded lengths {min(lengths)}-{max(lengths)}, median {statistics.median(lengths):.0f}):")
    for name, ms in medians.items():
        print(f"  {name:32s} {ms:8.1f} ms   {ms / alone:.3f}x the student alone")
    ratio = medians["KD logits+hidden+attn, cached"] / alone
    print(f"cached logits+hidden+attention KD / student alone = {ratio:.3f} (goal <= 1.1: "
          f"{'met' if ratio <= 1.1 else 'short'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
