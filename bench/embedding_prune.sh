#!/usr/bin/env bash
# A pruned embedding teacher: all-MiniLM-L6-v2 as it ships, HEADS of its attention heads and
# NEURONS of its FFN neurons removed (defaults 0.5 and 0.75: about the 3-layer student's compute, 6
# layers kept), ranked by the neighbour loss on STS-B train sentences; recovered by distillation from the
# unpruned teacher on the recipe's corpus and settings; exported, dynamic int8; then one eval run with
# the teacher, its int8 graph and the recipe's 3-layer int8 student (same STS-B test pairs, the same
# Brown index, each variant timed in a process of its own, interleaved).
# Needs runs/embeddings (shrinkbert run recipes/embeddings.yaml; bash bench/embedding_report.sh for
# teacher-int8). Outputs in runs/embeddings/pruned-h<HEADS>-n<NEURONS>[-hidden<HIDDEN>]*.
#   bash bench/embedding_prune.sh
#   HEADS=0.25 NEURONS=0.5 bash bench/embedding_prune.sh
#   HIDDEN=1 bash bench/embedding_prune.sh     # recovery adds the hidden-state loss (same width and layers)
set -euo pipefail
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
SB=.venv/bin/shrinkbert
R=${R:-runs/embeddings}  # the recipe's output folder (--output-dir of recipes/embeddings.yaml)
HEADS=${HEADS:-0.5}
NEURONS=${NEURONS:-0.75}
HIDDEN=${HIDDEN:-0}
P=$R/pruned-h$HEADS-n$NEURONS
B=$P$([ "$HIDDEN" = 0 ] || echo "-hidden$HIDDEN")  # the recovered chain: $B-recovered, -onnx, -int8, -report
STSB=../shared/data/stsb
[ -d $R/student-int8 ] || { echo "error: $R/student-int8 missing: run recipes/embeddings.yaml first" >&2; exit 2; }
start=$(date +%s)
[ -d $R/teacher-onnx ] || $SB export --model minilm --output-dir $R/teacher-onnx
[ -d $R/teacher-int8 ] || $SB quantize --model $R/teacher-onnx --approach dynamic --output-dir $R/teacher-int8
[ -d $P ] || $SB prune --model minilm --task $STSB --head-fraction "$HEADS" --neuron-fraction "$NEURONS" \
    --importance-rows 2048 --max-eval-rows 1500 --output-dir $P
echo "prune: $(( $(date +%s) - start )) s"
$SB distill --objective vectors --teacher minilm --student $P --corpus imdb,wordnet --task $STSB \
    --epochs 3 --learning-rate 1e-4 --batch-size 32 --max-train-rows 30000 --hidden-weight "$HIDDEN" --output-dir $B-recovered
echo "recovery: $(( $(date +%s) - start )) s"
$SB export --model $B-recovered --output-dir $B-onnx
$SB quantize --model $B-onnx --approach dynamic --max-eval-rows 1500 --output-dir $B-int8
$SB eval minilm $R/teacher-int8 $R/student-int8 $P $B-recovered $B-int8 \
    --task $STSB --baseline minilm --index-corpus brown --threads 2 --out $B-report
echo "wall: $(( $(date +%s) - start )) s"
