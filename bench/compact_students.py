"""Students that are not transformers (a BiLSTM, a CNN, a bag of token vectors) on the demo's MiniLM teacher,
against the goals, as ratios from one interleaved measurement each.

    python bench/compact_students.py              # runs recipes/movies-compact.yaml (finished stages reused),
                                                  # then `shrinkbert frontier` over the three students, 3 seeds
    python bench/compact_students.py --no-run     # only read the finished report and frontier

Two figures, each recorded in bench/results/compact-students.jsonl:
  1. the recipe's report: the teacher, each student in PyTorch and its int8 bundle as deployed, on the same
     test rows, batch 1 and 8, each variant timed in a worker process holding only its runtime (one seed);
  2. the frontier: each student distilled with the recipe's own options over --seeds seeds, exported and
     quantized, then the teacher, its int8 export and every int8 student timed at batch 1, sequence 128 in one
     interleaved run: retention as mean ± sd over the seeds, with a paired bootstrap 95% interval over the
     test rows against the teacher, and speed-up against the teacher in PyTorch fp32.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from headline import goal_text, markdown_table  # noqa: E402  (bench/ is on the path above)
from record import record  # noqa: E402

STUDENTS = ("bilstm", "cnn", "bag")
# the goals of students that are not transformers on the MiniLM demo teacher (retention, speed-up vs PyTorch fp32)
GOALS = {"bilstm": (0.96, 50.0), "cnn": (0.96, 50.0), "bag": (0.90, 300.0)}
# the recipe's distill options the frontier passes to each of its students
SHARED = ("epochs", "batch_size", "augment", "transfer_corpus", "max_transfer_rows")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--recipe", default=str(ROOT / "recipes/movies-compact.yaml"))
    p.add_argument("--output-dir", default=str(ROOT / "runs/movies-compact"), help="the recipe's output directory")
    p.add_argument("--frontier-dir", default=str(ROOT / "runs/movies-compact-frontier"))
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--no-run", action="store_true", help="run nothing; read the finished report and frontier")
    p.add_argument("--no-record", action="store_true", help="print only; append nothing to bench/results")
    return p.parse_args(argv)


def frontier_command(recipe_file: str, output_dir: str, frontier_dir: str, seeds: int) -> list[str]:
    """`shrinkbert frontier` over the recipe's three students with the recipe's own distill options."""
    import yaml

    stages = yaml.safe_load(Path(recipe_file).read_text())["stages"]
    options = {key: stages["bilstm"]["with"][key] for key in SHARED if key in stages["bilstm"]["with"]}
    if any({key: stages[name]["with"].get(key) for key in SHARED} != {key: options.get(key) for key in SHARED}
           for name in STUDENTS):
        raise SystemExit("error: the recipe's students do not share their distill options; the frontier takes one set")
    command = [sys.executable, "-m", "shrinkbert.cli", "frontier", "--teacher", str(Path(output_dir) / "teacher"),
               "--speedups", "", "--shapes", ",".join(STUDENTS), "--seeds", str(seeds),
               "--compact-learning-rate", str(stages["bilstm"]["with"]["learning_rate"]),
               "--output-dir", frontier_dir]
    for key, value in options.items():
        command += [f"--{key.replace('_', '-')}", str(value)]
    return command


def report_rows(report_dir: Path, metric: str) -> list[dict]:
    keep = ("variant", metric, "p50 ms", "speed-up", "size MB", "x smaller", "retention")
    return [{key: value for key, value in row.items() if key in keep or key.startswith("Δ")}
            for row in markdown_table((report_dir / "report.md").read_text())]


def frontier_rows(table: dict) -> list[dict]:
    rows = []
    for point in table["points"]:
        student = point["shape"]["student"]
        want_keep, want_speed = GOALS[student]
        vs = point.get("vs_reference") or {}
        rows.append({
            "student": student,
            "shape": f"H{point['shape']['hidden_size']}/D{point['shape']['embedding_dim']}"
                     + (f"/L{point['shape']['num_hidden_layers']}" if point["shape"]["num_hidden_layers"] > 1 else ""),
            "seeds": point["seeds"],
            "retention (mean ± sd)": f"{point['retention_mean']:.1%} ± {point['retention_sd']:.1%}",
            "vs teacher [95% CI]": (f"{vs['difference'] * 100:+.1f} [{vs['low'] * 100:+.1f}, {vs['high'] * 100:+.1f}]"
                                    if vs else "–"),
            "test acc": round(point["accuracy_mean"], 4),
            "p50 ms": round(point["p50_ms"], 3),
            "vs teacher PyTorch fp32": f"{point['speedup_vs_torch']:.1f}x",
            "vs teacher int8": f"{point['speedup_vs_teacher_int8']:.1f}x",
            "MB": round(point["size_mb"], 2),
            "goal": f">= {want_keep:.0%} at >= {want_speed:g}x",
            "verdict": " / ".join(dict.fromkeys([goal_text(point["retention_mean"], want_keep, unit="%"),
                                                 goal_text(point["speedup_vs_torch"], want_speed)])),
        })
    return rows


def main(argv=None) -> int:
    args = parse_args(argv)
    command = frontier_command(args.recipe, args.output_dir, args.frontier_dir, args.seeds)
    if not args.no_run:
        for step in ([sys.executable, "-m", "shrinkbert.cli", "run", args.recipe, "--output-dir", args.output_dir],
                     command):
            code = subprocess.call(step, cwd=ROOT)
            if code != 0:
                return code
    report_file = Path(args.output_dir) / "report" / "report.json"
    frontier_file = Path(args.frontier_dir) / "frontier.json"
    for needed in (report_file, frontier_file):
        if not needed.is_file():
            print(f"error: no {needed}; run without --no-run", file=sys.stderr)
            return 2
    report, table = json.loads(report_file.read_text()), json.loads(frontier_file.read_text())
    report_table = report_rows(report_file.parent, report["primary_metric"])
    front = frontier_rows(table)
    for rows in (report_table, front):
        print(" | ".join(rows[0]))
        for row in rows:
            print(" | ".join(str(value) for value in row.values()))
        print()
    if args.no_record:
        return 0
    settings = report.get("settings") or {}
    record("compact-report", section="compact-students",
           title="Students that are not transformers on the demo's teacher: the recipe's report",
           rows=report_table, command=f"python bench/compact_students.py (shrinkbert run {Path(args.recipe).name})",
           note=f"recipes/movies-compact.yaml: the demo's MiniLM teacher, each student distilled on the task's rows, "
                f"4 perturbed copies of each and 100,000 IMDB sentences labelled by the teacher; every variant on the "
                f"same {report['test_rows']['n']:,} test rows, timed at batch 1, sequence 128, "
                f"{settings.get('threads')} threads, each in a worker process holding only the runtime it ships in; "
                "one seed. Δ is to the teacher with a paired bootstrap 95% interval.")
    record("compact-frontier", section="compact-students",
           title=f"Students that are not transformers over {args.seeds} seeds: int8 retention and speed-up",
           rows=front, command="python bench/compact_students.py (" + " ".join(command[2:]) + ")",
           note=f"`shrinkbert frontier --shapes bilstm,cnn,bag` on the recipe's teacher with the recipe's distill "
                f"options: {args.seeds} seeds each, exported and dynamic int8; the teacher, its O2+int8 export and "
                f"every int8 student timed in one interleaved run on the {table['test_rows']:,} test rows, batch 1, "
                f"sequence {table['seq_len']}, {table['threads']} threads. Retention: int8 test accuracy over the "
                "teacher's in PyTorch fp32; the interval pairs each row's share of the seeds that got it right with "
                "the teacher's (retention points).")
    print("recorded in bench/results/compact-students.jsonl (python bench/results.py updates the page)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
