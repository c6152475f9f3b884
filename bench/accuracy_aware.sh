#!/usr/bin/env bash
# Accuracy-aware int8 on the demo's teacher: the tolerance is judged on the whole validation split
# (paired standard error, --margin-z), then the test rows say whether it held on unseen rows.
#   bash bench/accuracy_aware.sh [TEACHER]      (default runs/demo/teacher)
set -euo pipefail
cd "$(dirname "$0")/.."
teacher=${1:-runs/demo/teacher}
out=runs/bench/accuracy-aware
[ -d "$teacher" ] || { echo "error: $teacher missing: run bash scripts/demo.sh first" >&2; exit 2; }
sb=.venv/bin/shrinkbert
[ -d $out/onnx ] || $sb export --model "$teacher" --optimization none --output-dir $out/onnx   # unfused: modules map to nodes
[ -d $out/int8 ] || $sb quantize --model $out/onnx --approach dynamic --output-dir $out/int8
[ -d $out/int8-aa ] || $sb quantize --model $out/onnx --approach dynamic --accuracy-aware --tolerance 0.5 --allow-unmet \
    --output-dir $out/int8-aa
$sb eval $out/onnx $out/int8 $out/int8-aa --batch-sizes 1 --seq-lens 128 --memory off --out $out/report
.venv/bin/python - "$out" <<'PY'
import json, sys
out = sys.argv[1]
aa = json.load(open(f"{out}/int8-aa/shrinkbert.json"))["metrics"]["accuracy_aware"]
print(f"validation ({aa['validation_rows']} rows): loss {aa['loss_points']} pt, paired se {aa['paired_se_points']} pt, "
      f"margin_z {aa['margin_z']}, bound {aa['loss_bound_points']} pt, tolerance {aa['tolerance_points']} pt, met {aa['met']}, "
      f"kept fp32: {aa['kept_fp32_modules']}")
report = json.load(open(f"{out}/report/report.json"))
base = report["variants"][0]["metrics"]["accuracy"]
for v in report["variants"]:
    print(f"test: {v['name']:10s} accuracy {v['metrics']['accuracy']:.4f} ({100 * (v['metrics']['accuracy'] - base):+.2f} pt vs fp32)")
PY
