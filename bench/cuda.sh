#!/usr/bin/env bash
# The CUDA figures, on a lent GPU (docs/results.md#training): BERT-base MLM pretraining
# throughput and MFU in bf16 (and fp32 beside it), then fine-tuning and distillation through the
# kit's own stages on CUDA: the MiniLM teacher on movie-snippets and its 3-layer student (the demo's
# student-l3 settings), and a 110M BERT-base teacher (the MLM run above, fine-tuned) with a 6-layer
# student, which is the size class of the MPNet teacher.
#
# The MLM run goes twice in bf16, eager and with --torch-compile, and the report (`shrinkbert eval
# --torch-device cuda`) times and scores the MiniLM teacher and its student on the GPU.
#
#   bash bench/cuda_prepare.sh     # here: the pinned stack as wheels, tokenizer, MiniLM, text -> .device/
#   bash bench/cuda.sh             # there: writes $OUT/cuda.log, $OUT/manifests.json, $OUT/report-cuda/
#   FP32=0 bash bench/cuda.sh      # without the fp32 arms (the MLM run, the MiniLM fine-tune): a shorter call
#   QUICK=1 bash bench/cuda.sh     # any machine: the same commands on a micro model (the report on the CPU)
#
# The carried folder must fit the device's 64 MiB: MiniLM travels with its vocabulary trimmed to the
# task (13,508 tokens) and its weights in fp16 (loaded back as fp32), and all-mpnet-base-v2 (438 MB)
# cannot travel at all, so the 110M teacher here is a BERT-base of the same shape class.
set -uo pipefail
OUT=${OUT:-runs/cuda}
mkdir -p "$OUT"
exec > >(tee "$OUT/cuda.log") 2>&1
R=runs/cuda
if [ "${QUICK:-0}" = 1 ]; then PRESET=micro BATCH=8 STEPS=3 FP32_STEPS=2 ROWS=64 BASE_LAYERS=1 DEVICE=cpu REPORT="--quick"
else PRESET=bert-base BATCH=256 STEPS=300 FP32_STEPS=60 ROWS=0 BASE_LAYERS=6 DEVICE=cuda REPORT="--runs 50"; fi
FP32=${FP32:-1}
source bench/cuda_env.sh
describe_machine

rows() { [ "$ROWS" = 0 ] || echo "--max-train-rows $ROWS"; }

step mlm-bf16 mlm --preset $PRESET --batch-size $BATCH --max-steps $STEPS --learning-rate 1e-4 --mixed-precision bf16 \
  --log-every 50 --output-dir $R/bert-base-bf16
step mlm-bf16-compiled mlm --preset $PRESET --batch-size $BATCH --max-steps $STEPS --learning-rate 1e-4 --mixed-precision bf16 \
  --torch-compile --log-every 50 --output-dir $R/bert-base-bf16-compiled
[ "$FP32" = 1 ] && step mlm-fp32 mlm --preset $PRESET --batch-size $BATCH --max-steps $FP32_STEPS --learning-rate 1e-4 \
  --mixed-precision no --log-every 20 --output-dir $R/bert-base-fp32
for run in bert-base-bf16 bert-base-bf16-compiled bert-base-fp32; do [ -f $R/$run/shrinkbert.json ] && $PY bench/mfu.py $R/$run; done

step teacher-bf16 sb finetune --model .device/minilm16 --task movie-snippets --epochs 1 --learning-rate 1e-4 --batch-size 32 \
  --max-length 128 --mixed-precision bf16 --checkpoint-every 0 $(rows) --output-dir $R/teacher-bf16
[ "$FP32" = 1 ] && step teacher-fp32 sb finetune --model .device/minilm16 --task movie-snippets --epochs 1 --learning-rate 1e-4 --batch-size 32 \
  --max-length 128 --mixed-precision no --checkpoint-every 0 $(rows) --output-dir $R/teacher-fp32
step student-l3-bf16 sb distill --teacher $R/teacher-bf16 --layers 3 --intermediate 768 --epochs 1 --learning-rate 3e-4 \
  --logits-weight 1 --hidden-weight 1 --cache-hidden --mixed-precision bf16 --checkpoint-every 0 $(rows) --output-dir $R/student-l3-bf16
# the report on the GPU: both PyTorch models scored and timed there (fp32; no host floor, plot or memory,
# which are the CPU's), before the BERT-base runs so that a short call still brings it back
step report-cuda sb eval $R/teacher-bf16 $R/student-l3-bf16 --task movie-snippets --torch-device $DEVICE \
  --batch-sizes 1,32 --seq-lens 128,real --memory off --no-floor --no-plot --no-progress $REPORT --out "$OUT/report-cuda"
step base-teacher-bf16 sb finetune --model $R/bert-base-bf16 --task movie-snippets --epochs 1 --learning-rate 5e-5 --batch-size 32 \
  --max-length 128 --mixed-precision bf16 --checkpoint-every 0 $(rows) --output-dir $R/base-teacher-bf16
step base-student-bf16 sb distill --teacher $R/base-teacher-bf16 --layers $BASE_LAYERS --epochs 1 --learning-rate 1e-4 \
  --logits-weight 1 --hidden-weight 1 --mixed-precision bf16 --checkpoint-every 0 $(rows) --output-dir $R/base-student-bf16

dump_manifests "$R" "$OUT/manifests.json"
