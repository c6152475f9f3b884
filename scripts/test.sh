#!/usr/bin/env bash
# Set up (if needed) and run the test suite: tiny random BERTs and small slices of the real data.
# The long end-to-end runs are marked `slow` and live in bench/.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# transformers.js for the web bundle's Node test (tests/test_web_bundle.py skips without node, fails on CI)
if command -v npm >/dev/null; then bash scripts/web_install.sh; fi
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
# -q with the reason of every skip (pyproject addopts adds -rs), and a per-test time limit (pytest-timeout)
exec .venv/bin/python -m pytest -q "$@"
