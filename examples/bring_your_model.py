"""Bring your own model: distil a Hugging Face classifier you already have and ship it.

Your teacher is any sequence classifier of a supported family (BERT, RoBERTa/XLM-R, DistilBERT,
DeBERTa-v2/v3, ELECTRA, MPNet, ModernBERT) saved with `save_pretrained` (safetensors weights), and
your data a csv with a `text` column and a `label` column holding the teacher's label names. The
model and the rows are passed in memory; the kit splits the rows by a fixed seed, distils a
2-layer student on them, exports, quantizes and bundles it, and reports both. A few minutes on a
laptop CPU for a small model and a few thousand rows; longer for a base-size teacher.

    python examples/bring_your_model.py MODEL_DIR DATA_CSV [OUTPUT_DIR]
"""
import sys
from pathlib import Path

from datasets import load_dataset
from transformers import AutoModelForSequenceClassification, AutoTokenizer

import shrinkbert

if len(sys.argv) < 3:
    sys.exit("usage: python examples/bring_your_model.py MODEL_DIR DATA_CSV [OUTPUT_DIR]")
model_dir, data, out = sys.argv[1], sys.argv[2], Path(sys.argv[3] if len(sys.argv) > 3 else "runs/examples/mine")

teacher = AutoModelForSequenceClassification.from_pretrained(model_dir, use_safetensors=True)
tokenizer = AutoTokenizer.from_pretrained(model_dir)
rows = load_dataset("csv", data_files=data)["train"]

student = shrinkbert.distill(teacher=teacher, tokenizer=tokenizer, dataset=rows, layers=2, epochs=2,
                             output_dir=str(out / "student"))
onnx = shrinkbert.export(model=student, output_dir=str(out / "student-onnx"))
int8 = shrinkbert.quantize(model=onnx, output_dir=str(out / "student-int8"))
edge = shrinkbert.bundle(model=int8, reference=student, output_dir=str(out / "bundle"))
shrinkbert.report(student, int8, edge, output_dir=str(out / "report"))

print("student keeps", student.metrics["retention"], "of the teacher's accuracy; report:", out / "report" / "report.md")
print([check["name"] for check in edge.checks if not check["passed"]] or "every bundle check passed")
print(edge.load().predict([rows[0]["text"]]))
