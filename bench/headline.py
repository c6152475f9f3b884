"""The README's headline figures, as ratios from ONE eval run of the embedded demo.

    python bench/headline.py                 # runs recipes/demo.yaml (finished stages are reused), then prints
    python bench/headline.py --no-run        # only read runs/demo/report/report.json

Every number is a ratio between two variants measured by the same harness call (same test rows,
same threads, latency calls interleaved round-robin), so machine drift hits both sides alike:
  1. the edge variant (int8 ONNX of the trimmed edge student, and its torch-free bundle) vs the
     fine-tuned teacher: batch-1 latency at sequence 128, test-accuracy retention, file size;
  2. int8 vs fp32 ONNX of the same model, batch 1 and 8 at sequence 128;
  3. the pruned-and-recovered student vs the unpruned student it came from (PyTorch fp32).
The goals are printed beside each figure with PASS or SHORT BY. The table is also
written to runs/bench/headline.json and headline.md.
"""
from __future__ import annotations

import argparse
import decimal
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--recipe", default=str(ROOT / "recipes/demo.yaml"))
    p.add_argument("--output-dir", default=str(ROOT / "runs/demo"), help="the recipe's output directory")
    p.add_argument("--no-run", action="store_true", help="do not run the recipe; read its finished report")
    p.add_argument("--out", default=str(ROOT / "runs/bench/headline"))
    p.add_argument("--no-record", action="store_true",
                   help="do not append the report's table to bench/results/demo.jsonl")
    return p.parse_args(argv)


def p50(row: dict, case: str) -> float | None:
    return (row.get("latency_ms") or {}).get(case, {}).get("p50")


def ratio(a, b) -> float | None:
    return a / b if a is not None and b not in (None, 0) else None


def goal_text(value: float | None, goal: float, higher_is_better: bool = True, unit: str = "x") -> str:
    """PASS, or by how much the figure falls short: a factor for ratios, points otherwise."""
    if value is None:
        return "not measured"
    if (value >= goal) if higher_is_better else (value <= goal):
        return "PASS"
    if unit == "x":
        return f"SHORT BY {goal / value:.2f}x"
    if unit == "%":  # a retention fraction: the gap in percentage points
        return f"SHORT BY {(goal - value) * 100:.2f} pt"
    return f"SHORT BY {abs(value - goal):.2f}{unit}"


def headline_rows(report: dict) -> list[dict]:
    variants = {row["name"]: row for row in report["variants"] if not row.get("error")}
    metric = report["primary_metric"]

    def acc(name):
        return (variants.get(name) or {}).get("metrics", {}).get(metric)

    def size(name):
        return (variants.get(name) or {}).get("size_bytes")

    def lat(name, case):
        return p50(variants.get(name) or {}, case)

    rows = []

    def add(claim, value, goal, verdict, a, b):
        rows.append({"figure": claim, "value": value, "goal": goal, "verdict": verdict, "variant": a, "against": b})

    teacher = "teacher"
    for edge in ("edge-int8", "bundle"):
        if edge not in variants or teacher not in variants:
            continue
        speed = ratio(lat(teacher, "b1/s128"), lat(edge, "b1/s128"))
        keep = ratio(acc(edge), acc(teacher))
        smaller = ratio(size(teacher), size(edge))
        add(f"{edge} vs teacher: batch-1 latency, seq 128", speed, ">= 15x", goal_text(speed, 15), edge, teacher)
        add(f"{edge} vs teacher: test {metric} retention", keep, ">= 0.97",
            goal_text(keep, 0.97, unit="%"), edge, teacher)
        add(f"{edge} vs teacher: file size", smaller, ">= 10x", goal_text(smaller, 10), edge, teacher)
    if "edge-int8" in variants and "edge-onnx" in variants:
        for case in ("b1/s128", "b8/s128"):
            speed = ratio(lat("edge-onnx", case), lat("edge-int8", case))
            add(f"int8 vs fp32 ONNX: latency {case}", speed, ">= 2.5x", goal_text(speed, 2.5), "edge-int8", "edge-onnx")
        lost = (acc("edge-onnx") - acc("edge-int8")) * 100 if acc("edge-onnx") is not None else None
        add(f"int8 vs fp32 ONNX: {metric} lost (points)", lost, "<= 0.5",
            goal_text(lost, 0.5, higher_is_better=False, unit=" pt"), "edge-int8", "edge-onnx")
        smaller = ratio(size("edge-onnx"), size("edge-int8"))
        add("int8 vs fp32 ONNX: file size", smaller, "~4x", "PASS" if smaller and smaller >= 3.5 else
            goal_text(smaller, 3.5), "edge-int8", "edge-onnx")
    # the unpruned student the demo pruned (student-l3; student-l4 in a folder an older recipe made)
    unpruned = next((name for name in ("student-l3", "student-l4") if name in variants), None)
    if "pruned-recovered" in variants and unpruned:
        speed = ratio(lat(unpruned, "b1/s128"), lat("pruned-recovered", "b1/s128"))
        add("pruned (40% heads+FFN) vs unpruned: fp32 latency b1 s128", speed, ">= 1.5x",
            goal_text(speed, 1.5), "pruned-recovered", unpruned)
        lost = (acc(unpruned) - acc("pruned-recovered")) * 100 if acc(unpruned) is not None else None
        add(f"pruned (after recovery) vs unpruned: {metric} lost (points)", lost, "<= 1",
            goal_text(lost, 1.0, higher_is_better=False, unit=" pt"), "pruned-recovered", unpruned)
    return rows


def to_markdown(rows: list[dict], report: dict) -> str:
    lines = ["| figure | measured | goal | verdict |", "|---|---|---|---|"]
    for row in rows:
        value = row["value"]
        shown = "n/a" if value is None else (f"{value:.2f}x" if row["goal"].endswith("x") else f"{value:.3f}")
        lines.append(f"| {row['figure']} | {shown} | {row['goal']} | {row['verdict']} |")
    machine = report.get("machine") or {}
    lines.append("")
    lines.append(f"One eval run, {report['test_rows']['n']} test rows, threads={report['settings']['threads']}, "
                 f"{report['settings']['runs']} timed calls per case; machine: {json.dumps(machine, default=str)}")
    return "\n".join(lines) + "\n"


def markdown_table(markdown: str) -> list[dict]:
    """The first Markdown table of a report, as rows keyed by its header (numbers as numbers)."""
    lines = [line for line in markdown.splitlines()]
    start = next(i for i, line in enumerate(lines) if line.startswith("| "))
    header = [cell.strip() for cell in lines[start].strip().strip("|").split("|")]
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        row = {}
        for key, cell in zip(header, cells):
            plain = cell.replace("*", "")
            try:  # a Decimal keeps the report's digits (0.8500 stays 0.8500)
                row[key] = decimal.Decimal(plain) if "." in plain else int(plain)
            except (ValueError, decimal.InvalidOperation):
                row[key] = plain
        rows.append(row)
    return rows


def record_report(report: dict, report_dir: Path) -> None:
    """The demo's report table as the results page's demo figure, with this host and commit."""
    sys.path.insert(0, str(ROOT / "bench"))
    from record import record

    # the columns a reader compares variants by; the report keeps the rest (lineage, memory, agreement)
    keep = ("variant", report["primary_metric"], "p50 ms", "speed-up", "size MB", "x smaller", "retention")
    rows = [{key: value for key, value in row.items() if key in keep or key.startswith("Δ")}
            for row in markdown_table((report_dir / "report.md").read_text())]
    settings = report.get("settings") or {}
    record("demo-report", section="demo", title="The demo's report: every variant against the teacher",
           rows=rows, command="bash scripts/demo.sh && python bench/headline.py --no-run",
           note=f"Every variant on the same {report['test_rows']['n']:,} test rows, timed at batch 1, sequence 128, "
                f"{settings.get('threads')} threads, each in a worker process holding only the runtime it ships in "
                "(runs/demo/report/report.md); one run, one seed. Δ is to the teacher with a paired bootstrap 95% "
                "interval (n.s. where it covers zero).")


def main(argv=None) -> int:
    args = parse_args(argv)
    if not args.no_run:
        code = subprocess.call([sys.executable, "-m", "shrinkbert.cli", "run", args.recipe,
                                "--output-dir", args.output_dir], cwd=ROOT)
        if code != 0:
            return code
    report_file = Path(args.output_dir) / "report" / "report.json"
    if not report_file.is_file():
        print(f"error: no report at {report_file}; run without --no-run", file=sys.stderr)
        return 2
    report = json.loads(report_file.read_text())
    rows = headline_rows(report)
    table = to_markdown(rows, report)
    print(table)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "headline.json").write_text(json.dumps({"rows": rows, "report": str(report_file)}, indent=2) + "\n")
    (out / "headline.md").write_text(table)
    print(f"written to {out}/headline.json and headline.md")
    if not args.no_record:
        record_report(report, report_file.parent)
        print("recorded in bench/results/demo.jsonl (python bench/results.py updates the page)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
