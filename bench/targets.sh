#!/usr/bin/env bash
# The three target kinds (4ms on int8 ONNX, 25% of the teacher's parameters, 20MB) each pick a
# student; the report's "target" column judges each on the report's own figures.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -d runs/demo/teacher ] || { echo "error: runs/demo/teacher missing: run bash scripts/demo.sh first" >&2; exit 2; }
.venv/bin/shrinkbert run bench/targets.yaml "$@"
lscpu | grep -E "Model name|Flags" | sed 's/Flags:.*/ISA: '"$(grep -o -w -E 'avx512_vnni|avx512f|avx2' /proc/cpuinfo | sort -u | tr '\n' ' ')"'/'
grep -E "^\| (variant|latency|share|size|teacher)" runs/bench/targets/report/report.md | head -8
