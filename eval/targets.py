"""Did a student meet the target it was built for? Judged on the figures the report itself measured.

A student distilled with `--target` records it (students/shape.py: "target", and for a latency
target the runtime it was picked on). Every variant made from that student inherits the target
through its lineage, and is judged where the target speaks about it:

- a latency target ("4ms") on the variants of the runtime it was picked for (torch: PyTorch;
  onnx: fp32 ONNX; onnx-int8: int8 ONNX and bundles), by their measured p50 at batch 1 and the
  student's sequence length (the report must time that case: `--seq-lens 128`);
- a share of the teacher ("25%") by the variant's parameter count against the teacher's;
- a file size ("20MB") by the variant's model file size on disk.

Anything the report did not measure is "not judged", never assumed met.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from shrinkbert.core.artifacts import MANIFEST, read_manifest
from shrinkbert.core.errors import ShrinkbertError
from shrinkbert.students.shape import parse_target

INT8_STAGES = ("quantize", "bundle")


def target_record(manifest: dict[str, Any], ancestors: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The nearest distill record with a target: the variant's own, else its ancestors' (nearest first)."""
    chain = [manifest] + [_read(a.get("path", "")) for a in ancestors]
    for entry in chain:
        if not entry:
            continue
        student = entry.get("student") or {}
        if entry.get("stage") == "distill" and student.get("target"):
            return {"target": student["target"], "asked": student.get("speedup") or student["target"],
                    "runtime": student.get("latency_runtime") or "torch",
                    "teacher_parameters": student.get("teacher_parameters"),
                    "max_length": (entry.get("config") or {}).get("max_length", 128)}
    return None


def variant_runtime(kind: str | None, manifest: dict[str, Any], ancestors: list[dict[str, Any]]) -> str:
    """torch, onnx or onnx-int8: the runtime a variant runs in."""
    if kind == "pytorch":
        return "torch"
    stages = [manifest.get("stage")] + [a.get("stage") for a in ancestors]
    if kind == "bundle" or any(s in INT8_STAGES for s in stages[:2]):
        return "onnx-int8"
    return "onnx"


def judge(record: dict[str, Any], runtime: str, row: dict[str, Any]) -> dict[str, Any]:
    """{"target", "judged_on", "measured", "limit", "met" (True/False/None: not judged)}."""
    target = parse_target(record["target"])
    # A speed-up target ("10x") was resolved to milliseconds when the student was built: judged on
    # those, shown as the user asked for it.
    out: dict[str, Any] = {"target": record.get("asked", record["target"]), "met": None, "measured": None,
                           "limit": None}
    if target.kind == "ms":
        case = f"b1/s{record['max_length']}"
        out["judged_on"] = f"p50 ms at {case} on {record['runtime']}"
        if runtime != record["runtime"]:
            out["judged_on"] += f" (this variant runs on {runtime}: not judged)"
            return out
        stats = (row.get("latency_ms") or {}).get(case)
        if not stats or stats.get("p50") is None:
            out["judged_on"] += " (case not timed: not judged)"
            return out
        out.update(measured=stats["p50"], limit=target.value, met=stats["p50"] <= target.value)
    elif target.kind == "fraction":
        out["judged_on"] = "parameters vs the teacher's"
        params, teacher = row.get("num_parameters"), record.get("teacher_parameters")
        if params and teacher:
            out.update(measured=params / teacher, limit=target.value, met=params / teacher <= target.value + 1e-9)
    else:  # bytes
        out["judged_on"] = "model file size"
        size = row.get("size_bytes")
        if size:
            out.update(measured=size, limit=target.value, met=size <= target.value)
    return out


def describe(result: dict[str, Any]) -> str:
    """The table's cell: the target, then ✓ (met), ✗ and the measured figure (not met) or – (not
    judged), e.g. '4ms ✓', '20MB –'."""
    if result["met"] is None:
        return f"{result['target']} –"
    mark = "✓" if result["met"] else "✗"
    if result["met"]:
        return f"{result['target']} {mark}"
    measured, on = result["measured"], result["judged_on"]
    if on.startswith("p50"):
        shown = f"{measured:.2f} ms"
    elif on.startswith("parameters"):
        shown = f"{100 * measured:.1f}%"
    else:
        shown = f"{measured / 1e6:.1f} MB"
    return f"{result['target']} {mark} ({shown})"


def _read(path: str) -> dict[str, Any] | None:
    if not path or not (Path(path) / MANIFEST).is_file():
        return None
    try:
        return read_manifest(path)
    except ShrinkbertError:
        return None
