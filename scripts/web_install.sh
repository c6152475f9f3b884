#!/usr/bin/env bash
# Installs the pinned transformers.js (npm @huggingface/transformers) into .web/ once: what the web
# bundle's page copies and what tests/test_web_bundle.py runs in Node. --ignore-scripts: the
# postinstall of onnxruntime-node downloads from outside the registries, and its CPU binaries are
# already in the package.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
version=$(cat "$here/scripts/transformers-js.version")
web="$here/.web"
installed="$web/node_modules/@huggingface/transformers/package.json"
if [ ! -f "$installed" ] || ! grep -q "\"version\": \"$version\"" "$installed"; then
  mkdir -p "$web"
  [ -f "$web/package.json" ] || echo '{"private": true}' > "$web/package.json"
  (cd "$web" && npm install --silent --ignore-scripts --no-audit --no-fund "@huggingface/transformers@$version" >/dev/null)
fi
