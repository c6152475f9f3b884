"""The teacher's cached outputs for distillation (students/cache.py), fp32 against bf16 autocast: time and fidelity.

    python bench/teacher_outputs_bf16.py runs/demo/teacher --corpus imdb --rows 3000

distill computes its teacher's logits and hidden states once per training set and caches them; with
`--mixed-precision auto` (the default) that pass runs under the training steps' autocast, bf16 on a CPU with
bf16 instructions for a teacher of hidden size 160 or more. This times the pass both ways over --rows corpus
lines (tokenized to 128 tokens at most, shortest first in batches of 64, as the cache does), alternating
--rounds times, and compares the outputs: argmax agreement, the largest logit difference, the mean KL of the
softmax, and the mean relative error of the hidden states of --layers (per real token). Prints the machine.
"""
from __future__ import annotations

import argparse
import random
import statistics
import time

import torch
from transformers import AutoModelForSequenceClassification, AutoTokenizer

from shrinkbert.core.data.load import load_corpus
from shrinkbert.core.device import describe_machine


def batches_of(tokenizer, lines: list[str], max_length: int, size: int) -> list[dict]:
    ids = [tokenizer(line, truncation=True, max_length=max_length)["input_ids"] for line in lines]
    order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
    out = []
    for start in range(0, len(order), size):
        rows = [ids[i] for i in order[start:start + size]]
        width = max(map(len, rows))
        input_ids = torch.zeros(len(rows), width, dtype=torch.long)
        mask = torch.zeros_like(input_ids)
        for b, row in enumerate(rows):
            input_ids[b, :len(row)] = torch.tensor(row)
            mask[b, :len(row)] = 1
        out.append({"input_ids": input_ids, "attention_mask": mask, "token_type_ids": torch.zeros_like(input_ids)})
    return out


@torch.no_grad()
def run(model, batches: list[dict], layers: list[int], bf16: bool) -> tuple[float, list]:
    outputs = []
    start = time.perf_counter()
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        for batch in batches:
            out = model(**batch, output_hidden_states=True)
            outputs.append((out.logits.float(), [out.hidden_states[i].float() for i in layers], batch["attention_mask"]))
    return time.perf_counter() - start, outputs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("teacher", help="a fine-tuned sequence classifier folder (runs/demo/teacher)")
    parser.add_argument("--corpus", default="imdb", help="a built-in corpus or a text file")
    parser.add_argument("--rows", type=int, default=3000)
    parser.add_argument("--layers", default="3,6", help="hidden-state layers to compare (the demo's edge students')")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    lines = load_corpus(args.corpus)
    lines = random.Random(0).sample(lines, min(args.rows, len(lines)))
    tokenizer = AutoTokenizer.from_pretrained(args.teacher)
    model = AutoModelForSequenceClassification.from_pretrained(args.teacher).eval()
    batches = batches_of(tokenizer, lines, 128, 64)
    layers = [int(i) for i in args.layers.split(",")]
    tokens = sum(int(b["attention_mask"].sum()) for b in batches)
    print(f"machine: {describe_machine()}; {args.threads} threads; {len(lines)} {args.corpus} lines, {tokens} tokens")
    seconds: dict[bool, list[float]] = {False: [], True: []}
    outputs = {}
    for _ in range(args.rounds):
        for bf16 in (False, True):
            elapsed, outputs[bf16] = run(model, batches, layers, bf16)
            seconds[bf16].append(elapsed)
    fp32, bf16 = statistics.median(seconds[False]), statistics.median(seconds[True])
    print(f"fp32 {fp32:.1f} s ({tokens / fp32:,.0f} tokens/s), bf16 autocast {bf16:.1f} s ({tokens / bf16:,.0f} "
          f"tokens/s): {fp32 / bf16:.2f}x; rounds fp32 {[round(s, 1) for s in seconds[False]]}, "
          f"bf16 {[round(s, 1) for s in seconds[True]]}")
    agree = rows = 0
    max_diff, kl, rel = 0.0, [], {layer: [] for layer in layers}
    for (logits, hidden, mask), (logits16, hidden16, _) in zip(outputs[False], outputs[True]):
        agree += int((logits.argmax(-1) == logits16.argmax(-1)).sum())
        rows += len(logits)
        max_diff = max(max_diff, float((logits - logits16).abs().max()))
        log_p, log_q = torch.log_softmax(logits, -1), torch.log_softmax(logits16, -1)
        kl.append(float((log_p.exp() * (log_p - log_q)).sum(-1).mean()))
        real = mask.bool()
        for layer, a, b in zip(layers, hidden, hidden16):
            rel[layer].append(float(((a - b)[real].norm(dim=-1) / a[real].norm(dim=-1)).mean()))
    print(f"argmax agreement {agree / rows:.4f} ({rows - agree} of {rows} rows differ); largest |logit difference| "
          f"{max_diff:.4f}; mean KL {statistics.mean(kl):.2e}; hidden relative error "
          + ", ".join(f"layer {layer} {statistics.mean(values):.4f}" for layer, values in rel.items()))


if __name__ == "__main__":
    main()
