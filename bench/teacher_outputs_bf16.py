"""The teacher's cached outputs for distillation (students/cache.py), fp32 against bf16 autocast: time and fidelity.

    python bench/teacher_outputs_bf16.py runs/demo/teacher --corpus imdb --rows 3000

distill computes its teacher's logits and hidden states once per training set and caches them; with
`--mixed-precision auto` (the default) that pass runs under the training steps' autocast, bf16 on a CPU with
bf16 instructions for a teacher of hidden size 160 or more. This times the pass both ways over --rows corpus
lines (tokenized to 128 tokens at most, through the cache's own code: shortest first, batches of 64), alternating
--rounds times, and compares the outputs: argmax agreement, the largest logit difference, the mean KL of the
softmax, and the mean relative error of the hidden states of --layers (per real token). Prints the machine.
"""
from __future__ import annotations

import argparse
import random
import statistics
import time

import torch
from datasets import Dataset
from transformers import AutoModelForSequenceClassification, AutoTokenizer, DataCollatorWithPadding

from shrinkbert.core.data.load import load_corpus
from shrinkbert.core.device import describe_machine
from shrinkbert.students.cache import ROW_INDEX, TeacherCache, compute_teacher_outputs


def tokenized(tokenizer, lines: list[str], max_length: int) -> Dataset:
    """The lines as distill hands them to the cache: token ids of at most max_length, each row's position."""
    encoded = tokenizer(lines, truncation=True, max_length=max_length)
    return Dataset.from_dict({**encoded, ROW_INDEX: list(range(len(lines)))})


def run(model, dataset: Dataset, collate, layers: list[int], precision: str) -> tuple[float, TeacherCache]:
    """One pass of the kit's own cached-output code (students/cache.py) in `precision`: (seconds, outputs)."""
    start = time.perf_counter()
    cache = compute_teacher_outputs(model, dataset, collate, hidden_layers=layers, batch_size=64,
                                    log=lambda *_: None, precision=precision)
    return time.perf_counter() - start, cache


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
    dataset = tokenized(tokenizer, lines, 128)
    collate = DataCollatorWithPadding(tokenizer)
    layers = [int(i) for i in args.layers.split(",")]
    tokens = sum(map(len, dataset["input_ids"]))
    print(f"machine: {describe_machine()}; {args.threads} threads; {len(lines)} {args.corpus} lines, {tokens} tokens")
    seconds: dict[str, list[float]] = {"no": [], "bf16": []}
    outputs: dict[str, TeacherCache] = {}
    for _ in range(args.rounds):
        for precision in seconds:
            elapsed, outputs[precision] = run(model, dataset, collate, layers, precision)
            seconds[precision].append(elapsed)
    fp32, bf16 = statistics.median(seconds["no"]), statistics.median(seconds["bf16"])
    print(f"fp32 {fp32:.1f} s ({tokens / fp32:,.0f} tokens/s), bf16 autocast {bf16:.1f} s ({tokens / bf16:,.0f} "
          f"tokens/s): {fp32 / bf16:.2f}x; rounds fp32 {[round(s, 1) for s in seconds['no']]}, "
          f"bf16 {[round(s, 1) for s in seconds['bf16']]}")
    reference, candidate = outputs["no"], outputs["bf16"]
    logits, logits16 = reference.logits.float(), candidate.logits.float()
    differ = int((logits.argmax(-1) != logits16.argmax(-1)).sum())
    log_p, log_q = torch.log_softmax(logits, -1), torch.log_softmax(logits16, -1)
    kl = float((log_p.exp() * (log_p - log_q)).sum(-1).mean())
    # hidden states are stored per real token (fp16 either way): the relative error of each token's vector
    rel = {layer: float(((reference.hidden[layer].float() - candidate.hidden[layer].float()).norm(dim=-1)
                         / reference.hidden[layer].float().norm(dim=-1)).mean()) for layer in layers}
    print(f"argmax agreement {1 - differ / len(logits):.4f} ({differ} of {len(logits)} rows differ); largest |logit "
          f"difference| {float((logits - logits16).abs().max()):.4f}; mean KL {kl:.2e}; hidden relative error "
          + ", ".join(f"layer {layer} {value:.4f}" for layer, value in rel.items()))


if __name__ == "__main__":
    main()
