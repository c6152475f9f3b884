#!/usr/bin/env bash
# Copies the pinned transformers.js (npm @huggingface/transformers) and ONNX Runtime Web's wasm files
# beside a web bundle's index.html, so the page runs from any static file server with no build step
# and no CDN. npm installs with --ignore-scripts: onnxruntime-node's postinstall reaches outside the
# registries, and the browser needs none of it.
#   bash scripts/web_runtime.sh runs/demo/bundle-web
# tests/test_web_bundle.py runs the page in headless chromium with these files (window.shrinkbert.run).
set -euo pipefail
bundle=${1:?usage: scripts/web_runtime.sh BUNDLE_DIR}
here=$(cd "$(dirname "$0")/.." && pwd)
version=$(cat "$here/scripts/transformers-js.version")
web="$here/.web"
bash "$here/scripts/web_install.sh"
dist="$web/node_modules/@huggingface/transformers/dist"
cp "$dist/transformers.min.js" "$bundle/"
cp "$web"/node_modules/onnxruntime-web/dist/ort-wasm-simd-threaded.*{mjs,wasm} "$bundle/"
echo "transformers.js $version and ONNX Runtime Web copied into $bundle: serve it (python -m http.server -d $bundle) and open index.html"
