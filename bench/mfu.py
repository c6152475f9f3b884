"""Model FLOPs utilisation of an MLM pretraining run, from its artifact's manifest (bench/cuda.sh).

    python bench/mfu.py runs/cuda/bert-base-bf16 --peak-tflops 989.4

FLOPs per trained token, counting matrix products only (embedding lookups, norms and softmax are
small): 6 x (L x 12 h^2 + h^2) for the layers and the pooler (forward 2, backward 4 per weight),
plus 12 x L x s x h for the attention scores and their mixing at s tokens per example (the PaLM
appendix's accounting), plus the MLM head's 6 x (h^2 + h V) for the share of tokens it runs on:
the kit's pretraining runs the head on the masked positions only (teachers/pretrain.masked_forward),
so that share is the run's masking probability (15%), not every token. `--full-head` counts it on
every token, as a model that projects every position would.
MFU = tokens/s x FLOPs per token / the chip's dense bf16 peak (989.4 TFLOP/s for an H100 SXM or an
H200). Printed for the whole run (compile time and warm-up included) and for the logging windows
after the first ("warm").
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path


def flops_per_token(layers: int, hidden: int, vocab: int, seq: int, head_share: float = 1.0) -> float:
    encoder = layers * 12 * hidden * hidden + hidden * hidden
    head = hidden * hidden + hidden * vocab  # the MLM head's transform and its projection to the vocabulary
    return 6.0 * (encoder + head_share * head) + 12.0 * layers * seq * hidden


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("artifact", help="a pretrain artifact (its shrinkbert.json and config.json)")
    p.add_argument("--peak-tflops", type=float, default=989.4, help="the chip's dense bf16 peak")
    p.add_argument("--seq", type=int, default=0, help="tokens per example (default: the run's max_length)")
    p.add_argument("--full-head", action="store_true", help="count the MLM head on every token")
    args = p.parse_args(argv)
    folder = Path(args.artifact)
    manifest = json.loads((folder / "shrinkbert.json").read_text())
    config = json.loads((folder / "config.json").read_text())
    metrics, run = manifest["metrics"], manifest["config"]
    seq = args.seq or run["max_length"]
    share = 1.0 if args.full_head else float(run.get("mlm_probability", 0.15))
    per_token = flops_per_token(config["num_hidden_layers"], config["hidden_size"], config["vocab_size"], seq, share)
    windows = [rate for _, rate in metrics.get("tokens_per_s_curve", [])[1:]]
    rates = {"whole run": metrics["tokens_per_s"]}
    if windows:
        rates[f"warm ({len(windows)} windows after the first)"] = sum(windows) / len(windows)
    for label, tokens_per_s in rates.items():
        achieved = tokens_per_s * per_token / 1e12
        print(f"{folder.name}, {label}: {tokens_per_s:,.0f} tokens/s x {per_token / 1e9:.3f} GFLOP/token "
              f"(head on {share:.0%} of tokens) = {achieved:.1f} TFLOP/s = MFU {achieved / args.peak_tflops:.1%} "
              f"of {args.peak_tflops} TFLOP/s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
