#!/usr/bin/env bash
# Set up (if needed) and run the test suite: tiny random BERTs and small slices of the real data.
# The long end-to-end runs live in bench/.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# transformers.js for the web bundle's Node test (tests/test_web_bundle.py skips without node, fails on CI)
if command -v npm >/dev/null; then bash scripts/web_install.sh; fi
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
# Dataset names (squad, sentence-transformers/stsb, snli:test) resolve from $SHRINKBERT_DATA: the shared
# copies beside the clone, unless the caller named another folder.
if [ -z "${SHRINKBERT_DATA:-}" ] && [ -d ../shared/data ]; then export SHRINKBERT_DATA="$(cd .. && pwd)/shared/data"; fi
# -q with the reason of every skip (pyproject addopts adds -rs), and a per-test time limit (pytest-timeout).
# Two workers (pytest-xdist), each test file on one of them: most tests wait on a subprocess, an import
# or the disk with one torch thread, so two at once take about half the time of one by one on 2 cores.
# SHRINKBERT_TEST_WORKERS=0 runs them in this process (what a debugger wants).
workers=${SHRINKBERT_TEST_WORKERS:-2}
if [ "$workers" = 0 ]; then exec .venv/bin/python -m pytest -q "$@"; fi
exec .venv/bin/python -m pytest -q -n "$workers" --dist loadfile "$@"
