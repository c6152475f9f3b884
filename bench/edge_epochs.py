"""The demo's edge student re-distilled for more epochs: does it keep more of the teacher?

    python bench/edge_epochs.py                          # epochs 2 (the recipe's) and 3, seeds 0..2
    python bench/edge_epochs.py --epochs 2,3,4 --seeds 2

For each seed, the chain recipes/demo.yaml runs for its edge student: a 2-layer student at the
teacher's full width (H384) distilled for 2 epochs, half its heads and three quarters of its FFN
neurons cut (`shrinkbert prune`), then the cut distilled again (logits + hidden loss, 16,000
teacher-labelled IMDB sentences, lr 3e-4) for each of --epochs. Seed 0 takes the demo's own wide
student and cut (runs/demo, made by `bash scripts/demo.sh`), so the recipe's student-edge is that
seed's 2-epoch arm; students already in --out are reused.

Every student and the teacher are scored on the task's validation rows and on its test rows (no
timing): retention mean ± sd over seeds per arm, and each arm's difference to the first with a paired
bootstrap 95% interval over the rows (eval.stats.compare_runs). Validation picks; the test rows
report. The host's CPU and ISA are printed (training differs by host: bf16 autocast).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DISTILL = ["--learning-rate", "3e-4", "--logits-weight", "1.0", "--hidden-weight", "1.0", "--cache-hidden",
           "--transfer-corpus", "imdb", "--max-transfer-rows", "16000"]  # recipes/demo.yaml's student-edge


def shrinkbert(*args: str, log: Path) -> None:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    with open(log, "w") as handle:
        done = subprocess.run([str(ROOT / ".venv/bin/shrinkbert"), *args], stdout=handle, stderr=subprocess.STDOUT,
                              env=env, cwd=ROOT)
    if done.returncode:
        raise SystemExit(f"error: shrinkbert {args[0]} failed (see {log})")


def wide_and_cut(teacher: str, folder: Path, seed: int, extra: tuple[str, ...] = ()) -> tuple[Path, Path]:
    """The recipe's wide student (2 of the teacher's layers at its width, 2 epochs) and its cut (half the
    heads, three quarters of the FFN neurons), in `folder`, made where missing; `extra`: distill options,
    given last so they may override the recipe's (its epochs too)."""
    wide, cut = folder / "wide", folder / "cut"
    if not (wide / "shrinkbert.json").is_file():
        shrinkbert("distill", "--teacher", teacher, *DISTILL, "--layers", "2", "--epochs", "2", *extra,
                   "--seed", str(seed), "--output-dir", str(wide), log=folder / "wide.log")  # extra last: it may override
    if not (cut / "shrinkbert.json").is_file():
        shrinkbert("prune", "--model", str(wide), "--head-fraction", "0.5", "--neuron-fraction", "0.75",
                   "--head-scope", "per_layer", "--output-dir", str(cut), log=folder / "cut.log")
    return wide, cut


def edge_student(teacher: str, cut: Path, edge: Path, epochs: int, seed: int, log: Path,
                 extra: tuple[str, ...] = ()) -> Path:
    """The cut distilled again for `epochs` into `edge`, where not made yet."""
    if not (edge / "shrinkbert.json").is_file():
        shrinkbert("distill", "--teacher", teacher, *DISTILL, *extra, "--student", str(cut), "--epochs",
                   str(epochs), "--seed", str(seed), "--output-dir", str(edge), log=log)
    return edge


def students(args) -> dict[int, list[Path]]:
    """{epochs: [the edge student of each seed]}, distilled where not in --out yet."""
    made: dict[int, list[Path]] = {epochs: [] for epochs in args.epochs}
    for seed in range(args.seeds):
        folder = Path(args.out) / f"s{seed}"
        folder.mkdir(parents=True, exist_ok=True)
        if seed == 0:
            wide, cut = Path(args.demo) / "student-wide", Path(args.demo) / "edge-cut"
            if not (cut / "shrinkbert.json").is_file():
                raise SystemExit(f"error: {cut} is missing: run `bash scripts/demo.sh` first")
        else:
            wide, cut = wide_and_cut(args.teacher, folder, seed)
        for epochs in args.epochs:
            edge = Path(args.demo) / "student-edge" if seed == 0 and epochs == 2 else folder / f"edge{epochs}"
            made[epochs].append(edge_student(args.teacher, cut, edge, epochs, seed, log=folder / f"edge{epochs}.log"))
            print(f"seed {seed}, {epochs} epochs: {edge}", flush=True)
    return made


def score(made: dict[int, list[Path]], teacher: str, split: str) -> dict:
    from shrinkbert.core.data.dataspec import resolve_spec
    from shrinkbert.eval.measure import Settings, measure
    from shrinkbert.eval.report import correctness
    from shrinkbert.eval.rows import load_test_rows
    from shrinkbert.eval.stats import compare_runs, mean_sd
    from shrinkbert.frontier import Config

    rows = load_test_rows(resolve_spec(Config(teacher=teacher), [teacher]), split=split)
    settings = Settings(batch_sizes=[1], seq_lens=["128"], runs=1, warmup=0, memory="off", max_length=128,
                        isolate=False)
    paths = [teacher] + [str(p) for arm in made.values() for p in arm]
    variants = {v.path: v for v in measure(paths, rows, settings, progress=False)}

    def outcomes(path: str) -> list[int]:
        found = correctness(variants[path], rows)
        if isinstance(found, str):
            raise SystemExit(f"error: {path}: {found}")
        return found[0]
    teacher_rows = outcomes(teacher)
    teacher_accuracy = sum(teacher_rows) / len(teacher_rows)
    runs = {epochs: [outcomes(str(p)) for p in arm] for epochs, arm in made.items()}
    first = next(iter(runs))
    result = {"split": split, "rows": len(teacher_rows), "teacher_accuracy": teacher_accuracy, "arms": {}}
    for epochs, arm_runs in runs.items():
        retention = [100 * sum(r) / len(r) / teacher_accuracy for r in arm_runs]
        mean, sd = mean_sd(retention)
        entry = {"retention": retention, "mean": mean, "sd": sd}
        if epochs != first:
            diff = compare_runs(arm_runs, runs[first])
            scale = 100 / teacher_accuracy
            entry["vs_first"] = {"points": diff.difference * scale, "low": diff.low * scale, "high": diff.high * scale,
                                 "significant": bool(diff.significant)}
        result["arms"][epochs] = entry
    return result


def print_splits(splits: list[dict], seeds: int, name) -> None:
    """Each split's arms (from `score`): retention mean ± sd over seeds, the paired difference to the first arm."""
    for split in splits:
        print(f"{split['split']} ({split['rows']} rows, teacher {split['teacher_accuracy']:.4f}):")
        first = next(iter(split["arms"]))
        for key, arm in split["arms"].items():
            line = (f"  {name(key)}: retention {arm['mean']:.1f}% ± {arm['sd']:.1f} over {seeds} seeds "
                    f"({', '.join(f'{r:.1f}' for r in arm['retention'])})")
            if "vs_first" in arm:
                d = arm["vs_first"]
                line += (f"; vs {name(first)} {d['points']:+.1f} [{d['low']:+.1f}, {d['high']:+.1f}]"
                         + ("" if d["significant"] else " n.s."))
            print(line)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", default="2,3", help="comma-separated epochs of the cut's distillation (first: the reference)")
    parser.add_argument("--seeds", type=int, default=3, help="seeds 0..N-1")
    parser.add_argument("--demo", default=str(ROOT / "runs/demo"), help="the demo's output folder (its teacher, seed 0's chain)")
    parser.add_argument("--out", default=str(ROOT / "runs/bench/edge-epochs"), help="students and edge_epochs.json")
    args = parser.parse_args()
    args.epochs = [int(e) for e in args.epochs.split(",")]
    args.teacher = str(Path(args.demo) / "teacher")
    from shrinkbert.core.device import describe_machine

    made = students(args)
    results = {"machine": describe_machine(), "epochs": args.epochs, "seeds": args.seeds,
               "splits": [score(made, args.teacher, split) for split in ("validation", "test")]}
    print(f"machine: {results['machine']}")
    print_splits(results["splits"], args.seeds, lambda epochs: f"{epochs} epochs")
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "edge_epochs.json").write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    sys.exit(main())
