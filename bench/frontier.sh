#!/usr/bin/env bash
# The accuracy–speed frontier on the demo's teacher: docs/results.md#frontier.
#   1. the speed-up ladder plus named shapes and one cut (2L/H384 distilled, pruned to 6 heads and FFN
#      384, distilled again: bench/plateau.py's pruned arm makes the same students), one recipe (train
#      split + 16,000 teacher-labelled IMDB sentences, logits + hidden KD, 2 epochs), all int8 students
#      in one interleaved measurement;
#   2. more data at the 2L/H160 shape: 96,000 IMDB sentences + 2 perturbed copies per training row;
#   3. more epochs at the 2L/H160 shape: the recipe of 1 for 6 epochs instead of 2;
#   4. attention transfer at the 2L/H160 shape: the recipe of 1 plus the attention loss (its 5 heads
#      against the teacher's 12, both averaged over heads);
#   5. the columns embedding init at the 2L/H160 shape: the recipe of 1 with --init-embeddings columns
#      (distill's auto picks pca for narrower students), against the same teacher.
#   6. bf16 autocast on the CPU (a host with avx512_bf16 or AMX) at the 2L/H160 shape: the recipe of 1
#      with --mixed-precision bf16; bench/cpu_bf16.py times the step.
# 1 does not name 3L/H384/F768: the picker, which tries half-width FFNs, can reach it at 5x.
# ONLY=1,5 runs just those commands.
# Students already in an output folder are reused, so a re-run only re-measures.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -d runs/demo/teacher ] || { echo "error: runs/demo/teacher missing: run bash scripts/demo.sh first" >&2; exit 2; }
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
.venv/bin/python -c "from shrinkbert.core.device import describe_machine; print('machine:', describe_machine())"
ONLY=${ONLY:-1,2,3,4,5,6}
want() { [[ ",$ONLY," == *",$1,"* ]]; }
COMMON=(--teacher runs/demo/teacher --seeds 3 --epochs 2 --learning-rate 3e-4 --hidden-weight 1 --transfer-corpus imdb)
want 1 && .venv/bin/shrinkbert frontier "${COMMON[@]}" --output-dir runs/frontier --speedups 5x,8x,15x,25x \
    --shapes 2L/H160,3L/H128 --cuts 2L/H384/A6/F384,2L/H384/A4/F384 --max-transfer-rows 16000
want 2 && .venv/bin/shrinkbert frontier "${COMMON[@]}" --output-dir runs/frontier-data --speedups "" --shapes 2L/H160 \
    --max-transfer-rows 96000 --augment 2
want 3 && .venv/bin/shrinkbert frontier "${COMMON[@]}" --epochs 6 --output-dir runs/frontier-epochs --speedups "" \
    --shapes 2L/H160 --max-transfer-rows 16000
want 4 && .venv/bin/shrinkbert frontier "${COMMON[@]}" --attention-weight 1 --output-dir runs/frontier-attention --speedups "" \
    --shapes 2L/H160 --max-transfer-rows 16000
want 5 && .venv/bin/shrinkbert frontier "${COMMON[@]}" --init-embeddings columns --output-dir runs/frontier-columns \
    --speedups "" --shapes 2L/H160 --max-transfer-rows 16000
want 5 && .venv/bin/python bench/frontier_paired.py runs/frontier runs/frontier-columns 2L-H160
want 6 && .venv/bin/shrinkbert frontier "${COMMON[@]}" --mixed-precision bf16 --output-dir runs/frontier-bf16 \
    --speedups "" --shapes 2L/H160 --max-transfer-rows 16000
want 6 && .venv/bin/python bench/frontier_paired.py runs/frontier-bf16 runs/frontier 2L-H160
echo "frontier: commands $ONLY done"
