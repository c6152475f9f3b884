"""Model FLOPs utilisation of an MLM pretraining run, from its artifact's manifest (bench/cuda.sh).

    python bench/mfu.py runs/cuda/bert-base-bf16 --peak-tflops 989.4

FLOPs per trained token, counting matrix products only (embedding lookups, norms and softmax are
small): 6 x (L x 12 h^2 + h^2 + h V) for the layers and the MLM head (forward 2, backward 4 per
weight), plus 12 x L x s x h for the attention scores and their mixing at s tokens per example
(the PaLM appendix's accounting). MFU = tokens/s x FLOPs per token / the chip's dense bf16 peak
(989.4 TFLOP/s for an H100 SXM or an H200).
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path


def flops_per_token(layers: int, hidden: int, vocab: int, seq: int) -> float:
    weights = layers * 12 * hidden * hidden + hidden * hidden + hidden * vocab
    return 6.0 * weights + 12.0 * layers * seq * hidden


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("artifact", help="a pretrain artifact (its shrinkbert.json and config.json)")
    p.add_argument("--peak-tflops", type=float, default=989.4, help="the chip's dense bf16 peak")
    p.add_argument("--seq", type=int, default=0, help="tokens per example (default: the run's max_length)")
    args = p.parse_args(argv)
    folder = Path(args.artifact)
    manifest = json.loads((folder / "shrinkbert.json").read_text())
    config = json.loads((folder / "config.json").read_text())
    tokens_per_s = manifest["metrics"]["tokens_per_s"]
    seq = args.seq or manifest["config"]["max_length"]
    per_token = flops_per_token(config["num_hidden_layers"], config["hidden_size"], config["vocab_size"], seq)
    achieved = tokens_per_s * per_token / 1e12
    print(f"{folder.name}: {tokens_per_s:,.0f} tokens/s x {per_token / 1e9:.3f} GFLOP/token = {achieved:.1f} TFLOP/s "
          f"= MFU {achieved / args.peak_tflops:.1%} of {args.peak_tflops} TFLOP/s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
