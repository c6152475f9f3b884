#!/usr/bin/env bash
# The edge bundle runs in a FRESH venv holding only what its requirements.txt names
# (onnxruntime, tokenizers, numpy): no torch, no transformers, no shrinkbert on the path.
#
#   bash bench/edge_venv.sh [BUNDLE_DIR]      (default: runs/bench/compress/edge-bundle)
set -euo pipefail
BUNDLE=$(cd "${1:-runs/bench/compress/edge-bundle}" && pwd)
PY=${PYTHON:-python3}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
"$PY" -m venv "$WORK/venv"
"$WORK/venv/bin/pip" install -q -r "$BUNDLE/requirements.txt"
echo "installed:"; "$WORK/venv/bin/pip" list --format=freeze | sed 's/^/  /'
if "$WORK/venv/bin/pip" list --format=freeze | grep -iqE '^(torch|transformers|optimum)=='; then
  echo "FAIL: the edge venv holds torch/transformers"; exit 1
fi
cd "$WORK"   # not the repo: nothing of shrinkbert is importable from here
echo "--- python predict.py \"...\""
"$WORK/venv/bin/python" "$BUNDLE/predict.py" "a warm, funny and clever film"
echo "--- stdin, --json"
printf 'a dull and tedious plot\nthe actors were brilliant\n' | "$WORK/venv/bin/python" "$BUNDLE/predict.py" --json
echo "--- Predictor class, startup and per-text latency"
"$WORK/venv/bin/python" - "$BUNDLE" <<'PYEOF'
import sys, time
t0 = time.perf_counter()
sys.path.insert(0, sys.argv[1])
from predict import Predictor
p = Predictor(sys.argv[1], threads=2)
t1 = time.perf_counter()
p.predict("warm up")
runs = [time.perf_counter()]
for _ in range(20):
    p.predict("the film was long but the actors were good and the story kept moving")
    runs.append(time.perf_counter())
lat = sorted((b - a) * 1000 for a, b in zip(runs, runs[1:]))[10]
leaked = sorted(m for m in sys.modules if m.split(".")[0] in ("torch", "transformers", "optimum", "compress", "core"))
print(f"load {1000 * (t1 - t0):.0f} ms, median predict {lat:.1f} ms (batch 1, 2 threads), heavy modules loaded: {leaked or 'none'}")
assert not leaked
PYEOF
echo "edge venv: OK"
