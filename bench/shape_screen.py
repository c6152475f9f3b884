"""Latency of candidate student shapes on the runtime they ship in, before any is trained.

    python bench/shape_screen.py --teacher runs/demo/teacher --speedup 15 --hidden 96,128,160,192,288

Times random-init students of every (layers, hidden) in the grid exactly as the frontier's picker
does (students/shape.pick_by_latency: O2-free TorchScript ONNX export, dynamic int8 with this CPU's
defaults, ONNX Runtime, interleaved with a teacher-sized neighbour), against the latency target
teacher PyTorch fp32 p50 / speedup, and prints which shapes fit. Widths are given explicitly so
shapes the picker's default grid (quarters of the teacher's width) skips can be screened too.
"""
from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--teacher", default=str(ROOT / "runs/demo/teacher"))
    p.add_argument("--speedup", type=float, default=15)
    p.add_argument("--hidden", default="96,128,160,192,288", help="widths to screen (multiples of the head size)")
    p.add_argument("--max-length", type=int, default=128)
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--json", default="", help="also write the rows here")
    args = p.parse_args(argv)

    from transformers import AutoConfig

    from shrinkbert.core.device import detect_isa
    from shrinkbert.frontier import probe_teacher_ms
    from shrinkbert.students.shape import parse_target, pick_by_latency

    threads = args.threads or os.cpu_count() or 1
    teacher_ms = probe_teacher_ms(args.teacher, args.max_length, threads)
    target_ms = teacher_ms / args.speedup
    print(f"CPU ISA {detect_isa()}, {threads} threads; teacher PyTorch fp32 p50 {teacher_ms:.2f} ms; "
          f"{args.speedup:g}x target {target_ms:.2f} ms")
    config = AutoConfig.from_pretrained(args.teacher)
    # A generous target, so no width is cut off early: every shape is timed, and 'fits' is judged here.
    _, rows = pick_by_latency(config, parse_target(f"{target_ms * 1.6:.4f}ms"), seq_len=args.max_length,
                                  threads=threads, runtime="onnx-int8",
                                  hidden_steps=[int(h) for h in args.hidden.split(",")], log=lambda m: None)
    for row in rows:
        row["fits"] = row["p50_ms"] is not None and row["p50_ms"] <= target_ms
        p50 = "-" if row["p50_ms"] is None else f"{row['p50_ms']:.2f}"
        print(f"{row['shape']:>22}  {row['MB']:7.1f} MB fp32  p50 {p50:>6} ms  "
              f"{'fits' if row['fits'] else ''}")
    if args.json:
        Path(args.json).write_text(json.dumps({"teacher_ms": teacher_ms, "target_ms": target_ms, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
