#!/usr/bin/env bash
# Installs the pinned transformers.js (npm @huggingface/transformers) and puppeteer-core into .web/
# once: what the web bundle's page copies, what tests/test_web_bundle.py runs in Node, and what drives
# Debian's chromium there (puppeteer-core downloads no browser). --ignore-scripts: the postinstall of
# onnxruntime-node downloads from outside the registries, and its CPU binaries are already in the
# package.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
version=$(cat "$here/scripts/transformers-js.version")
web="$here/.web"
installed="$web/node_modules/@huggingface/transformers/package.json"
driver_version=$(cat "$here/scripts/puppeteer-core.version")
driver="$web/node_modules/puppeteer-core/package.json"
if [ ! -f "$installed" ] || ! grep -q "\"version\": \"$version\"" "$installed" \
   || [ ! -f "$driver" ] || ! grep -q "\"version\": \"$driver_version\"" "$driver"; then
  mkdir -p "$web"
  [ -f "$web/package.json" ] || echo '{"private": true}' > "$web/package.json"
  (cd "$web" && npm install --silent --ignore-scripts --no-audit --no-fund "@huggingface/transformers@$version" \
     "puppeteer-core@$driver_version" >/dev/null)
fi
cp "$here/scripts/web_drive.mjs" "$here/scripts/web_node.mjs" "$web/"  # beside node_modules: imports resolve
