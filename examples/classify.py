"""Classify sentences: fine-tune a teacher, distil it, and ship the student as an int8 edge bundle.

The real MiniLM teacher (installed by scripts/setup.sh) is fine-tuned on the built-in movie-snippets
task (movie-review sentences, positive or negative), distilled into a 2-layer student, exported to
ONNX, quantized to int8 and bundled with a torch-free predictor. A report compares the variants.
Slices of the data keep it to a few minutes on a laptop CPU.

    python examples/classify.py [OUTPUT_DIR]        # default runs/examples/classify
"""
import sys
from pathlib import Path

import shrinkbert

out = Path(sys.argv[1] if len(sys.argv) > 1 else "runs/examples/classify")

teacher = shrinkbert.finetune(model="minilm", task="movie-snippets", epochs=1, max_train_rows=2000,
                              output_dir=str(out / "teacher"))
student = shrinkbert.distill(teacher=teacher, layers=2, epochs=1, max_train_rows=2000,
                             output_dir=str(out / "student"))            # the task and its split are inherited
onnx = shrinkbert.export(model=student, output_dir=str(out / "student-onnx"))
int8 = shrinkbert.quantize(model=onnx, output_dir=str(out / "student-int8"))
edge = shrinkbert.bundle(model=int8, reference=student, output_dir=str(out / "bundle"))
shrinkbert.report(teacher, student, int8, edge, quick=True, output_dir=str(out / "report"))

print("student keeps", student.metrics["retention"], "of the teacher's accuracy")
print("report:", out / "report" / "report.md")
predictor = edge.load()                                                   # onnxruntime + tokenizers + numpy
for row in predictor.predict(["a gripping, beautifully acted film", "two hours I will never get back"]):
    print(row["label"], round(row["score"], 3))
