"""Training step time on the CPU, fp32 against bf16 autocast (what `--mixed-precision bf16` turns on
where the cores have bf16 instructions: core/device.py cpu_has_bf16), interleaved on the same batches.

    flock /tmp/cpu.lock .venv/bin/python bench/cpu_bf16.py

Per shape (randomly initialised BERT classifiers; the step's cost does not depend on the weights):
forward, cross-entropy, backward and a fused AdamW step at batch 32 x sequence 128, the two modes
alternating step by step after 3 untimed rounds, median of --steps. Prints the ratio and the machine.
"""
from __future__ import annotations

import argparse
import functools
import statistics
import sys
from pathlib import Path

import torch
from transformers import BertConfig, BertForSequenceClassification

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cpu_knobs import train_step_ms  # noqa: E402  (bench/ sibling: the same timed step)

from shrinkbert.core.device import cpu_has_bf16, describe_machine  # noqa: E402

# the frontier's narrow student, a 4-layer one, the MiniLM teacher itself (the demo's fine-tune and MLM), and the
# tests' tiny models: `--mixed-precision auto` turns bf16 on from the smallest width measured faster
SHAPES = {"2L/H32 (tests)": (2, 32, 4, 64), "2L/H160": (2, 160, 5, 640), "4L/H384": (4, 384, 12, 1536),
          "6L/H384 (MiniLM)": (6, 384, 12, 1536)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--seq-len", type=int, default=128, help="tokens per row (the demo's snippets: about 32)")
    args = parser.parse_args()
    print(f"machine: {describe_machine()}; bf16 instructions: {cpu_has_bf16()}; torch threads {torch.get_num_threads()}")
    generator = torch.Generator().manual_seed(0)
    batch = {"input_ids": torch.randint(1000, 30000, (args.batch_size, args.seq_len), generator=generator),
             "attention_mask": torch.ones(args.batch_size, args.seq_len, dtype=torch.long),
             "labels": torch.randint(0, 2, (args.batch_size,), generator=generator)}
    rows = []
    for name, (layers, hidden, heads, ffn) in SHAPES.items():
        steps = {}
        for mode in ("fp32", "bf16"):
            torch.manual_seed(0)
            model = BertForSequenceClassification(BertConfig(num_hidden_layers=layers, hidden_size=hidden,
                                                             num_attention_heads=heads, intermediate_size=ffn))
            model.train()
            steps[mode] = functools.partial(train_step_ms, model,
                                            torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True), batch,
                                            mode == "bf16")
        times = {mode: [] for mode in steps}
        for round_ in range(3 + args.steps):
            for mode, step in steps.items():
                elapsed = step()
                if round_ >= 3:
                    times[mode].append(elapsed)
        median = {mode: statistics.median(t) for mode, t in times.items()}
        print(f"{name}: fp32 {median['fp32']:.0f} ms/step, bf16 autocast {median['bf16']:.0f} ms/step, "
              f"bf16 speed-up {median['fp32'] / median['bf16']:.2f}x (batch {args.batch_size} x {args.seq_len}, "
              f"median of {args.steps} interleaved steps)")
        rows.append({"model": name, "fp32 ms a step": round(median["fp32"]), "bf16 ms a step": round(median["bf16"]),
                     "bf16 speed-up": f"{median['fp32'] / median['bf16']:.2f}x"})
    from record import record
    record("cpu-bf16" if args.seq_len == 128 else f"cpu-bf16-s{args.seq_len}", section="training",
           title=f"bf16 autocast against fp32 training steps at {args.seq_len} tokens", rows=rows,
           note=f"Batch {args.batch_size} x {args.seq_len}, forward + backward + fused AdamW, "
                f"median of {args.steps} interleaved steps.")


if __name__ == "__main__":
    main()
