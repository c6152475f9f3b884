#!/usr/bin/env bash
# The demo's stage-by-stage wall times with its training-cost features off and on,
# same recipe, same machine, one after the other:
#   before: --no-group-by-length on every training stage, distillation runs the teacher live for
#           the hidden/attention losses (cache_hidden false), and every stage starts in a fresh
#           interpreter (--spawn);
#   after:  the recipe as it is (runs/demo, re-run from its first stage).
# Each run gets a fresh teacher-output cache (the registry archives and stored splits are shared), so
# neither reuses the other's teacher pass (nor its built corpus). Each prints its stage-time table at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
.venv/bin/python -c "from shrinkbert.core.device import describe_machine; print('machine:', describe_machine())"
SHARED=${SHRINKBERT_CACHE:-$HOME/.cache/shrinkbert}
fresh_cache() {  # a cache dir that shares the archives and splits but has no teacher outputs
  local dir; dir=$(mktemp -d)
  for sub in downloads tasks; do mkdir -p "$SHARED/$sub"; ln -s "$SHARED/$sub" "$dir/$sub"; done
  echo "$dir"
}
OFF=()
for stage in mlm teacher student-l3 student-edge pruned-recovered; do OFF+=(--set "$stage.group_by_length=false"); done
for stage in student-l3 student-edge pruned-recovered; do OFF+=(--set "$stage.cache_hidden=false"); done
which=${1:-both}
if [ "$which" = both ] || [ "$which" = before ]; then
  echo "=== before (training-cost changes off): runs/demo-before"
  SHRINKBERT_CACHE=$(fresh_cache) .venv/bin/shrinkbert run recipes/demo.yaml --output-dir runs/demo-before --from mlm --spawn "${OFF[@]}"
fi
if [ "$which" = both ] || [ "$which" = after ]; then
  echo "=== after (the recipe as it is): runs/demo"
  SHRINKBERT_CACHE=$(fresh_cache) .venv/bin/shrinkbert run recipes/demo.yaml --from mlm
fi
