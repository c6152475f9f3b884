#!/usr/bin/env bash
# Set up (if needed) and run the embedded demo: the real MiniLM teacher on the real movie-review
# sentences, through every stage to the int8 ONNX edge bundle and the report.
# Pass --quick for a few-minute look; any other `shrinkbert run` flag works too.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
exec .venv/bin/shrinkbert run recipes/demo.yaml "$@"
