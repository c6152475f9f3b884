#!/usr/bin/env bash
# docs/qa.md's "Six epochs": the recipe's 3-layer QA student distilled for 6 epochs instead of 3 (every
# other setting the recipe's), exported O2, dynamic int8, bundled, and measured in one eval run against
# the teacher and the 3-epoch int8 student of bench/qa_student.sh (same 1,055 test questions, timed
# interleaved, each variant in a process of its own). Needs runs/squad/teacher and runs/qa-exp/unpruned-int8
# (bash bench/qa_student.sh). About an hour on 2 cores (the distillation ~50 min). Outputs in runs/qa-exp/.
set -euo pipefail
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
SB=.venv/bin/shrinkbert
E=runs/qa-exp
EPOCHS=${EPOCHS:-6}
[ -d runs/squad/teacher ] || { echo "error: runs/squad/teacher missing: run recipes/squad.yaml first" >&2; exit 2; }
start=$(date +%s)
$SB distill --teacher runs/squad/teacher --layers 3 --epochs "$EPOCHS" --learning-rate 2e-4 --batch-size 16 \
    --logits-weight 1 --hidden-weight 1 --hard-weight 0.5 --cache-hidden --output-dir $E/3L-e$EPOCHS
echo "distill: $(( $(date +%s) - start )) s"
$SB export --model $E/3L-e$EPOCHS --optimization O2 --output-dir $E/3L-e$EPOCHS-onnx
$SB quantize --model $E/3L-e$EPOCHS-onnx --mode dynamic --output-dir $E/3L-e$EPOCHS-int8
$SB bundle --model $E/3L-e$EPOCHS-int8 --output-dir $E/3L-e$EPOCHS-bundle
others=()
[ -d $E/unpruned-int8 ] && others+=($E/unpruned-int8)
$SB eval runs/squad/teacher "${others[@]}" $E/3L-e$EPOCHS $E/3L-e$EPOCHS-int8 $E/3L-e$EPOCHS-bundle \
    --batch-sizes 1 --seq-lens 384,real --out $E/report-e$EPOCHS
echo "wall: $(( $(date +%s) - start )) s"
