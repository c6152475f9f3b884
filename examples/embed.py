"""Sentence embeddings: a 3-layer student that keeps the teacher's vector space, as an int8 bundle.

The real all-MiniLM-L6-v2 (`minilm`, read as the sentence-transformers model it ships as) teaches a
3-layer student its sentence vectors on IMDB review sentences; STS-B (scored sentence pairs) picks
the best epoch and scores the student. The student is exported with pooling and normalisation inside
one graph, quantized to int8 and bundled; its vectors can query an index the teacher built. A few
minutes on a laptop CPU.

    python examples/embed.py STSB [OUTPUT_DIR]
    python examples/embed.py path/to/stsb                    # a folder of train.csv, validation.csv, test.csv
    python examples/embed.py sentence-transformers/stsb      # a dataset name, found in $SHRINKBERT_DATA (docs/data.md)
"""
import sys
from pathlib import Path

import shrinkbert

if len(sys.argv) < 2:
    sys.exit("usage: python examples/embed.py STSB [OUTPUT_DIR]")
data, out = sys.argv[1], Path(sys.argv[2] if len(sys.argv) > 2 else "runs/examples/embed")

student = shrinkbert.distill(objective="vectors", teacher="minilm", task=data, corpus="imdb", layers=3,
                             epochs=1, max_train_rows=3000, output_dir=str(out / "student"))
onnx = shrinkbert.export(model=student, output_dir=str(out / "student-onnx"))
int8 = shrinkbert.quantize(model=onnx, output_dir=str(out / "student-int8"))
edge = shrinkbert.bundle(model=int8, output_dir=str(out / "bundle"))

predictor = edge.load()                                                   # unit vectors: cosine = dot product
docs = ["The cat sat on the mat.", "Stocks fell sharply on Monday.", "A kitten is sleeping on a rug."]
print(predictor.embed(docs).shape)
print(predictor.similarity(["a cat resting"], docs).round(3))
print(predictor.search("markets dropped", predictor.embed(docs), k=2))    # [(row, cosine), ...]
