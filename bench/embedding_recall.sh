#!/usr/bin/env bash
# docs/embeddings.md's "Does more text move recall@10?": the embeddings recipe's 3-layer student (H384, FFN 768,
# 3 epochs, lr 4e-4, batch 32, IMDB sentences + WordNet glosses) distilled on ROWS lines (default 90,000)
# instead of the recipe's 30,000, then export and dynamic int8, measured in one eval run against the teacher
# and the recipe's int8 student (runs/embeddings/student-int8): STS-B test Spearman and drop-in recall@10
# against the teacher's index of 10,000 Brown sentences (not in the training text). About 50 minutes on
# 2 cores at 90,000 lines. Outputs in runs/emb-recall/.
set -euo pipefail
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
SB=.venv/bin/shrinkbert
ROWS=${ROWS:-90000}
E=runs/emb-recall/rows-$ROWS
[ -d runs/embeddings/student-int8 ] || { echo "error: runs/embeddings/student-int8 missing: run recipes/embeddings.yaml first" >&2; exit 2; }
start=$(date +%s)
$SB distill --mode embeddings --teacher minilm --corpus imdb,wordnet --task ../shared/data/stsb --layers 3 \
    --intermediate 768 --epochs 3 --learning-rate 4e-4 --batch-size 32 --max-train-rows "$ROWS" --output-dir $E/student
echo "distill: $(( $(date +%s) - start )) s"
$SB export --model $E/student --output-dir $E/student-onnx
$SB quantize --model $E/student-onnx --mode dynamic --max-eval-rows 1500 --output-dir $E/student-int8
$SB eval minilm runs/embeddings/student-int8 $E/student-int8 --task ../shared/data/stsb --baseline minilm \
    --index-corpus brown --threads 2 --classify "" --out $E/report
echo "wall: $(( $(date +%s) - start )) s"
