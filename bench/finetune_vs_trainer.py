"""Fine-tune the real MiniLM teacher on movie-snippets with `shrinkbert finetune` and with Hugging Face
Trainer's defaults, back to back on the same machine, model, data, epochs, batch size, lr and max_length.

    flock /tmp/cpu.lock .venv/bin/python bench/finetune_vs_trainer.py            # 1 epoch, full data
    .venv/bin/python bench/finetune_vs_trainer.py --max-train-rows 400           # a quick look

Throughput is real (non-padding) training tokens per second: the train split's tokens (attention
mask) times epochs over the training time each reports (Trainer: train_runtime; shrinkbert:
train_time_s, which also holds its end-of-epoch validation pass, so it is counted against it).
Trainer runs with its defaults (TrainingArguments: no group_by_length, its own optimizer and
schedule defaults, DataCollatorWithPadding); shrinkbert with its own (length-grouped batches).
Goal: shrinkbert >= 1.5x Trainer's tokens/s at the same test accuracy (within noise).
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", default="movie-snippets")
    parser.add_argument("--model", default="minilm")
    parser.add_argument("--epochs", type=float, default=1)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--learning-rate", type=float, default=1e-4)
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--max-train-rows", type=int, default=0, help="first N training rows only (0: all)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--work-dir", default=str(ROOT / "runs" / "bench" / "finetune-vs-trainer"))
    parser.add_argument("--order", default="trainer,shrinkbert", help="which runs first")
    args = parser.parse_args()

    import torch

    from shrinkbert.core.data.load import limit_rows, tokenize_task
    from shrinkbert.core.data.dataspec import load_splits, resolve_spec
    from shrinkbert.core.device import describe_machine
    from shrinkbert.teachers.common import resolve_model_dir
    from shrinkbert.teachers import finetune

    work = Path(args.work_dir)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    print(f"machine: {describe_machine()}; torch {torch.__version__}, {torch.get_num_threads()} torch threads", flush=True)
    cfg = finetune.Config(model=args.model, task=args.task, epochs=args.epochs, batch_size=args.batch_size,
                          learning_rate=args.learning_rate, max_length=args.max_length, seed=args.seed,
                          output_dir=str(work / "shrinkbert"), resume=False)
    cfg.max_train_rows = args.max_train_rows
    # the same splits and tokenization the stage uses
    task, splits = load_splits(resolve_spec(cfg, [resolve_model_dir(cfg.model)]), cfg.cache_dir)
    splits = limit_rows(splits, cfg.max_train_rows, 0)
    model, tokenizer, _ = finetune.load_classifier(cfg, task)
    data = tokenize_task(splits, tokenizer, task, args.max_length)
    train_set = data["train"]
    real_tokens = sum(sum(m) for m in train_set["attention_mask"])
    padded_to_max = len(train_set) * args.max_length
    print(f"{args.model} on {args.task}: {len(train_set):,} train rows ({real_tokens:,} real tokens, "
          f"{real_tokens / len(train_set):.1f} a row), {len(data['test']):,} test rows; {args.epochs:g} epoch(s), "
          f"batch {args.batch_size}, lr {args.learning_rate:g}, max_length {args.max_length} "
          f"(padding every row to it would be {padded_to_max:,} tokens)", flush=True)

    results = {}
    for which in args.order.split(","):
        if which == "trainer":
            results["trainer"] = run_trainer(args, model, tokenizer, train_set, data["test"], work)
            del model
        else:
            # the stage validates at the end of every epoch inside its training time; Trainer's
            # defaults do not validate at all, so that pass is timed and taken out
            predict, validation_s = finetune.predict, []

            def timed_predict(model_, dataset, *rest, **kwargs):
                begin = time.perf_counter()
                result = predict(model_, dataset, *rest, **kwargs)
                if len(dataset) == len(data["validation"]) and not results.get("shrinkbert_done"):
                    validation_s.append(time.perf_counter() - begin)
                return result

            finetune.predict = timed_predict
            start = time.perf_counter()
            out = finetune.run(cfg)
            wall = time.perf_counter() - start
            finetune.predict = predict
            metrics = json.loads((Path(out) / "shrinkbert.json").read_text())["metrics"]
            # the last validation-sized call is the test pass when both splits have the same size
            in_training = validation_s[:-1] if len(data["test"]) == len(data["validation"]) else validation_s
            print(f"shrinkbert: {metrics['train_time_s']:.1f} s training time as the stage reports it, of which "
                  f"{sum(in_training):.1f} s validation", flush=True)
            results["shrinkbert"] = {"train_time_s": metrics["train_time_s"] - sum(in_training), "wall_s": wall,
                                     "test_accuracy": metrics["test_accuracy"]}
        r = results[which]
        r["tokens_per_s"] = real_tokens * args.epochs / r["train_time_s"]
        print(f"{which}: training {r['train_time_s']:.1f} s, wall {r['wall_s']:.1f} s, "
              f"{r['tokens_per_s']:,.0f} real tokens/s, test accuracy {r['test_accuracy']:.4f}", flush=True)

    s, t = results.get("shrinkbert"), results.get("trainer")
    if s and t:
        speedup = s["tokens_per_s"] / t["tokens_per_s"]
        print("\n| run | training s | wall s | real tokens/s | test accuracy |\n|---|--:|--:|--:|--:|")
        for name, r in (("HF Trainer (defaults)", t), ("shrinkbert finetune", s)):
            print(f"| {name} | {r['train_time_s']:.1f} | {r['wall_s']:.1f} | {r['tokens_per_s']:,.0f} | "
                  f"{r['test_accuracy']:.4f} |")
        print(f"\nthroughput shrinkbert / Trainer: {speedup:.2f}x (goal >= 1.5x); test accuracy "
              f"{s['test_accuracy'] - t['test_accuracy']:+.4f} ({'met' if speedup >= 1.5 else 'short'})")
    return 0


def run_trainer(args, model, tokenizer, train_set, test_set, work: Path) -> dict:
    import numpy as np
    from transformers import Trainer, TrainingArguments

    start = time.perf_counter()
    training_args = TrainingArguments(output_dir=str(work / "trainer"), num_train_epochs=args.epochs,
                                      per_device_train_batch_size=args.batch_size, learning_rate=args.learning_rate,
                                      seed=args.seed, report_to=[], disable_tqdm=True)
    trainer = Trainer(model=model, args=training_args, train_dataset=train_set, processing_class=tokenizer)
    output = trainer.train()
    prediction = trainer.predict(test_set)
    wall = time.perf_counter() - start
    accuracy = float((np.argmax(prediction.predictions, -1) == prediction.label_ids).mean())
    print(f"trainer: optimizer {training_args.optim}, {output.global_step} steps", flush=True)
    return {"train_time_s": output.metrics["train_runtime"], "wall_s": wall, "test_accuracy": accuracy}


if __name__ == "__main__":
    sys.exit(main())
