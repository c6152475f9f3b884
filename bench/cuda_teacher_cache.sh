#!/usr/bin/env bash
# The distill stage's teacher-output cache on a lent GPU (docs/results.md#training): a BERT-base
# teacher (MLM-initialised for one step: its weights do not matter to the rate) fine-tuned on 500
# movie-snippets rows, then a 6-layer student whose logits and hidden states come from the cache, so
# the cache is computed for all 8,056 training rows; the log's "teacher outputs" line gives the rate.
#   bash bench/cuda_prepare.sh            # here
#   bash bench/cuda_teacher_cache.sh      # there (carry .device); QUICK=1 anywhere: a micro model
set -uo pipefail
OUT=${OUT:-runs/cuda}
mkdir -p "$OUT"
exec > >(tee "$OUT/cuda-teacher-cache.log") 2>&1
R=runs/cuda-cache
if [ "${QUICK:-0}" = 1 ]; then PRESET=micro LAYERS=1 ROWS="--max-train-rows 64"; else PRESET=bert-base LAYERS=6 ROWS=""; fi
source bench/cuda_env.sh
describe_machine
step mlm-init mlm --preset $PRESET --batch-size 32 --max-steps 1 --output-dir $R/bert-base
step teacher sb finetune --model $R/bert-base --task movie-snippets --epochs 1 --max-train-rows 500 --batch-size 32 \
  --checkpoint-every 0 --output-dir $R/teacher
step student sb distill --teacher $R/teacher --layers $LAYERS --epochs 1 --logits-weight 1 --hidden-weight 1 --cache-hidden \
  --mixed-precision bf16 --checkpoint-every 0 $ROWS --output-dir $R/student
