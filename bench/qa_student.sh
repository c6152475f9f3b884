#!/usr/bin/env bash
# docs/qa.md's "A better student": the recipe's QA student distilled for 3 epochs instead of 1, then the
# recipe's later stages by hand (prune 25% + 150 recovery steps, export O2, dynamic int8, bundle, eval),
# and the same student exported and quantized unpruned, timed against the teacher in one interleaved eval.
# Needs runs/squad/teacher (shrinkbert run recipes/squad.yaml, or its teacher stage). About 45 min on
# 2 cores (the distillation ~25-30 of them). Outputs in runs/qa-exp/.
set -euo pipefail
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
SB=.venv/bin/shrinkbert
E=runs/qa-exp
[ -d runs/squad/teacher ] || { echo "error: runs/squad/teacher missing: run recipes/squad.yaml first" >&2; exit 2; }
$SB distill --teacher runs/squad/teacher --layers 3 --epochs 3 --learning-rate 2e-4 --batch-size 16 \
    --logits-weight 1 --hidden-weight 1 --hard-weight 0.5 --cache-hidden --output-dir $E/3L-e3
$SB prune --model $E/3L-e3 --head-fraction 0.25 --neuron-fraction 0.25 --importance-rows 256 --max-eval-rows 128 \
    --output-dir $E/pruned
$SB distill --teacher runs/squad/teacher --student $E/pruned --max-steps 150 --learning-rate 5e-5 --batch-size 16 \
    --logits-weight 1 --hidden-weight 1 --hard-weight 0.5 --cache-hidden --output-dir $E/pruned-recovered
$SB export --model $E/pruned-recovered --optimization O2 --output-dir $E/student-onnx
$SB quantize --model $E/student-onnx --approach dynamic --output-dir $E/student-int8
$SB bundle --model $E/student-int8 --output-dir $E/bundle
$SB eval runs/squad/teacher runs/squad/student $E/3L-e3 $E/pruned-recovered $E/student-int8 $E/bundle \
    --batch-sizes 1 --seq-lens 384,real --out $E/report
$SB export --model $E/3L-e3 --optimization O2 --output-dir $E/unpruned-onnx
$SB quantize --model $E/unpruned-onnx --approach dynamic --output-dir $E/unpruned-int8
$SB eval runs/squad/teacher $E/unpruned-int8 $E/student-int8 --batch-sizes 1 --seq-lens 384,real \
    --out $E/report-unpruned
