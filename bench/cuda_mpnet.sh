#!/usr/bin/env bash
# The MPNet teacher on CUDA (docs/results.md#base-size-teachers): all-mpnet-base-v2 (110M) fine-tuned on
# movie-snippets through the kit's own finetune stage in bf16 and fp32, then distilled in bf16 to the
# mpnet-movies recipe's edge student (2 layers, hidden 256, logits + hidden KD, an IMDB transfer set)
# and to a 6-layer full-width student.
#
#   bash bench/cuda_prepare.sh && bash bench/cuda_mpnet_prepare.sh     # here
#   then six calls to one warm device machine, each within its idle window. Calls 1-5 each carry one
#   part, .device/mpnet-partN, and run
#       mkdir -p /tmp/mpnet && mv .device/mpnet-part*/* /tmp/mpnet/
#   (a call replaces the carried .device there, so the parts wait outside it); call 6 carries
#   .device/whl .device/cache .device/mpnet16 .device/imdb-sentences.txt and runs
#       PARTS=/tmp/mpnet bash bench/cuda_mpnet.sh
#   QUICK=1 bash bench/cuda_mpnet.sh     # here: the same commands on 64 rows, to check them
#   SWEEP=1 ...                          # instead: the teacher in bf16, then five edge student shapes
#   GENERAL=1 CORPUS=broad.txt ...       # instead: general distillation first: the recipe's 2L/H256
#                                        # student distilled from the raw teacher on broad text, then the task,
#                                        # against the plain slice, seeds 0-2 interleaved
#   PRETRAINED=1 ...                     # instead: pretrained BERT students of the MPNet teacher, re-indexed
#                                        # to its ids (students/vocab_map.py): the demo's 2L/H384 edge student
#                                        # (seeds 0-2), its wide student cut and re-distilled as the demo does
#                                        # (seed 0) and all-MiniLM-L6-v2 whole (seed 0); bench/cuda_mpnet_prepare.sh
#                                        # with PRETRAINED=1 packs them ($PARTS/edge16, $PARTS/wide16, .device/minilm16)
set -uo pipefail
OUT=${OUT:-runs/cuda}
mkdir -p "$OUT"
exec > >(tee "$OUT/cuda-mpnet.log") 2>&1
R=runs/cuda-mpnet
PARTS=${PARTS:-.device}
if [ "${QUICK:-0}" = 1 ]; then ROWS="--max-train-rows 64" TRANSFER=64 STUDENT_EPOCHS=1 GENERAL_ROWS="--max-train-rows 256"
else ROWS="" TRANSFER=16000 STUDENT_EPOCHS=2 GENERAL_ROWS=""; fi
source bench/cuda_env.sh
# the teacher's weights, joined from their parts and checked against the hash taken before the cut
find "$PARTS" -name 'mpnet16.part*' | sort | xargs cat > .device/mpnet16/model.safetensors
(cd .device/mpnet16 && echo "$(cat model.safetensors.sha256)  model.safetensors" | sha256sum -c -) || exit 1
trap 'rm -f .device/mpnet16/model.safetensors' EXIT  # 193 MB that must not ride along on the next call
describe_machine

if [ "${SWEEP:-0}" = 1 ]; then  # edge shapes for mpnet-movies: layers hidden epochs
  step teacher-bf16 sb finetune --model .device/mpnet16 --task movie-snippets --epochs 1 --learning-rate 3e-5 \
    --batch-size 32 --max-length 128 --mixed-precision bf16 --checkpoint-every 0 $ROWS --output-dir $R/teacher-bf16
  for shape in "2 256 4" "3 384 3" "4 384 3" "4 512 2" "6 384 2"; do
    set -- $shape
    step sweep-$1L-H$2-e$3 sb distill --teacher $R/teacher-bf16 --layers $1 --hidden $2 --epochs $3 --learning-rate 3e-4 \
      --logits-weight 1 --hidden-weight 1 --no-cache-hidden --transfer-corpus .device/imdb-sentences.txt \
      --max-transfer-rows $TRANSFER --mixed-precision bf16 --checkpoint-every 0 $ROWS --output-dir $R/sweep-$1L-H$2-e$3
  done
  PRECISIONS=""
elif [ "${GENERAL:-0}" = 1 ]; then
  step teacher-bf16 sb finetune --model .device/mpnet16 --task movie-snippets --epochs 1 --learning-rate 3e-5 \
    --batch-size 32 --max-length 128 --mixed-precision bf16 --checkpoint-every 0 $ROWS --output-dir $R/teacher-bf16
  # the raw sentence encoder has no MLM head: the hidden-state loss alone, TinyBERT's general stage
  step general-2L-H256 sb distill --teacher .device/mpnet16 --objective masked-lm --corpus "$CORPUS" --layers 2 --hidden 256 \
    --logits-weight 0 --hidden-weight 1 --epochs 1 --batch-size 128 --learning-rate 3e-4 --max-length 128 \
    --mixed-precision bf16 --checkpoint-every 0 $GENERAL_ROWS --output-dir $R/general-2L-H256
  for seed in ${SEEDS:-0 1 2}; do
    step gd-s$seed sb distill --teacher $R/teacher-bf16 --student $R/general-2L-H256 --epochs $STUDENT_EPOCHS \
      --learning-rate 3e-4 --logits-weight 1 --hidden-weight 1 --no-cache-hidden --transfer-corpus .device/imdb-sentences.txt \
      --max-transfer-rows $TRANSFER --mixed-precision bf16 --checkpoint-every 0 --seed $seed $ROWS --output-dir $R/gd-s$seed
    [ "${SLICE:-1}" = 0 ] || step slice-s$seed sb distill --teacher $R/teacher-bf16 --layers 2 --hidden 256 --epochs $STUDENT_EPOCHS \
      --learning-rate 3e-4 --logits-weight 1 --hidden-weight 1 --no-cache-hidden --transfer-corpus .device/imdb-sentences.txt \
      --max-transfer-rows $TRANSFER --mixed-precision bf16 --checkpoint-every 0 --seed $seed $ROWS --output-dir $R/slice-s$seed
  done
  PRECISIONS=""
elif [ "${PRETRAINED:-0}" = 1 ]; then
  step teacher-bf16 sb finetune --model .device/mpnet16 --task movie-snippets --epochs 1 --learning-rate 3e-5 \
    --batch-size 32 --max-length 128 --mixed-precision bf16 --checkpoint-every 0 $ROWS --output-dir $R/teacher-bf16
  KD="--logits-weight 1 --hidden-weight 1 --no-cache-hidden --transfer-corpus .device/imdb-sentences.txt
    --max-transfer-rows $TRANSFER --mixed-precision bf16 --checkpoint-every 0 $ROWS"
  # the order puts one of each arm first, so a call that runs out of time still compares them
  for seed in ${SEEDS:-0 1 2}; do
    step edge-s$seed sb distill --teacher $R/teacher-bf16 --student "$PARTS/edge16" --epochs 3 --learning-rate 3e-4 \
      --seed $seed $KD --output-dir $R/edge-s$seed
    dump_manifests "$R" "$OUT/manifests-mpnet.json" > /dev/null
    if [ "$seed" = 0 ]; then
      step minilm6-s0 sb distill --teacher $R/teacher-bf16 --student .device/minilm16 --epochs $STUDENT_EPOCHS \
        --learning-rate 1e-4 $KD --output-dir $R/minilm6-s0
      # the demo's edge chain with MPNet teaching: its wide 2L/H384 student, the same cut, 3 epochs again
      step wide-s0 sb distill --teacher $R/teacher-bf16 --student "$PARTS/wide16" --epochs $STUDENT_EPOCHS \
        --learning-rate 3e-4 $KD --output-dir $R/wide-s0
      step cut-s0 sb prune --model $R/wide-s0 --head-fraction 0.5 --neuron-fraction 0.75 --head-scope per_layer \
        --output-dir $R/cut-s0
      step recut-s0 sb distill --teacher $R/teacher-bf16 --student $R/cut-s0 --epochs 3 --learning-rate 3e-4 \
        $KD --output-dir $R/recut-s0
      dump_manifests "$R" "$OUT/manifests-mpnet.json" > /dev/null
    fi
  done
  PRECISIONS=""
else
  PRECISIONS="bf16 no"
fi
for precision in $PRECISIONS; do
  step teacher-$precision sb finetune --model .device/mpnet16 --task movie-snippets --epochs 1 --learning-rate 3e-5 \
    --batch-size 32 --max-length 128 --mixed-precision $precision --checkpoint-every 0 $ROWS --output-dir $R/teacher-$precision
done
# the teacher runs live beside the student: the hidden-state cache copies each batch to the CPU, which
# on a GPU costs more than the teacher (docs/results.md#training)
[ -n "$PRECISIONS" ] && step student-edge-bf16 sb distill --teacher $R/teacher-bf16 --layers 2 --hidden 256 --epochs $STUDENT_EPOCHS \
  --learning-rate 3e-4 --logits-weight 1 --hidden-weight 1 --no-cache-hidden --transfer-corpus .device/imdb-sentences.txt \
  --max-transfer-rows $TRANSFER --mixed-precision bf16 --checkpoint-every 0 $ROWS --output-dir $R/student-edge-bf16
[ -n "$PRECISIONS" ] && step student-l6-bf16 sb distill --teacher $R/teacher-bf16 --layers 6 --epochs 1 --learning-rate 1e-4 --logits-weight 1 \
  --hidden-weight 1 --no-cache-hidden --mixed-precision bf16 --checkpoint-every 0 $ROWS --output-dir $R/student-l6-bf16

dump_manifests "$R" "$OUT/manifests-mpnet.json"
