#!/usr/bin/env bash
# The plateau ablation at the 15x shape (2L/H160/A5/F640) as one command: the recipe with columns init; + PCA /
# projected embeddings; + a teacher assistant (the 3L/H384/F768 student); + an ensemble of three teachers; + a
# pre-trained student (MLM + MLM-KD on every built-in corpus, one pass); the best combination;
# 3 seeds each, one interleaved timing run, each arm's retention against the first with a paired 95% interval
# (bench/plateau.py writes runs/bench/plateau/plateau.md and .json).
#
# Needs runs/demo/teacher and runs/demo/mlm (bash scripts/demo.sh). Makes what is missing: the assistant
# students (as bench/frontier.sh's first command makes them) and two more teachers (the demo teacher's
# fine-tuning at seeds 1 and 2). Everything already made is reused, so a re-run only re-measures.
# On 2 cores the reduced budget below takes under an hour; the full budget a few hours (the pretraining
# over every built-in corpus and 21 students at 16,000 transfer rows).
#   bash bench/ablation_plateau.sh            # the real thing
#   OUT=runs/bench/plateau-6000 ROWS=6000 PRETRAIN_EPOCHS=0.15 bash bench/ablation_plateau.sh   # a smaller budget (the demo's edge recipe's
#                                             # 6,000 transfer rows for every student and assistant; a short pretraining)
#   bash bench/ablation_plateau.sh --tiny ... # extra flags go to bench/plateau.py
set -euo pipefail
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
PY=.venv/bin/python
SB=.venv/bin/shrinkbert
OUT=${OUT:-runs/bench/plateau}       # a smaller budget belongs in its own folder: students there are reused
ROWS=${ROWS:-16000}                 # teacher-labelled IMDB sentences per student (and per assistant)
PRETRAIN_EPOCHS=${PRETRAIN_EPOCHS:-1}  # passes over the 10.2M words for the pretrained arm
for need in runs/demo/teacher runs/demo/mlm; do
    [ -d "$need" ] || { echo "error: $need missing: run bash scripts/demo.sh first" >&2; exit 2; }
done
$PY -c "from shrinkbert.core.device import describe_machine; print('machine:', describe_machine())"
# The demo teacher's own fine-tuning settings, so the ensemble's other teachers differ from it by seed only.
read -r EPOCHS LR BATCH LENGTH < <($PY -c "
import json; c = json.load(open('runs/demo/teacher/shrinkbert.json'))['config']
print(c.get('epochs', 1), c.get('learning_rate', 1e-4), c.get('batch_size', 32), c.get('max_length', 128))")
TEACHERS=runs/demo/teacher
for seed in 1 2; do
    where=$OUT/teachers/seed$seed
    [ -f "$where/shrinkbert.json" ] || $SB finetune --model runs/demo/mlm --task movie-snippets --seed "$seed" \
        --epochs "$EPOCHS" --learning-rate "$LR" --batch-size "$BATCH" --max-length "$LENGTH" --output-dir "$where"
    TEACHERS="$TEACHERS,$where"
done
# The assistant: the frontier's 3L/H384/F768 student of each seed (its recipe: bench/frontier.sh's first
# command; at ROWS transfer rows, so it lives here, not among the frontier's students).
for seed in 0 1 2; do
    where=$OUT/assistants/3L-H384-F768-rows$ROWS-seed$seed
    [ -f "$where/shrinkbert.json" ] || $SB distill --teacher runs/demo/teacher --layers 3 --hidden 384 \
        --intermediate 768 --epochs 2 --learning-rate 3e-4 --hidden-weight 1 --transfer-corpus imdb \
        --max-transfer-rows "$ROWS" --seed "$seed" --output-dir "$where"
done
time $PY bench/plateau.py --teacher runs/demo/teacher --seeds 3 --best auto --ensemble "$TEACHERS" \
    --assistant "$OUT/assistants/3L-H384-F768-rows$ROWS-seed{seed}" --pretrain-from runs/demo/mlm \
    --pretrain-corpus all --pretrain-epochs "$PRETRAIN_EPOCHS" --pretrain-kd-weight 1 --max-transfer-rows "$ROWS" \
    --out "$OUT" "$@"
