"""A student's CPU training step by attention kernel and dropout, interleaved.

    python bench/cpu_attention_kernel.py                      # the cases below, 2 threads
    python bench/cpu_attention_kernel.py --cases 32x28 --steps 20

The demo's wide student shape (2 layers, H384, 12 heads, FFN 1536, BERT's 30,522-token table), random
weights, bf16 autocast as the kit trains on a bf16 host, one AdamW step (forward, cross-entropy,
backward, fused AdamW) per variant per round, the variants interleaved, median over --steps rounds after
2 untimed. Half of each batch's rows are padded over their last quarter. Variants: SDPA with BERT's
dropout 0.1 (a student's dropout unless `distill --dropout` sets one), also held to SDPA's math kernel and
in eager attention; dropout 0 with SDPA choosing its kernel (on a CPU it picks the flash kernel when
attention dropout is 0); dropout 0 with SDPA held to its math kernel (what core/train.py does on a CPU for
batches up to 128 tokens); dropout 0 in eager attention.
Prints the host's CPU and ISA.
"""
from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default="32x28,32x64,16x128,16x256,8x384", help="BATCHxTOKENS, comma-separated")
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()

    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from transformers import BertConfig, BertForSequenceClassification

    from shrinkbert.core.device import describe_machine
    from shrinkbert.students.dropout import override_dropout

    torch.set_num_threads(args.threads)
    print(f"machine: {describe_machine()}; torch {torch.__version__}, {args.threads} threads", flush=True)

    def student(attention: str, dropout: float | None):
        config = BertConfig(hidden_size=384, num_hidden_layers=2, num_attention_heads=12, intermediate_size=1536)
        config._attn_implementation = attention
        torch.manual_seed(0)
        model = BertForSequenceClassification(config).train()
        if dropout is not None:
            override_dropout(model, dropout)
        return model

    variants = {  # name: (model, kernel context)
        "SDPA, dropout 0.1": (student("sdpa", None), contextlib.nullcontext),
        "SDPA math, dropout 0.1": (student("sdpa", None), lambda: sdpa_kernel(SDPBackend.MATH)),
        "eager, dropout 0.1": (student("eager", None), contextlib.nullcontext),
        "SDPA's choice, dropout 0": (student("sdpa", 0.0), contextlib.nullcontext),
        "SDPA math, dropout 0": (student("sdpa", 0.0), lambda: sdpa_kernel(SDPBackend.MATH)),
        "eager, dropout 0": (student("eager", 0.0), contextlib.nullcontext),
    }
    optimizers = {name: torch.optim.AdamW(model.parameters(), lr=1e-5, fused=True) for name, (model, _) in variants.items()}
    for case in args.cases.split(","):
        batch, tokens = (int(x) for x in case.split("x"))
        ids = torch.randint(1000, 30000, (batch, tokens), generator=torch.Generator().manual_seed(0))
        mask = torch.ones_like(ids)
        mask[: batch // 2, tokens * 3 // 4:] = 0
        labels = torch.zeros(batch, dtype=torch.long)
        times = {name: [] for name in variants}
        for step in range(args.steps + 2):
            for name, (model, kernel) in variants.items():
                begin = time.perf_counter()
                with kernel(), torch.autocast("cpu", dtype=torch.bfloat16):
                    loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
                loss.backward()
                optimizers[name].step()
                optimizers[name].zero_grad(set_to_none=True)
                if step >= 2:
                    times[name].append(1000 * (time.perf_counter() - begin))
        medians = {name: statistics.median(ms) for name, ms in times.items()}
        reference = medians["SDPA, dropout 0.1"]
        print(f"batch {batch} x {tokens} tokens: " + "; ".join(
            f"{name} {ms:.0f} ms ({reference / ms:.2f}x)" for name, ms in medians.items()), flush=True)


if __name__ == "__main__":
    sys.exit(main())
