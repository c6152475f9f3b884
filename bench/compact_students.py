"""Students that are not transformers (a BiLSTM, a CNN, a bag of token vectors) against the goals, as ratios
from one interleaved measurement each: on the demo's MiniLM teacher (recipes/movies-compact.yaml), on the
MPNet teacher (recipes/mpnet-compact.yaml), or on a sentence-pair task (recipes/pairs-compact.yaml, whose goal
is each student's single-text retention from the latest movies-compact report and frontier, less 2 points).

    python bench/compact_students.py              # runs recipes/movies-compact.yaml (finished stages reused),
                                                  # then `shrinkbert frontier` over --shapes, 3 seeds
    python bench/compact_students.py --no-run     # only read the finished report and frontier
    python bench/compact_students.py --recipe recipes/mpnet-compact.yaml --seeds 0   # MPNet's, report only
    python bench/compact_students.py --recipe recipes/pairs-compact.yaml             # pairs, 3 seeds
    python bench/compact_students.py --recipe recipes/mpnet-compact.yaml --frontier-only --shapes bilstm,bag
                                                  # the recipe's teacher stage alone, then the frontier
    python bench/compact_students.py --recipe recipes/mpnet-compact.yaml --frontier-only --shapes bilstm/H300/D512
        --max-transfer-rows 200000 --frontier-dir runs/mpnet-compact-frontier-200k   # (one line) more labelled rows

The figures, each recorded in bench/results/compact-students.jsonl:
  1. the recipe's report: the teacher, each student in PyTorch and its int8 bundle as deployed, on the same
     test rows, batch 1 and 8, each variant timed in a worker process holding only its runtime (one seed);
  2. the frontier: each --shapes student distilled with the recipe's own options over --seeds seeds, exported
     and quantized, then the teacher, its int8 export and every int8 student timed at batch 1, sequence 128 in
     one interleaved run: retention as mean ± sd over the seeds, with a paired bootstrap 95% interval over the
     test rows against the teacher, and speed-up against the teacher in PyTorch fp32;
  3. the teacher's labelling rate over the transfer sets, from the distill manifests that computed it.
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

from shrinkbert.core.compact import PAIR_SWITCHES  # noqa: E402

STUDENTS = ("bilstm", "cnn", "bag")
# each recipe's goals for its students: (retention, speed-up against the teacher in PyTorch fp32), a student at a time
GOALS = {"movies-compact": {"bilstm": [(0.96, 50.0)], "cnn": [(0.96, 50.0)], "bag": [(0.96, 50.0)]},
         "mpnet-compact": {"bilstm": [(0.95, 50.0), (0.97, 15.0)], "cnn": [(0.95, 50.0), (0.97, 15.0)],
                           "bag": [(0.90, 300.0)]}}
# a pair recipe's goal: each student's retention within PAIR_MARGIN of its single-text frontier figure
PAIR_RECIPES = {"pairs-compact": "movies-compact"}
PAIR_MARGIN = 0.02
TEACHERS = {"movies-compact": "the demo's MiniLM teacher", "mpnet-compact": "the MPNet teacher (all-mpnet-base-v2)",
            "pairs-compact": "MiniLM (all-MiniLM-L6-v2)"}
# the recipe's distill options the frontier passes to each of its students
SHARED = ("epochs", "batch_size", "augment", "transfer_corpus", "max_transfer_rows")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--recipe", default=str(ROOT / "recipes/movies-compact.yaml"))
    p.add_argument("--output-dir", help="the recipe's output directory (default: the recipe's own)")
    p.add_argument("--frontier-dir", help="where the frontier is written (default: the output directory + -frontier)")
    p.add_argument("--seeds", type=int, default=3, help="the frontier's seeds (0: the recipe's report alone)")
    p.add_argument("--shapes", default="bilstm/H96/D128,cnn/H64/D128,bag",
                   help="the frontier's students (shrinkbert frontier --shapes): narrower than the recipe's, for speed")
    p.add_argument("--frontier-only", action="store_true",
                   help="run the recipe's teacher stage alone (not its students and report), then the frontier; "
                        "record the frontier")
    p.add_argument("--max-transfer-rows", type=int,
                   help="the frontier's teacher-labelled registry rows (default: the recipe's own)")
    p.add_argument("--mixed-precision", choices=("auto", "no", "bf16"),
                   help="the frontier students' training precision, all of them (default: auto, fp32 for a student "
                        "that is not a transformer)")
    p.add_argument("--no-run", action="store_true", help="run nothing; read the finished report and frontier")
    p.add_argument("--no-record", action="store_true", help="print only; append nothing to bench/results")
    return p.parse_args(argv)


def pair_goals(single_text: str, figure: str) -> dict:
    """Each student's goal on a pair task: its retention in the latest recorded `figure` (report: each
    bundle, one seed; frontier: over seeds) of the single-text recipe, less PAIR_MARGIN, at any speed (the
    pair student's speed is shown beside it)."""
    results = ROOT / "bench" / "results" / "compact-students.jsonl"
    records = [json.loads(line) for line in results.read_text().splitlines() if line.strip()] if results.is_file() else []
    latest = [r for r in records if r["figure"] == f"{single_text}-{figure}"]
    if not latest:
        raise SystemExit(f"error: no {single_text}-{figure} in {results}: run bench/compact_students.py --recipe "
                         f"recipes/{single_text}.yaml first (the pair goals are relative to it)")
    goals = {}
    for row in latest[-1]["rows"]:
        student = row.get("student") or str(row["variant"]).removesuffix("-bundle")
        if student in STUDENTS and (figure == "frontier" or str(row["variant"]).endswith("-bundle")):
            single = float(str(row.get("retention (mean ± sd)") or row["retention"]).split("%")[0]) / 100
            goals[student] = [(round(single - PAIR_MARGIN, 4), 0.0)]
    return goals


def frontier_options(recipe_file: str, max_transfer_rows: int | None = None, mixed_precision: str | None = None) -> dict:
    """The distill options the recipe's three students share (and their learning rate); `max_transfer_rows`
    and `mixed_precision` replace the recipe's where given."""
    import yaml

    stages = yaml.safe_load(Path(recipe_file).read_text())["stages"]
    options = {key: stages["bilstm"]["with"][key] for key in SHARED + ("learning_rate",)
               if key in stages["bilstm"]["with"]}
    if any({key: stages[name]["with"].get(key) for key in options} != options for name in STUDENTS):
        raise SystemExit("error: the recipe's students do not share their distill options; the frontier takes one set")
    if max_transfer_rows is not None:
        options["max_transfer_rows"] = max_transfer_rows
    if mixed_precision is not None:
        options["mixed_precision"] = mixed_precision
    return options


def with_recipe_switches(recipe_file: str, shapes: str) -> str:
    """`shapes` with /align and /compose added to each student whose recipe stage aligns (cross_attention)
    or composes (composition) a pair's texts, so the frontier's students read pairs as the recipe's do."""
    import yaml

    stages = yaml.safe_load(Path(recipe_file).read_text())["stages"]
    parts = []
    for part in shapes.split(","):
        given = (stages.get(part.split("/")[0].strip().lower()) or {}).get("with") or {}
        for key, word in PAIR_SWITCHES:
            if given.get(key) and f"/{word}" not in part.lower():
                part += f"/{word}"
        parts.append(part)
    return ",".join(parts)


def frontier_command(recipe_file: str, output_dir: str, frontier_dir: str, seeds: int, shapes: str,
                     max_transfer_rows: int | None = None, mixed_precision: str | None = None) -> list[str]:
    """`shrinkbert frontier` over `shapes` with the recipe's own distill options (and its pair switches)."""
    options = frontier_options(recipe_file, max_transfer_rows, mixed_precision)
    command = [sys.executable, "-m", "shrinkbert.cli", "frontier", "--teacher", str(Path(output_dir) / "teacher"),
               "--speedups", "", "--shapes", with_recipe_switches(recipe_file, shapes), "--seeds", str(seeds),
               "--compact-learning-rate", str(options.pop("learning_rate")), "--output-dir", frontier_dir]
    for key, value in options.items():
        command += [f"--{key.replace('_', '-')}", str(value)]
    return command


def shown_path(part: str) -> str:
    """A path inside the repository relative to it (anything else as it is)."""
    path = Path(part)
    return str(path.relative_to(ROOT)) if path.is_absolute() and path.is_relative_to(ROOT) else part


def shown_command(command: list[str]) -> str:
    """The command as a reader types it: `shrinkbert ...`, paths inside the repository relative to it."""
    import shlex

    return shlex.join(["shrinkbert"] + [shown_path(part) for part in command[3:]])


def report_rows(report: dict, report_dir: Path, goals: dict) -> list[dict]:
    """The report's table (its own digits) with each bundle's goals and verdict at batch 1, sequence 128."""
    keep = ("variant", report["primary_metric"], "p50 ms", "speed-up", "size MB", "x smaller", "retention")
    ratios = {row["name"]: row.get("ratios") or {} for row in report["variants"]}
    rows = []
    for row in markdown_table((report_dir / "report.md").read_text()):
        entry = {key: value for key, value in row.items() if key in keep or key.startswith("Δ")}
        student = str(row["variant"]).removesuffix("-bundle")
        bundle = str(row["variant"]).endswith("-bundle") and student in goals
        measured = ratios.get(str(row["variant"]), {})
        entry["goal"], entry["verdict"] = (verdict(goals[student], measured.get("retention"), measured.get("speedup"))
                                           if bundle else ("", ""))
        rows.append(entry)
    return rows


def verdict(goals: list[tuple[float, float]], keep: float | None, speed: float | None) -> tuple[str, str]:
    """(the goals as text, PASS or what each falls short by)."""
    def one(want_keep, want_speed):
        if keep is None or speed is None:
            return "not measured"
        parts = [goal_text(keep, want_keep, unit="%")] + ([goal_text(speed, want_speed)] if want_speed else [])
        return " / ".join(dict.fromkeys(parts))
    return ("; ".join(f">= {k:.1%}" + (f" at >= {x:g}x" if x else "") if k * 100 % 1 else
                      f">= {k:.0%}" + (f" at >= {x:g}x" if x else "") for k, x in goals),
            "; ".join(one(k, x) for k, x in goals))


def frontier_rows(table: dict, goals: dict) -> list[dict]:
    rows = []
    for point in table["points"]:
        student = point["shape"]["student"]
        goal, judged = verdict(goals[student], point["retention_mean"], point["speedup_vs_torch"])
        vs = point.get("vs_reference") or {}
        rows.append({
            "student": student,
            "shape": f"H{point['shape']['hidden_size']}"  # as --shapes and the frontier's folders name it
                     + (f"/L{point['shape']['num_hidden_layers']}" if point["shape"]["num_hidden_layers"] > 1 else "")
                     + f"/D{point['shape']['embedding_dim']}"
                     + "".join(f"/{word}" for key, word in PAIR_SWITCHES if point["shape"].get(key)),
            "seeds": point["seeds"],
            "retention (mean ± sd)": f"{point['retention_mean']:.1%} ± {point['retention_sd']:.1%}",
            "vs teacher [95% CI]": (f"{vs['difference'] * 100:+.1f} [{vs['low'] * 100:+.1f}, {vs['high'] * 100:+.1f}]"
                                    if vs else "–"),
            "test acc": round(point["accuracy_mean"], 4),
            "p50 ms": round(point["p50_ms"], 3),
            "vs teacher PyTorch fp32": f"{point['speedup_vs_torch']:.1f}x",
            "vs teacher int8": f"{point['speedup_vs_teacher_int8']:.1f}x",
            "MB": round(point["size_mb"], 2),
            "goal": goal,
            "verdict": judged,
        })
    return rows


def labelling_rows(name: str, folders: list[Path]) -> list[dict]:
    """The teacher's labelling rate from every distill manifest under `folders` that computed its outputs."""
    rows = []
    for manifest_file in sorted(f for folder in folders if folder.is_dir() for f in folder.glob("**/shrinkbert.json")):
        manifest = json.loads(manifest_file.read_text())
        outputs = (manifest.get("student") or {}).get("teacher_outputs") or {}
        if manifest.get("stage") == "distill" and outputs.get("rows_per_s"):
            rows.append({"recipe": name, "student": manifest_file.parent.name,
                         "rows labelled": manifest["metrics"]["train_rows"], "rows/s": round(outputs["rows_per_s"]),
                         "precision": outputs.get("precision")})
    return rows


def main(argv=None) -> int:
    args = parse_args(argv)
    import yaml

    name = Path(args.recipe).stem
    args.output_dir = args.output_dir or str(ROOT / yaml.safe_load(Path(args.recipe).read_text())["output_dir"])
    given_frontier_dir = bool(args.frontier_dir)
    args.frontier_dir = args.frontier_dir or args.output_dir + "-frontier"
    if name not in GOALS and name not in PAIR_RECIPES:
        print(f"error: no goals for recipe {name} (known: {', '.join([*GOALS, *PAIR_RECIPES])})", file=sys.stderr)
        return 2
    goals = GOALS[name] if name in GOALS else pair_goals(PAIR_RECIPES[name], "report")
    frontier_goals = GOALS[name] if name in GOALS else (pair_goals(PAIR_RECIPES[name], "frontier") if args.seeds else {})
    command = frontier_command(args.recipe, args.output_dir, args.frontier_dir, args.seeds, args.shapes,
                                args.max_transfer_rows, args.mixed_precision) if args.seeds else []
    if args.frontier_only and not command:
        print("error: --frontier-only needs --seeds 1 or more", file=sys.stderr)
        return 2
    if not args.no_run:
        run_recipe = [sys.executable, "-m", "shrinkbert.cli", "run", args.recipe, "--output-dir", args.output_dir]
        for step in [run_recipe + (["--to", "teacher"] if args.frontier_only else [])] + ([command] if command else []):
            code = subprocess.call(step, cwd=ROOT)
            if code != 0:
                return code
    report_file = Path(args.output_dir) / "report" / "report.json"
    frontier_file = Path(args.frontier_dir) / "frontier.json"
    for needed in ([] if args.frontier_only else [report_file]) + ([frontier_file] if command else []):
        if not needed.is_file():
            print(f"error: no {needed}; run without --no-run", file=sys.stderr)
            return 2
    report = None if args.frontier_only else json.loads(report_file.read_text())
    report_table = report_rows(report, report_file.parent, goals) if report else []
    table = json.loads(frontier_file.read_text()) if command else None
    front = frontier_rows(table, frontier_goals) if table else []
    for rows in [rows for rows in (report_table, front) if rows]:
        print(" | ".join(rows[0]))
        for row in rows:
            print(" | ".join(str(value) for value in row.values()))
        print()
    if args.no_record:
        return 0
    options = frontier_options(args.recipe, args.max_transfer_rows, args.mixed_precision)
    stages = yaml.safe_load(Path(args.recipe).read_text())["stages"]
    teacher_stage = stages["teacher"]["with"]
    switched = {key: [stage for stage, spec in stages.items() if (spec.get("with") or {}).get(key)]
                for key in ("cross_attention", "composition")}
    pair_reading = "; ".join(f"{' and '.join(switched[key])} with {key}: {meaning}" for key, meaning in (
        ("cross_attention", "each token aligned with the other text's"),
        ("composition", "one more encoder layer over the joined states")) if switched[key])
    teacher, task, corpus = TEACHERS[name], teacher_stage["task"], options.get("transfer_corpus", "")
    rows_of = "pairs of " + corpus + " sentences (the next or a random one)" if name in PAIR_RECIPES else f"{corpus} sentences"
    goal_note = (f" Goal: each student's retention within {PAIR_MARGIN * 100:g} points of its single-text figure "
                 f"(the latest {PAIR_RECIPES[name]} report's, and frontier's), at any speed." if name in PAIR_RECIPES else "")
    if report:
        settings = report.get("settings") or {}
        record(f"{name}-report", section="compact-students",
               title=f"Students that are not transformers: recipes/{name}.yaml's report",
               rows=report_table, command=f"python bench/compact_students.py --recipe recipes/{name}.yaml"
                                          + (" --seeds 0" if not command else ""),
               note=f"recipes/{name}.yaml: {teacher} on {task}, each student distilled on the task's rows, "
                    f"{options.get('augment', 0)} perturbed copies of each and {options.get('max_transfer_rows', 0):,} "
                    f"{rows_of}, all labelled by the teacher"
                    + (f" ({pair_reading})" if pair_reading else "") + f"; every variant on the same {report['test_rows']['n']:,} "
                    f"test rows, timed at batch 1, sequence 128, {settings.get('threads')} threads, each in a worker process "
                    "holding only the runtime it ships in; one seed. Δ is to the teacher with a paired bootstrap 95% "
                    "interval; the goal and verdict are the bundle's, against the teacher in PyTorch fp32." + goal_note)
    # the frontier's own flags, where given, in the commands recorded
    frontier_flags = ((f" --max-transfer-rows {args.max_transfer_rows}" if args.max_transfer_rows else "")
                      + (f" --mixed-precision {args.mixed_precision}" if args.mixed_precision else "")
                      + (f" --frontier-dir {shown_path(args.frontier_dir)}" if given_frontier_dir else ""))
    labelling = labelling_rows(name, [Path(args.output_dir), Path(args.frontier_dir)])
    if labelling:
        record(f"{name}-labelling", section="compact-students",
               title=f"The teacher's labelling rate: recipes/{name}.yaml's transfer sets",
               rows=labelling, command=f"python bench/compact_students.py --recipe recipes/{name}.yaml"
                                       + (" --frontier-only" if args.frontier_only else "") + frontier_flags,
               note="The teacher's pass over a transfer set, from the distill manifests that computed it (a cache hit "
                    "computes nothing): rows a second, batches of 64 rows padded to their longest, the precision "
                    "--mixed-precision auto chose, all cores.")
    if not command:
        print("recorded in bench/results/compact-students.jsonl (python bench/results.py updates the page)")
        return 0
    record(f"{name}-frontier", section="compact-students",
           title="Students that are not transformers over seeds (the table's seeds column): int8 retention and speed-up",
           rows=front, command=f"python bench/compact_students.py --recipe recipes/{name}.yaml --seeds {args.seeds} "
                               + ("--frontier-only " if args.frontier_only else "")
                               + f"--shapes {args.shapes}{frontier_flags} (it runs: {shown_command(command)})",
           note=f"`shrinkbert frontier --shapes {args.shapes}` on the recipe's teacher with the recipe's distill "
                f"options: {args.seeds} seed{'s' if args.seeds > 1 else ''} each, exported and dynamic int8; the teacher, its O2+int8 export and "
                f"every int8 student timed in one interleaved run on the {table['test_rows']:,} test rows, batch 1, "
                f"sequence {table['seq_len']}, {table['threads']} threads. Retention: int8 test accuracy over the "
                "teacher's in PyTorch fp32; the interval pairs each row's share of the seeds that got it right with "
                "the teacher's (retention points)." + goal_note)
    print("recorded in bench/results/compact-students.jsonl (python bench/results.py updates the page)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
