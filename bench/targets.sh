#!/usr/bin/env bash
# The three target kinds (4ms on int8 ONNX, 25% of the teacher's parameters, 20MB) each pick a
# student; the report's "target" column judges each on the report's own figures.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -d runs/demo/teacher ] || { echo "error: runs/demo/teacher missing: run bash scripts/demo.sh first" >&2; exit 2; }
.venv/bin/shrinkbert run bench/targets.yaml "$@"
.venv/bin/python -c "from shrinkbert.core.device import describe_machine; print('machine:', describe_machine())"
grep -E "^\| (variant|latency|share|size|teacher)" runs/bench/targets/report/report.md | head -8
