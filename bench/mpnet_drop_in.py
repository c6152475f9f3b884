"""Query encoders for an all-mpnet-base-v2 index against the goals: recipes/mpnet-drop-in.yaml over seeds.

    python bench/mpnet_drop_in.py                # the recipe at seeds 0-2 (finished stages reused), then the table
    python bench/mpnet_drop_in.py --seeds 1      # seed 0 alone: the recipe's own output folder
    python bench/mpnet_drop_in.py --no-run       # only read the finished reports

Seed 0 is the recipe as it ships (runs/mpnet-drop-in); seed s writes runs/mpnet-drop-in-seed<s>, its two
students distilled with --seed s (the index's documents are the same for every seed, so the teacher's vectors
of them are computed once). Each seed's report (eval, one run) measures MPNet, both students in PyTorch and
their int8 bundles on the same rows: SQuAD v1.1's held-out articles as the index (MPNet's vectors of their
paragraphs), their questions as queries; STS-B test and SNLI test; p50 at batch 1, 128 tokens, each variant
in a worker process of its own.

Prints and records (bench/results/drop-in-query-encoders.jsonl) each variant's recall@1 and @10 as shares
of MPNet's own (mean ± sd over seeds), the paired difference to MPNet in points with its bootstrap 95%
interval (seed 0), STS-B and NLI shares, the speed-up, the verdict against the goals, and each student's
first-run times (the teacher's pass over the documents and its rate, the training).
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from record import record  # noqa: E402  (bench/ is on the path above)

RECIPE = ROOT / "recipes" / "mpnet-drop-in.yaml"
STUDENTS = {"student": "MiniLM re-indexed", "bundle": "its int8 bundle",
            "slice": "MPNet slice", "slice-bundle": "its int8 bundle"}
GOAL = {"recall_at_10": 0.97, "recall_at_1": 0.93, "speedup": 5.0}  # shares of MPNet's, and the bundle's speed-up
TRAINED = ("student", "slice")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seeds", type=int, default=3, help="seeds 0..N-1")
    p.add_argument("--no-run", action="store_true", help="run nothing; read the finished reports")
    p.add_argument("--no-record", action="store_true", help="print only; append nothing to bench/results")
    return p.parse_args(argv)


def output_dir(seed: int) -> Path:
    return ROOT / "runs" / ("mpnet-drop-in" if seed == 0 else f"mpnet-drop-in-seed{seed}")


def label(stage: str, seed: int = 0) -> str:
    """The table's name of a stage: a trained student's carries its shape (layers/width) from its config."""
    config = output_dir(seed) / stage / "config.json"
    if stage not in TRAINED or not config.is_file():
        return STUDENTS[stage]
    shape = json.loads(config.read_text())
    return f"{STUDENTS[stage]} ({shape['num_hidden_layers']}L/H{shape['hidden_size']})"


def run_seed(seed: int) -> float:
    """Run the recipe at `seed` (finished stages reused); its wall seconds."""
    command = [sys.executable, "-m", "shrinkbert.cli", "run", str(RECIPE), "--output-dir", str(output_dir(seed))]
    for stage in TRAINED:
        command += ["--set", f"{stage}.seed={seed}"]
    started = time.perf_counter()
    code = subprocess.call(command, cwd=ROOT)
    if code != 0:
        raise SystemExit(code)
    return time.perf_counter() - started


def variant_figures(report: dict) -> dict[str, dict]:
    """{variant name: its shares of the baseline's figures} of one report."""
    by_name = {v["name"]: v for v in report["variants"] if not v.get("error")}
    base = by_name[report["baseline"]]["metrics"]
    teacher = base["retrieval"]["teacher"]
    found = {}
    for name in STUDENTS:
        metrics = by_name[name]["metrics"]
        drop_in = metrics["retrieval"]["drop_in"]
        found[name] = {"recall_at_1": drop_in["recall_at_1"]["value"] / teacher["recall_at_1"]["value"],
                       "recall_at_10": drop_in["recall_at_10"]["value"] / teacher["recall_at_10"]["value"],
                       "sts": metrics.get("of_baseline"), "nli": metrics.get("nli_of_baseline"),
                       "speedup": metrics.get("speedup_p50"), "p50_ms": metrics.get("p50_ms"),
                       "vs_teacher": metrics.get("retrieval_drop_in_vs_teacher")}
    found["teacher"] = {"recall_at_1": teacher["recall_at_1"]["value"], "recall_at_10": teacher["recall_at_10"]["value"],
                        "p50_ms": base.get("p50_ms"), "spearman": base.get("spearman")}
    return found


def mean_sd_text(values: list[float], percent: bool = True) -> str:
    """eval.stats.mean_sd as the table shows it: a share in % or a speed-up in x, "± sd" over several seeds."""
    from shrinkbert.eval.stats import mean_sd

    scale, unit = (100.0, "%") if percent else (1.0, "x")
    mean, sd = mean_sd(values)
    return f"{mean * scale:.1f}{unit}" + (f" ± {sd * scale:.1f}" if len(values) > 1 else "")


def training_rows(seeds: list[int]) -> list[dict]:
    """Each student's first-run times, from its distill manifest at each seed."""
    rows = []
    for seed in seeds:
        for stage in TRAINED:
            manifest = json.loads((output_dir(seed) / stage / "shrinkbert.json").read_text())
            drop_in, training = manifest["drop_in"], manifest["training"]
            rate = drop_in.get("teacher_document_vectors") or {}
            rows.append({"seed": seed, "student": label(stage, seed), "documents": drop_in["documents"]["train"],
                         "queries": manifest["metrics"]["train_sentences"],
                         "teacher pass (documents)": f"{rate['seconds']:.0f} s at {rate['rows_per_s']:.1f}/s, "
                                                     f"{rate['precision']}" if rate else "cached",
                         "training": f"{training['train_time_s'] / 60:.1f} min", "epoch kept": training["epoch_kept"]})
    return rows


def main(argv=None) -> int:
    args = parse_args(argv)
    seeds = list(range(args.seeds))
    walls = {}
    if not args.no_run:
        for seed in seeds:
            walls[seed] = run_seed(seed)
    reports = {}
    for seed in seeds:
        path = output_dir(seed) / "report" / "report.json"
        if not path.is_file():
            print(f"error: no {path}; run without --no-run", file=sys.stderr)
            return 2
        reports[seed] = variant_figures(json.loads(path.read_text()))
    first = reports[seeds[0]]
    rows = []
    for name in STUDENTS:
        shares = {key: [reports[s][name][key] for s in seeds] for key in ("recall_at_1", "recall_at_10", "sts", "nli", "speedup")}
        paired = first[name]["vs_teacher"] or {}
        bundle = name.endswith("bundle")
        met = (np.mean(shares["recall_at_10"]) >= GOAL["recall_at_10"] and np.mean(shares["recall_at_1"]) >= GOAL["recall_at_1"]
               and np.mean(shares["speedup"]) >= GOAL["speedup"])
        rows.append({"variant": label(name, seeds[0]), "recall@10 of MPNet's": mean_sd_text(shares["recall_at_10"]),
                     "recall@1 of MPNet's": mean_sd_text(shares["recall_at_1"]),
                     "Δ recall@10 (points, seed 0)": _interval(paired.get("recall_at_10")),
                     "Δ recall@1 (points, seed 0)": _interval(paired.get("recall_at_1")),
                     "STS-B of MPNet's": mean_sd_text(shares["sts"]), "NLI AUC of MPNet's": mean_sd_text(shares["nli"]),
                     "speed-up": mean_sd_text(shares["speedup"], percent=False),
                     "goal (>= 97% / 93% at >= 5x)": ("met" if met else "short") if bundle else "–"})
    for row in rows:
        print(" | ".join(f"{key}: {value}" for key, value in row.items()))
    times = training_rows(seeds)
    for row in times:
        print(" | ".join(f"{key}: {value}" for key, value in row.items()))
    if walls:
        print("recipe wall: " + ", ".join(f"seed {s} {w / 60:.1f} min" for s, w in walls.items()))
    if args.no_record:
        return 0
    teacher = first["teacher"]
    command = "python bench/mpnet_drop_in.py" + (f" --seeds {args.seeds}" if args.seeds != 3 else "")
    record("mpnet-drop-in", section="drop-in-query-encoders",
           title="Query encoders for an all-mpnet-base-v2 index: recipes/mpnet-drop-in.yaml",
           rows=rows, command=command,
           note=f"Two students of all-mpnet-base-v2 taught by `--objective drop-in` (recipes/mpnet-drop-in.yaml), "
                f"{len(seeds)} seed(s); each seed's report searches MPNet's index of the paragraphs of SQuAD v1.1 dev's "
                f"held-out articles (never trained on) with their questions: MPNet's own recall@1 "
                f"{teacher['recall_at_1']:.3f}, recall@10 {teacher['recall_at_10']:.3f}; shares of MPNet's, mean ± sd over "
                "seeds; Δ: the variant minus MPNet on the same questions with a paired bootstrap 95% interval; STS-B test "
                "Spearman and SNLI test ranking AUC as shares of MPNet's; speed-up: MPNet's p50 in PyTorch fp32 over the "
                "variant's, batch 1, a 128-token text, each in a worker process of its own; the goal is the bundle's.")
    record("mpnet-drop-in-times", section="drop-in-query-encoders",
           title="recipes/mpnet-drop-in.yaml: the teacher's pass and the training, first run",
           rows=times, command=command,
           note="From each student's distill manifest: the teacher's pass over the index's documents (bf16 autocast "
                "where the CPU computes in it; `cached` where an earlier student computed them) and the training time; "
                "the epoch kept by held-out drop-in recall (0: the untrained start)."
                + (" Recipe wall time, stages reused where finished: "
                   + ", ".join(f"seed {s} {w / 60:.1f} min" for s, w in walls.items()) + "." if walls else ""))
    print("recorded in bench/results/drop-in-query-encoders.jsonl (python bench/results.py updates the page)")
    return 0


def _interval(found: dict | None) -> str:
    if not found:
        return "–"
    return f"{found['value']:+.1f} [{found['low']:+.1f}, {found['high']:+.1f}]"


if __name__ == "__main__":
    sys.exit(main())
