#!/usr/bin/env bash
# Every bench behind the figures in README.md and docs/, one after another (never two at once: they share 2 cores
# and would time each other). Uses the demo's teacher, so run `bash scripts/demo.sh` first.
# Each bench's full output is kept in runs/bench/logs/NAME.log.
#
#   bash bench/run_all.sh                 # all, with the budgets the figures in docs/ came from
#   bash bench/run_all.sh compress load   # only these
set -uo pipefail
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false PYTHONUNBUFFERED=1
PY=.venv/bin/python
TEACHER=runs/demo/teacher
LOGS=runs/bench/logs
mkdir -p "$LOGS"

bench() {  # NAME CMD...: run one bench, tee its log, say how it ended
  local name=$1; shift
  echo "=== $name: $*"
  local start=$SECONDS
  "$@" 2>&1 | tee "$LOGS/$name.log" | grep -v -E 'it/s|s/it' | tail -40
  echo "=== $name: exit ${PIPESTATUS[0]} after $((SECONDS - start)) s"
}

SELECTED="$*"
want() { [ -z "$SELECTED" ] || [[ " $SELECTED " == *" $1 "* ]]; }
want headline && bench headline "$PY" bench/headline.py --no-run
want compress && bench compress "$PY" bench/compress.py --teacher "$TEACHER" --recovery-train-rows 4000
want distill && bench distill "$PY" bench/distill.py --teacher "$TEACHER" --epochs 2
want teacher && bench teacher "$PY" bench/teacher_finetune.py --epochs 2
want pretrain && bench pretrain "$PY" bench/pretrain_curve.py
want load && bench load "$PY" bench/load.py
want edge_venv && bench edge_venv bash bench/edge_venv.sh runs/demo/bundle
want int8 && bench int8 "$PY" bench/int8.py --teacher "$TEACHER"
want finetune_vs_trainer && bench finetune_vs_trainer "$PY" bench/finetune_vs_trainer.py
want distill_step && bench distill_step "$PY" bench/distill_step.py --teacher "$TEACHER"
want cpu_knobs && bench cpu_knobs "$PY" bench/cpu_knobs.py
want frontier && bench frontier bash bench/frontier.sh
