#!/usr/bin/env bash
# The embeddings figures of docs/results.md#embeddings: the embeddings recipe's artifacts (runs/embeddings, made by
# `shrinkbert run recipes/embeddings.yaml`) plus the teacher itself exported and dynamic int8 (what int8
# alone buys and costs), in one eval run: every variant on the same STS-B test pairs, drop-in recall@10
# against the teacher's index of 10,000 Brown sentences, and latency with each variant in a process of its
# own, interleaved. About 10 minutes on 2 cores. Output: runs/embeddings/report-all.
set -euo pipefail
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
SB=.venv/bin/shrinkbert
R=runs/embeddings
[ -d $R/student-int8 ] || { echo "error: $R/student-int8 missing: run recipes/embeddings.yaml first" >&2; exit 2; }
start=$(date +%s)
[ -d $R/teacher-onnx ] || $SB export --model minilm --output-dir $R/teacher-onnx
[ -d $R/teacher-int8 ] || $SB quantize --model $R/teacher-onnx --approach dynamic --output-dir $R/teacher-int8
$SB eval minilm $R/teacher-int8 $R/student $R/student-int8 $R/bundle $R/static $R/static-bundle \
    --task ../shared/data/stsb --baseline minilm --index-corpus brown --threads 2 --out $R/report-all
echo "wall: $(( $(date +%s) - start )) s"
