"""Classify sentence pairs: does the second sentence follow the first?

The real MiniLM teacher is fine-tuned on the built-in nyt-next-sentence task (pairs of sentences,
labelled by whether the second one follows the first), distilled into a 3-layer student and shipped
as an int8 bundle whose predictor takes the pairs. A few minutes on a laptop CPU.

    python examples/pair_classify.py [OUTPUT_DIR]   # default runs/examples/pairs

Your own pairs: a csv with two text columns and a label, e.g.
    shrinkbert.finetune(model="minilm", task="pairs.csv", text_column="premise",
                        text_pair_column="hypothesis", label_column="label", output_dir=...)
"""
import sys
from pathlib import Path

import shrinkbert

out = Path(sys.argv[1] if len(sys.argv) > 1 else "runs/examples/pairs")

teacher = shrinkbert.finetune(model="minilm", task="nyt-next-sentence", epochs=1, max_train_rows=2000,
                              output_dir=str(out / "teacher"))
student = shrinkbert.distill(teacher=teacher, layers=3, epochs=1, max_train_rows=2000,
                             output_dir=str(out / "student"))
onnx = shrinkbert.export(model=student, output_dir=str(out / "student-onnx"))
int8 = shrinkbert.quantize(model=onnx, output_dir=str(out / "student-int8"))
edge = shrinkbert.bundle(model=int8, reference=student, output_dir=str(out / "bundle"))

print("teacher", teacher.metrics.get("test_accuracy"), "student retention", student.metrics["retention"])
first = ["The storm closed every school in the county.", "The storm closed every school in the county."]
second = ["Parents scrambled to find childcare for the day.", "The recipe calls for two cups of flour."]
for row in edge.load().predict(first, pairs=second):
    print(row["label"], round(row["score"], 3))
