#!/usr/bin/env bash
# BERT-base MLM pretraining MFU on a lent GPU (docs/results.md#training), the MLM runs of bench/cuda.sh
# alone: the kit's `pretrain` stage from scratch in bf16 at 128 tokens, eager and with --torch-compile,
# at batch 256 (bench/cuda.sh's) and at 512 for the same number of tokens (half the steps), then
# bench/mfu.py on each run.
#
#   bash bench/cuda_prepare.sh     # here: the pinned stack as wheels, tokenizer, text -> .device/
#   bash bench/cuda_mfu.sh         # there, carrying .device/whl .device/tok .device/imdb-paragraphs.txt:
#                                  # writes $OUT/cuda-mfu.log and $OUT/manifests.json
#   QUICK=1 bash bench/cuda_mfu.sh # any machine: the same commands on a micro model
set -uo pipefail
OUT=${OUT:-runs/cuda}
mkdir -p "$OUT"
exec > >(tee "$OUT/cuda-mfu.log") 2>&1
R=runs/cuda-mfu
if [ "${QUICK:-0}" = 1 ]; then PRESET=micro SIZES="8:4 16:2" LOG=2
else PRESET=bert-base SIZES="256:300 512:150" LOG=50; fi
source bench/cuda_env.sh
describe_machine

for compile in "" "--torch-compile"; do
  for size in $SIZES; do
    batch=${size%:*} steps=${size#*:}
    name=$PRESET-bf16-b$batch${compile:+-compiled}
    step "$name" mlm --preset $PRESET --batch-size "$batch" --max-steps "$steps" --learning-rate 1e-4 --mixed-precision bf16 \
      $compile --log-every $LOG --output-dir $R/$name
    [ -f $R/$name/shrinkbert.json ] && $PY bench/mfu.py $R/$name
  done
done
dump_manifests "$R" "$OUT/manifests.json"
