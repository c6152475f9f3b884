"""The bundle's runtime defaults, chosen by measurement: ONNX Runtime spinning on or off.

A bundle runs in its user's process, normally with nothing else busy in it. There ORT's default,
worker threads that spin while they wait for work, measured faster (issue 29: the demo's edge
int8 model at b1/s128 on 2 AVX2 cores, 1.28-1.58 ms spinning vs 1.60-1.64 ms not). Each bundle
is timed both ways, each in a fresh process of its own (its own predict.py --benchmark, so no
torch and nothing of the kit's), and keeps spinning on unless off measures clearly faster. The
thread count stays ONNX Runtime's default (one per physical core). labels.json "runtime" holds
the choice (the Predictor's defaults), the manifest the figures it was chosen on.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

CASE = {"batch_size": 1, "seq_len": 128}
RUNS = 30
CLEARLY_FASTER = 0.9  # spinning is given up only for a p50 at least 10% lower without it


def _benchmark(bundle_dir: Path, spin: bool, seq_len: int) -> dict[str, Any] | None:
    """The bundle's own predict.py --benchmark in a fresh interpreter; None where it failed."""
    cmd = [sys.executable, str(bundle_dir / "predict.py"), "--benchmark", str(RUNS), "--seq-len", str(seq_len),
           "--batch-size", str(CASE["batch_size"])] + ([] if spin else ["--no-spin"])
    env = {**os.environ, "TOKENIZERS_PARALLELISM": "false"}
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env, cwd=str(bundle_dir))
    except subprocess.TimeoutExpired:
        return None
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    return json.loads(lines[-1]) if done.returncode == 0 and lines else None


SPIN_CHOICES = ("auto", "on", "off")


def _write_choice(bundle_dir: Path, spin: bool, meta_file: str = "labels.json") -> None:
    path = bundle_dir / meta_file
    meta = json.loads(path.read_text(encoding="utf-8"))
    meta["runtime"] = {"threads": None, "spin": spin}
    path.write_text(json.dumps(meta, indent=2, ensure_ascii=False))


def choose_runtime(bundle_dir: str | Path, max_length: int, setting: str = "auto",
                   meta_file: str = "labels.json") -> dict[str, Any]:
    """Write the bundle's spinning default into its `meta_file` "runtime" (labels.json; an embedding
    bundle's embedding.json) and return the record for the manifest. "auto" times the bundle's own
    predict.py --benchmark with spinning on and off (fresh processes, on then off), so two builds of
    one model may choose differently; "on"/"off" sets it without timing (the same bytes every build)."""
    bundle_dir = Path(bundle_dir)
    if setting != "auto":
        spin = setting == "on"
        _write_choice(bundle_dir, spin, meta_file)
        return {"threads": None, "threads_note": "None: ONNX Runtime's default, one per physical core", "spin": spin,
                "chosen_by": f"--spin {setting} (set, not measured)"}
    seq_len = min(CASE["seq_len"], max_length)
    measured = {"spin": _benchmark(bundle_dir, True, seq_len), "no_spin": _benchmark(bundle_dir, False, seq_len)}
    p50 = {name: (m or {}).get("p50_ms") for name, m in measured.items()}
    spin = not (p50["spin"] and p50["no_spin"] and p50["no_spin"] < CLEARLY_FASTER * p50["spin"])
    _write_choice(bundle_dir, spin, meta_file)
    return {"threads": None, "threads_note": "None: ONNX Runtime's default, one per physical core", "spin": spin,
            "chosen_by": (f"p50 at b{CASE['batch_size']}/s{seq_len}, {RUNS} calls, each setting in a fresh process "
                          f"of its own (predict.py --benchmark); spinning kept unless off is {1 - CLEARLY_FASTER:.0%} "
                          "faster"),
            "p50_ms": p50}
