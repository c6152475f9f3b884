"""The teacher as one ONNX graph (pooling and normalisation inside) and its dynamic int8 twin, against
PyTorch fp32, in one run: STS-B test Spearman of cosine (x100) of each, the int8 loss in points, the
parity gap at export, and latency at batch 1 on a 128-token text, the three interleaved.

    python bench/embedding_onnx.py                    # teacher minilm
    python bench/embedding_onnx.py --teacher runs/some-embedding-student

All three are timed text -> normalised vector (tokenizing included), with 2 threads each (ORT
without spinning); the graphs go to runs/embedding/onnx-<name>{,-int8}; figures to
runs/bench/embedding_onnx.json.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
for name, value in (("HF_HUB_OFFLINE", "1"), ("HF_DATASETS_OFFLINE", "1"), ("TOKENIZERS_PARALLELISM", "false")):
    os.environ.setdefault(name, value)

import torch  # noqa: E402
from embedding_static import MTEB_TEACHER, STSB, interleaved, long_text  # noqa: E402  (bench/ sibling)

from shrinkbert import export, quantize  # noqa: E402
from shrinkbert.compress.embedding_onnx import OnnxEmbedder  # noqa: E402
from shrinkbert.core.scored_pairs import read_scored_pairs  # noqa: E402
from shrinkbert.core.device import describe_machine, set_threads  # noqa: E402
from shrinkbert.core.kinds.embedder import Embedder  # noqa: E402
from shrinkbert.core.kinds.sts import sts_spearman  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--teacher", default="minilm")
    parser.add_argument("--stsb", default=str(STSB / "test.csv"))
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--burst", type=int, default=5)
    parser.add_argument("--out", default=str(ROOT / "runs" / "bench" / "embedding_onnx.json"))
    args = parser.parse_args(argv)
    set_threads(args.threads)
    machine = describe_machine()
    print(f"machine: {machine}; threads {args.threads}")
    fp32_dir = ROOT / "runs" / "embedding" / f"onnx-{Path(args.teacher).name}"
    int8_dir = fp32_dir.with_name(fp32_dir.name + "-int8")
    started = time.perf_counter()
    gap = export(model=str(args.teacher), output_dir=str(fp32_dir), optimization="none").metrics["parity"]["max_abs_logit_diff"]
    choice = quantize(model=str(fp32_dir), output_dir=str(int8_dir)).metrics["int8_choice"]
    print(f"export + int8 in {time.perf_counter() - started:.0f} s; export parity max |diff| {gap:.1e}; "
          f"int8 {choice['isa']} per_channel={choice['per_channel']} reduce_range={choice['reduce_range']}")

    teacher = Embedder.load(args.teacher, max_length=args.seq_len)
    runners = {"torch_fp32": teacher,
               "onnx_fp32": OnnxEmbedder(fp32_dir, threads=args.threads, max_length=args.seq_len),
               "onnx_int8": OnnxEmbedder(int8_dir, threads=args.threads, max_length=args.seq_len)}
    pairs = read_scored_pairs(args.stsb)
    scores = {name: sts_spearman(runner.encode, pairs) for name, runner in runners.items()}
    print(f"STS-B test ({len(pairs.scores)} pairs), Spearman x100: " +
          "  ".join(f"{name} {score:.2f}" for name, score in scores.items()) + f"  (MTEB {MTEB_TEACHER})")
    print(f"  int8 vs fp32 ONNX: {scores['onnx_int8'] - scores['onnx_fp32']:+.2f} points")

    text = long_text(pairs.first + pairs.second, teacher.tokenizer, args.seq_len)

    def call(runner):
        if runner is teacher:
            return lambda: _torch_call(teacher, text, args.seq_len)
        return lambda: runner.encode([text], padding="max_length")

    stats = interleaved({name: call(runner) for name, runner in runners.items()}, args.rounds, args.burst)
    base = stats["torch_fp32"]["p50"]
    print(f"batch 1, {args.seq_len} tokens, p50 ms: " +
          "  ".join(f"{name} {s['p50']:.2f} ({base / s['p50']:.2f}x)" for name, s in stats.items()))
    result = {"machine": machine, "threads": args.threads, "teacher": args.teacher, "export_gap": gap,
              "int8": choice, "stsb_spearman": scores, "int8_minus_fp32": scores["onnx_int8"] - scores["onnx_fp32"],
              "latency_ms": stats, "seq_len": args.seq_len}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2, default=str))
    print(f"-> {args.out}")
    return 0


def _torch_call(teacher: Embedder, text: str, seq_len: int):
    with torch.inference_mode():
        inputs = teacher.tokenizer([text], padding="max_length", truncation=True, max_length=seq_len,
                                   return_tensors="pt")
        return teacher.forward(inputs).numpy()


if __name__ == "__main__":
    sys.exit(main())
