"""A teacher assistant at the 15x point: does 2L/H160 keep more when it learns from a
3-layer student than from the 6-layer teacher itself? (Mirzadeh et al. 2020, "Improved Knowledge
Distillation via Teacher Assistant".)

    python bench/assistant.py --frontier runs/frontier --seeds 3

For each seed s, the assistant is the frontier's 3L/H384/F768 student of seed s. A 2L/H160 student
is distilled from it with the frontier's recipe (train split + 16,000
IMDB sentences labelled by the assistant, logits + hidden KD, 2 epochs, lr 3e-4, seed s), exported
(O2) and quantized. One interleaved measurement then times and scores the teacher, the frontier's own
2L/H160 int8 students (distilled from the teacher) and these, on the same test rows; retention is
always against the original teacher. Writes runs/bench/assistant/assistant.json and prints the table.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RECIPE = dict(layers=2, hidden=160, heads=5, intermediate=640, epochs=2,  # the frontier's 2L/H160/A5/F640
              learning_rate=3e-4, logits_weight=1.0, hidden_weight=1.0,
              transfer_corpus="imdb", max_transfer_rows=16000, max_length=128)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--frontier", default=str(ROOT / "runs/frontier"), help="a frontier run with 3L-H384-F768 "
                   "and 2L-H160 students (bench/frontier.sh)")
    p.add_argument("--teacher", default=str(ROOT / "runs/demo/teacher"), help="the frontier's teacher")
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--out", default=str(ROOT / "runs/bench/assistant"))
    args = p.parse_args(argv)

    from shrinkbert import distill, export, quantize, report
    from shrinkbert.core.artifacts import is_artifact
    from shrinkbert.core.device import describe_machine

    print("machine:", describe_machine(), flush=True)
    students = Path(args.frontier) / "students"
    out = Path(args.out)
    direct, assisted = [], []
    for seed in range(args.seeds):
        assistant = students / f"3L-H384-F768-seed{seed}"
        baseline = students / f"2L-H160-seed{seed}-int8"
        if not (is_artifact(assistant) and is_artifact(baseline)):
            print(f"error: {assistant} or {baseline} missing: run bash bench/frontier.sh first", file=sys.stderr)
            return 2
        where = out / f"2L-H160-via-3L-seed{seed}"
        student = where if is_artifact(where) else distill(teacher=str(assistant), seed=seed, output_dir=str(where),
                                                            **RECIPE)
        onnx = export(model=student, optimization="O2", output_dir=str(where) + "-onnx")
        int8 = quantize(model=onnx, approach="dynamic", output_dir=str(where) + "-int8")
        direct.append(str(baseline))
        assisted.append(str(int8))
    table = report(args.teacher, *direct, *assisted, batch_sizes=[1], seq_lens=["128"], memory="off",
                   output_dir=str(out / "report"), progress=False, plot=False)
    rows = {Path(row["path"]).resolve(): row for row in table["variants"]}
    metric = table["primary_metric"]

    def score(path):
        return rows[Path(path).resolve()]["metrics"][metric]

    def p50(path):
        return rows[Path(path).resolve()]["latency_ms"]["b1/s128"]["p50"]

    teacher_score, teacher_ms = score(args.teacher), p50(args.teacher)
    result = {}
    print(f"\n2L/H160 int8 students, retention of the teacher's test {metric} ({teacher_score:.4f}), "
          f"{args.seeds} seeds, one interleaved measurement (b1/s128):")
    for arm, paths in (("from the teacher (frontier)", direct), ("via the 3L/H384/F768 assistant", assisted)):
        kept = [score(path) / teacher_score * 100 for path in paths]
        speed = statistics.fmean(teacher_ms / p50(path) for path in paths)
        sd = statistics.stdev(kept) if len(kept) > 1 else 0.0
        result[arm] = {"retention": kept, "mean": statistics.fmean(kept), "sd": sd, "speedup": speed}
        print(f"  {arm:32s} {statistics.fmean(kept):5.1f}% ± {sd:.1f}  ({' / '.join(f'{k:.1f}' for k in kept)})"
              f"  {speed:.2f}x the teacher")
    out.mkdir(parents=True, exist_ok=True)
    (out / "assistant.json").write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
