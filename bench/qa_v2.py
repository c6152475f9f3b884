"""A SQuAD v2.0 teacher's HasAns/NoAns scores with the no-answer threshold chosen on validation.

    python bench/qa_v2.py                                # fine-tunes MiniLM on the shared v2.0 dev articles first
    python bench/qa_v2.py --teacher runs/qa-v2/teacher   # an existing v2 teacher

The teacher is fine-tuned by the finetune stage on ../shared/data/squad/squad-dev-v2.0.json (split by
article, seed 0; --max-train-rows questions, one epoch, 384-token windows); then the null threshold that
maximises F1 on the validation split (the official v2 script's find_best_thresh) is applied to the test
split, whose scores are reported overall and for answerable (HasAns) and unanswerable (NoAns)
questions, beside the scores at threshold 0. Figures to runs/bench/qa_v2.json.
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

from shrinkbert.core.artifacts import read_manifest  # noqa: E402
from shrinkbert.core.data.dataspec import load_splits, resolve_spec  # noqa: E402
from shrinkbert.core.data.load import tokenize_task  # noqa: E402
from shrinkbert.core.kinds import kind_of  # noqa: E402
from shrinkbert.core.models import load_model, load_tokenizer  # noqa: E402

DATA = ROOT.parent / "shared" / "data" / "squad" / "squad-dev-v2.0.json"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--teacher", default="", help="a v2 QA teacher artifact (default: fine-tune one)")
    parser.add_argument("--output-dir", default="runs/qa-v2/teacher", help="where a new teacher is written")
    parser.add_argument("--max-train-rows", type=int, default=4000, help="training questions of a new teacher")
    args = parser.parse_args()
    started = time.time()
    teacher = args.teacher
    if not teacher:
        import shrinkbert

        teacher = str(shrinkbert.finetune(model="minilm", task=str(DATA), epochs=1, batch_size=16, learning_rate=1e-4,
                                          max_train_rows=args.max_train_rows, output_dir=args.output_dir))
    manifest = read_manifest(teacher)
    spec = resolve_spec(type("Inherit", (), {"task": ""})(), [teacher])
    task, splits = load_splits(spec)
    kind = kind_of(task)
    model = load_model(kind.model_class(), teacher).eval()
    tokenizer = load_tokenizer(teacher)
    max_length = manifest["config"]["max_length"]
    windows = tokenize_task(splits, tokenizer, task, max_length)
    chosen = kind.score_windows(windows["validation"], *kind.window_logits(model, windows["validation"])[:2], task)
    threshold = chosen["best_f1_thresh"]
    starts, ends, _ = kind.window_logits(model, windows["test"])
    scores = {}
    for name, value in (("threshold_0", 0.0), ("validation_threshold", threshold)):
        found, references = kind.answers(windows["test"], starts, ends, task, null_threshold=value)
        scores[name] = kind.score_answers(task, {q: a["text"] for q, a in found.items()}, references)
    result = {"teacher": str(teacher), "task": spec.task, "split_seed": spec.split_seed,
              "train_questions": manifest["data"]["rows"]["train"], "train_windows": manifest["metrics"]["train_examples"],
              "validation_questions": len(splits["validation"]), "test_questions": len(splits["test"]),
              "validation_best_f1": chosen["best_f1"], "null_threshold": threshold, "test": scores,
              "seconds": round(time.time() - started, 1)}
    out = ROOT / "runs" / "bench" / "qa_v2.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
