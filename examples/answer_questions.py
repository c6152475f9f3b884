"""Answer questions from a passage: an extractive QA teacher, a 4-layer student, an int8 bundle.

The real MiniLM teacher is fine-tuned on a SQuAD-style JSON file (the kit splits it by article into
train, validation and test), distilled into a 4-layer student over the teacher's start and end
logits of every 384-token window, exported, quantized and bundled; the bundle answers with the text
span, its character offsets and a score. Slices keep it to about ten minutes on a laptop CPU.

    python examples/answer_questions.py SQUAD [OUTPUT_DIR]
    python examples/answer_questions.py path/to/dev-v1.1.json     # a SQuAD JSON file
    python examples/answer_questions.py squad                     # a dataset name, found in $SHRINKBERT_DATA (docs/data.md)
"""
import sys
from pathlib import Path

import shrinkbert

if len(sys.argv) < 2:
    sys.exit("usage: python examples/answer_questions.py SQUAD [OUTPUT_DIR]")
data, out = sys.argv[1], Path(sys.argv[2] if len(sys.argv) > 2 else "runs/examples/qa")

teacher = shrinkbert.finetune(model="minilm", task=data, epochs=1, max_train_rows=1500, max_eval_rows=200,
                              output_dir=str(out / "teacher"))
student = shrinkbert.distill(teacher=teacher, layers=4, epochs=1, max_train_rows=1500, max_eval_rows=200,
                             hidden_weight=1.0, hard_weight=0.5, output_dir=str(out / "student"))
onnx = shrinkbert.export(model=student, output_dir=str(out / "student-onnx"))
int8 = shrinkbert.quantize(model=onnx, output_dir=str(out / "student-int8"))
edge = shrinkbert.bundle(model=int8, output_dir=str(out / "bundle"))

print("student keeps", student.metrics["retention"], "of the teacher's F1")
context = ("The Amazon rainforest covers much of the Amazon basin of South America. The majority of the "
           "forest is contained within Brazil, with 60% of the rainforest, followed by Peru with 13%.")
print(edge.load().answer("Which country holds most of the rainforest?", context))
