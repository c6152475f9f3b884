"""The report judges each variant against the target its student was distilled to (eval/targets.py)."""
from __future__ import annotations

import json

import pytest

from shrinkbert.eval.targets import describe, judge, target_record, variant_runtime


def _artifact(path, manifest):
    path.mkdir(parents=True)
    (path / "shrinkbert.json").write_text(json.dumps(manifest))
    return path


@pytest.fixture
def chain(tmp_path):
    student = _artifact(tmp_path / "student", {
        "stage": "distill", "config": {"max_length": 128},
        "student": {"target": "4ms", "latency_runtime": "onnx-int8", "teacher_parameters": 1000}})
    onnx = _artifact(tmp_path / "onnx", {"stage": "export", "parents": [{"path": str(student), "stage": "distill"}]})
    int8 = {"stage": "quantize", "parents": [{"path": str(onnx), "stage": "export"}]}
    ancestors = [{"path": str(onnx), "stage": "export"}, {"path": str(student), "stage": "distill"}]
    return int8, ancestors


def test_latency_target_is_judged_on_the_runtime_it_was_picked_for(chain):
    manifest, ancestors = chain
    record = target_record(manifest, ancestors)
    assert record["target"] == "4ms" and record["runtime"] == "onnx-int8"
    assert variant_runtime("onnx", manifest, ancestors) == "onnx-int8"
    fast = judge(record, "onnx-int8", {"latency_ms": {"b1/s128": {"p50": 3.2}}})
    slow = judge(record, "onnx-int8", {"latency_ms": {"b1/s128": {"p50": 5.1}}})
    assert fast["met"] is True and slow["met"] is False
    assert describe(slow) == "4ms ✗ (5.10 ms)"
    # the fp32 export of the same student runs elsewhere: not judged, never assumed met
    other = judge(record, "onnx", {"latency_ms": {"b1/s128": {"p50": 1.0}}})
    assert other["met"] is None and describe(other) == "4ms –"
    # the case the target speaks of was not timed: not judged
    assert judge(record, "onnx-int8", {"latency_ms": {"b8/real": {"p50": 1.0}}})["met"] is None


def test_share_and_size_targets(tmp_path):
    share = {"target": "25%", "runtime": "torch", "teacher_parameters": 1000, "max_length": 128}
    assert judge(share, "torch", {"num_parameters": 240})["met"] is True
    missed = judge(share, "torch", {"num_parameters": 310})
    assert missed["met"] is False and describe(missed) == "25% ✗ (31.0%)"
    size = {"target": "20MB", "runtime": "torch", "teacher_parameters": None, "max_length": 128}
    assert judge(size, "torch", {"size_bytes": 19_000_000})["met"] is True
    assert describe(judge(size, "torch", {"size_bytes": 21_000_000})) == "20MB ✗ (21.0 MB)"


def test_no_target_no_judgement(tmp_path):
    plain = _artifact(tmp_path / "s", {"stage": "distill", "student": {"how": "explicit"}})
    assert target_record({"stage": "export"}, [{"path": str(plain), "stage": "distill"}]) is None


def test_a_speedup_target_is_judged_on_its_resolved_ms_and_shown_as_asked(tmp_path):
    student = _artifact(tmp_path / "student", {
        "stage": "distill", "config": {"max_length": 128},
        "student": {"target": "2.5000ms", "speedup": "10x", "teacher_ms": 25.0, "latency_runtime": "torch"}})
    record = target_record({"stage": "distill", "config": {"max_length": 128},
                            "student": json.loads((student / "shrinkbert.json").read_text())["student"]}, [])
    assert record["target"] == "2.5000ms" and record["asked"] == "10x"
    slow = judge(record, "torch", {"latency_ms": {"b1/s128": {"p50": 3.1}}})
    assert slow["met"] is False and describe(slow) == "10x ✗ (3.10 ms)"
    assert describe(judge(record, "torch", {"latency_ms": {"b1/s128": {"p50": 2.4}}})) == "10x ✓"
