"""Which CPU training knobs pay here: a MiniLM (6 layers, 384 wide) classifier's training step
(forward, cross-entropy, backward, fused AdamW) at batch 32 and the lengths length-grouped batches
of movie snippets have (seq 24 and 48), median of --steps, variants interleaved on the same batches:

  fp32, all cores (the default) | fp32, 1 thread | bf16 autocast | torch.compile (dynamic shapes)

    flock /tmp/cpu.lock .venv/bin/python bench/cpu_knobs.py
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def train_step_ms(model, optimizer, batch, autocast: bool = False) -> float:
    """One training step in ms: forward (bf16 CPU autocast when asked), the model's loss, backward,
    optimizer step. bench/cpu_bf16.py times its steps with it too."""
    import torch

    start = time.perf_counter()
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        loss = model(**batch).loss
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return (time.perf_counter() - start) * 1000


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--no-compile", action="store_true")
    args = p.parse_args(argv)

    import torch
    from transformers import AutoModelForSequenceClassification

    from shrinkbert.core.device import cpu_flags, describe_machine
    from shrinkbert.core.models import load_model
    from shrinkbert.teachers.common import resolve_model_dir


    cores = torch.get_num_threads()
    flags = cpu_flags()
    print(f"machine: {describe_machine()}; torch {torch.__version__}, {cores} threads; "
          f"avx512_bf16: {'avx512_bf16' in flags}, amx_bf16: {'amx_bf16' in flags}", flush=True)
    path = resolve_model_dir("minilm")

    def fresh():
        torch.manual_seed(0)
        model = load_model(AutoModelForSequenceClassification, path, num_labels=2).train()
        return model, torch.optim.AdamW(model.parameters(), lr=1e-5, fused=True)

    def step(model, optimizer, batch, autocast=False, threads=None):
        if threads:
            torch.set_num_threads(threads)
        elapsed = train_step_ms(model, optimizer, batch, autocast)
        torch.set_num_threads(cores)
        return elapsed

    gen = torch.Generator().manual_seed(0)
    for seq in (24, 48):
        batches = [{"input_ids": torch.randint(1000, 20000, (args.batch_size, seq), generator=gen),
                    "attention_mask": torch.ones(args.batch_size, seq, dtype=torch.long),
                    "labels": torch.randint(0, 2, (args.batch_size,), generator=gen)} for _ in range(args.steps + 1)]
        variants = {"fp32, all cores": {}, "fp32, 1 thread": {"threads": 1}, "bf16 autocast": {"autocast": True}}
        models = {name: fresh() for name in variants}
        times = {name: [] for name in variants}
        for i, batch in enumerate(batches):
            for name, kwargs in variants.items():
                ms = step(*models[name], batch, **kwargs)
                if i:
                    times[name].append(ms)
        base = statistics.median(times["fp32, all cores"])
        print(f"\nseq {seq}, batch {args.batch_size}: median of {args.steps} steps", flush=True)
        for name, values in times.items():
            ms = statistics.median(values)
            print(f"  {name:18s} {ms:8.1f} ms  {base / ms:.2f}x the default's speed", flush=True)
    if not args.no_compile:
        model, optimizer = fresh()
        compiled = torch.compile(model, dynamic=True)
        start = time.perf_counter()
        first = [step(compiled, optimizer, batches[0]) for _ in range(1)]
        compile_s = time.perf_counter() - start
        times = [step(compiled, optimizer, b) for b in batches[1:]]
        eager_model, eager_opt = fresh()
        eager = [step(eager_model, eager_opt, b) for b in batches[1:]]
        print(f"\ntorch.compile (dynamic), seq {batches[0]['input_ids'].shape[1]}: first step {first[0] / 1000:.1f} s "
              f"(compiling, {compile_s:.1f} s), then median {statistics.median(times):.1f} ms vs eager "
              f"{statistics.median(eager):.1f} ms ({statistics.median(eager) / statistics.median(times):.2f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
