#!/usr/bin/env bash
# docs/qa.md's "Longer and deeper students": the recipe's QA student distilled for EPOCHS epochs (default 6)
# with LAYERS layers (default 3; the recipe ships 4 for 2 epochs), every other setting the recipe's, exported O2, dynamic
# int8, bundled, and measured in one eval run against the teacher and the 3-epoch int8 student of
# bench/qa_student.sh (same 1,055 test questions, timed interleaved, each variant in a process of its own).
# Needs runs/squad/teacher and runs/qa-exp/unpruned-int8 (bash bench/qa_student.sh). The distillation
# takes about 8 min per epoch at 3 layers on 2 cores. Outputs in runs/qa-exp/<LAYERS>L-e<EPOCHS>*.
#   bash bench/qa_epochs.sh                  # 3 layers, 6 epochs
#   LAYERS=4 EPOCHS=4 bash bench/qa_epochs.sh
set -euo pipefail
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
SB=.venv/bin/shrinkbert
E=runs/qa-exp
EPOCHS=${EPOCHS:-6}
LAYERS=${LAYERS:-3}
S=$E/${LAYERS}L-e$EPOCHS
[ -d runs/squad/teacher ] || { echo "error: runs/squad/teacher missing: run recipes/squad.yaml first" >&2; exit 2; }
start=$(date +%s)
$SB distill --teacher runs/squad/teacher --layers "$LAYERS" --epochs "$EPOCHS" --learning-rate 2e-4 --batch-size 16 \
    --logits-weight 1 --hidden-weight 1 --hard-weight 0.5 --cache-hidden --output-dir $S
echo "distill: $(( $(date +%s) - start )) s"
$SB export --model $S --optimization O2 --output-dir $S-onnx
$SB quantize --model $S-onnx --approach dynamic --output-dir $S-int8
$SB bundle --model $S-int8 --output-dir $S-bundle
others=()
[ -d $E/unpruned-int8 ] && others+=($E/unpruned-int8)
$SB eval runs/squad/teacher "${others[@]}" $S $S-int8 $S-bundle \
    --batch-sizes 1 --seq-lens 384,real --out $S-report
echo "wall: $(( $(date +%s) - start )) s"
