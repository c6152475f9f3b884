"""A small pair task with the defaults: does an int8 student keep >= 95% of its teacher
on about 1,400 training rows?

    python bench/small_data.py                       # both arms, 3 seeds (about 20 minutes on 2 cores)
    python bench/small_data.py --arms defaults --seeds 1

The task: SNLI (../shared/data/snli, three labels), 1,400 training and 500 validation pairs drawn
from its validation file and 1,000 test pairs from its test file, written as a user's CSV folder
(premise, hypothesis, label). The teacher: all-MiniLM-L6-v2 fine-tuned on it, 5 epochs. Each arm distils a 3-layer H384 student (3 epochs) per seed, exports it
and quantizes it
(dynamic int8); every int8 student and the teacher are scored on the same 1,000 test rows.
  defaults    distill with --small-data off: logits loss only, the task's rows only
  small-data  what distill switches on below 5,000 rows (students/distill.py SMALL_DATA):
              the hidden-state loss and teacher-labelled perturbed copies of each row (--augment)
Prints retention mean ± sd over seeds, each arm's accuracy difference to `defaults` with a paired
bootstrap 95% interval over the test rows, and the host's CPU and ISA; saves --out/small_data.json.
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import random
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SNLI = ROOT.parent / "shared" / "data" / "snli"
COLUMNS = dict(text_column="premise", text_pair_column="hypothesis", label_column="label")
STUDENT = dict(layers=3, hidden=384, epochs=3)
ARMS = {"defaults": dict(small_data="off"), "small-data": dict(small_data="auto")}


def write_task(out: Path, train_rows: int = 1400, validation_rows: int = 500, test_rows: int = 1000) -> Path:
    """The task folder (train/validation/test CSVs), drawn once with a fixed seed."""
    def read(name: str) -> list[dict]:
        with open(SNLI / name, newline="") as handle:
            return [row for row in csv.DictReader(handle) if row["label"] in ("entailment", "neutral", "contradiction")]
    rng = random.Random(0)
    pool, test = read("validation.csv"), read("test.csv")
    rng.shuffle(pool)
    rng.shuffle(test)
    splits = {"train": pool[:train_rows], "validation": pool[train_rows:train_rows + validation_rows],
              "test": test[:test_rows]}
    out.mkdir(parents=True, exist_ok=True)
    for split, rows in splits.items():
        with open(out / f"{split}.csv", "w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=["premise", "hypothesis", "label"])
            writer.writeheader()
            writer.writerows({k: row[k] for k in ("premise", "hypothesis", "label")} for row in rows)
    return out


def correct_rows(artifact: Path, rows: list[dict], onnx: bool) -> list[bool]:
    from transformers import AutoTokenizer

    from shrinkbert.compress.common import load_pt, ort_logits, ort_session, torch_logits

    if onnx:
        tokenizer = AutoTokenizer.from_pretrained(str(artifact), use_fast=True)
        logits = ort_logits(ort_session(artifact), tokenizer, rows, 128)
    else:
        model, tokenizer = load_pt(artifact)
        logits = torch_logits(model, tokenizer, rows, 128)
    return [bool(p == r["label"]) for p, r in zip(logits.argmax(-1), rows)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--arms", default=",".join(ARMS))
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--out", default=str(ROOT / "runs" / "bench" / "small-data"))
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    import shrinkbert
    from shrinkbert.compress.common import load_rows
    from shrinkbert.core.artifacts import is_artifact, read_manifest
    from shrinkbert.core.data.dataspec import resolve_spec
    from shrinkbert.core.device import cpu_model, detect_isa
    from shrinkbert.eval.stats import compare_runs, difference_text, mean_sd

    out = Path(args.out)
    task = write_task(out / "task")
    teacher = out / "teacher"
    if not is_artifact(teacher):
        shrinkbert.finetune(model="minilm", task=str(task), epochs=5, output_dir=str(teacher), **COLUMNS)
    spec = resolve_spec(type("C", (), {"task": ""})(), [str(teacher)])
    rows, _ = load_rows(spec, "test", None)
    runs: dict[str, list[list[bool]]] = {"teacher": [correct_rows(teacher, rows, onnx=False)]}
    records: dict[str, list[dict]] = {}
    for arm in args.arms.split(","):
        for seed in range(args.seeds):
            where = out / arm / f"seed{seed}"
            started = time.perf_counter()
            if not is_artifact(where / "int8"):
                shrinkbert.distill(teacher=str(teacher), seed=seed, output_dir=str(where / "student"),
                                   **STUDENT, **ARMS[arm])
                shrinkbert.export(model=str(where / "student"), output_dir=str(where / "onnx"))
                shrinkbert.quantize(model=str(where / "onnx"), output_dir=str(where / "int8"))
            runs.setdefault(arm, []).append(correct_rows(where / "int8", rows, onnx=True))
            student = read_manifest(where / "student")
            records.setdefault(arm, []).append({"seed": seed, "accuracy": float(np.mean(runs[arm][-1])),
                                                "train_rows": student["metrics"]["train_rows"],
                                                "small_data": student.get("small_data"),
                                                "minutes": round((time.perf_counter() - started) / 60, 1)})
            print(f"{arm} seed {seed}: int8 accuracy {records[arm][-1]['accuracy']:.4f}", flush=True)
    teacher_accuracy = float(np.mean(runs["teacher"][0]))
    host = f"{cpu_model()}, {detect_isa()}, {os.cpu_count()} cores"
    print(f"\nhost: {host}; {len(rows)} test rows; teacher {teacher_accuracy:.4f}")
    print(f"{'arm':12s} {'int8 accuracy':>20s} {'retention':>18s}  vs defaults (paired, 95%)")
    table = {}
    for arm in records:
        accuracy = mean_sd([r["accuracy"] for r in records[arm]])
        retention = mean_sd([r["accuracy"] / teacher_accuracy for r in records[arm]])
        versus = compare_runs(runs[arm], runs["defaults"]) if arm != "defaults" and "defaults" in runs else None
        table[arm] = {"accuracy": accuracy, "retention": retention, "seeds": records[arm],
                      "vs_defaults": versus.to_dict() if versus else None}
        print(f"{arm:12s} {accuracy[0]:.4f} ± {accuracy[1]:.4f}    {retention[0]:7.1%} ± {retention[1]:.1%}  "
              f"{difference_text(versus.to_dict()) if versus else '–'}")
    (out / "small_data.json").write_text(json.dumps({"host": host, "test_rows": len(rows), "teacher_accuracy":
                                                     teacher_accuracy, "arms": table}, indent=2))
    from record import record
    record("small-data", section="small-data",
           title="A 1,400-row SNLI pair task: int8 students with the old defaults and with --small-data auto",
           rows=[{"arm": arm, "int8 accuracy": f"{row['accuracy'][0]:.4f} ± {row['accuracy'][1]:.4f}",
                  "retention": f"{row['retention'][0]:.1%} ± {row['retention'][1]:.1%}",
                  "vs defaults (paired 95%)": difference_text(row["vs_defaults"]) if row["vs_defaults"] else "–"}
                 for arm, row in table.items()],
           note=f"{len(rows)} SNLI test pairs; teacher {teacher_accuracy:.4f}; {args.seeds} seeds, mean ± sd.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
