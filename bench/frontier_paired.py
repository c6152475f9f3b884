"""One point of two frontier folders, paired on the same test rows: the difference in retention
with its paired bootstrap 95% interval, for arms that `shrinkbert frontier --compare-to` cannot
pair because they ran as separate commands (bench/frontier.sh's 1 and 5: PCA init against columns).

    .venv/bin/python bench/frontier_paired.py runs/frontier runs/frontier-columns 2L-H160

Both folders must share the teacher; each arm's int8 students are scored on the test rows (no
timing), and each row's share of an arm's seeds that got it right is paired with the other arm's
(eval.stats.compare_runs). The seeds' own spread is the ± sd printed beside it.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from shrinkbert.core.data.dataspec import resolve_spec
from shrinkbert.eval.measure import Settings, measure
from shrinkbert.eval.report import correctness
from shrinkbert.eval.rows import load_test_rows
from shrinkbert.eval.stats import compare_runs, mean_sd
from shrinkbert.frontier import Config, point_label


def arm(folder: str, label: str) -> tuple[dict, list[str]]:
    table = json.loads((Path(folder) / "frontier.json").read_text())
    points = [p for p in table["points"] if point_label(p) == label]
    if not points:
        raise SystemExit(f"error: {folder} has no point {label} ({', '.join(map(point_label, table['points']))})")
    return table, [s["int8"] for s in points[0]["students"]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("a", help="frontier folder of arm A")
    parser.add_argument("b", help="frontier folder of arm B (the reference)")
    parser.add_argument("point", help="the point in both, e.g. 2L-H160 or 15x")
    args = parser.parse_args()
    table_a, students_a = arm(args.a, args.point)
    table_b, students_b = arm(args.b, args.point)
    teacher = table_a["teacher"]
    if teacher["path"] != table_b["teacher"]["path"]:
        raise SystemExit(f"error: the folders have other teachers ({teacher['path']}, {table_b['teacher']['path']})")
    rows = load_test_rows(resolve_spec(Config(teacher=teacher["path"]), [teacher["path"]]), split="test")
    settings = Settings(batch_sizes=[1], seq_lens=[str(table_a["seq_len"])], runs=1, warmup=0, memory="off",
                        max_length=table_a["seq_len"], isolate=False)
    variants = {v.path: v for v in measure(students_a + students_b, rows, settings, progress=False)}

    def outcomes(paths: list[str]) -> list[list[int]]:
        found = [correctness(variants[p], rows) for p in paths]
        for path, result in zip(paths, found):
            if isinstance(result, str):  # no per-row outcomes (a report that did not keep them)
                raise SystemExit(f"error: {path}: {result}")
        return [result[0] for result in found]

    runs_a, runs_b = outcomes(students_a), outcomes(students_b)
    for name, runs in ((args.a, runs_a), (args.b, runs_b)):
        mean, sd = mean_sd([100 * sum(r) / len(r) / teacher["accuracy"] for r in runs])
        print(f"{name} {args.point}: retention {mean:.1f}% ± {sd:.1f} over {len(runs)} seeds")
    diff = compare_runs(runs_a, runs_b)
    scale = 100 / teacher["accuracy"]
    verdict = "n.s. (covers zero)" if not diff.significant else "significant"
    print(f"A - B: {diff.difference * scale:+.1f} retention points [{diff.low * scale:+.1f}, {diff.high * scale:+.1f}] "
          f"{verdict}, {diff.n} test rows, {diff.resamples} resamples")


if __name__ == "__main__":
    main()
