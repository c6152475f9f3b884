"""Memory of one variant, alone in a fresh process: what a user running only this model would see.

The report reads it in the variant's timing worker (eval.worker, "memory") where it times in one;
this process is for the rest: --timing inprocess, every case cached, or by hand:

    python -m shrinkbert.eval.memprobe ARTIFACT --threads 2 --batch 8 --seq-len 128 [--attention eager]

The process imports only what the variant's runtime needs (an edge bundle: its predict.py, so
onnxruntime + tokenizers + numpy, no torch), notes its RSS, loads the variant, runs one batch of
the given shape, and prints one JSON line: the RSS after imports, the growth from loading and
running (peak, sampled by psutil), and the process's high-water mark (VmHWM).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from shrinkbert.core.artifacts import is_artifact, read_manifest
from shrinkbert.core.errors import ShrinkbertError

ROOT = Path(__file__).resolve().parents[1]


def probe(path: str, threads: int, batch: int, seq_len: int, attention: str = "eager") -> dict:
    from shrinkbert.eval.memory import PeakRSS, high_water_mark, import_runtime
    from shrinkbert.eval.runners import detect_kind, open_runner

    path = Path(path)
    kind = detect_kind(path)
    manifest = read_manifest(path) if is_artifact(path) else {}
    import_runtime(kind, path)
    import psutil

    base = psutil.Process().memory_info().rss
    with PeakRSS() as peak:
        runner = open_runner(path, threads, manifest, attention=attention)
        limit = runner.max_positions()
        length = min(seq_len, limit) if limit else seq_len
        runner.forward(runner.encode(["the movie was good"] * batch, None, max_length=length, pad_to=length))
    return {"kind": kind, "base_rss_bytes": base, "delta_bytes": peak.delta_bytes,
            "process_peak_bytes": max(high_water_mark(), peak.peak), "batch": batch, "seq_len": length}


def measure_isolated(path: str | Path, threads: int, batch: int, seq_len: int, attention: str = "eager",
                     timeout_s: float = 600) -> dict:
    """Run the probe in a fresh interpreter; its JSON result, or ShrinkbertError with its last line."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    # The probe runs with cwd=ROOT, so a path relative to the caller's directory must be made absolute here.
    cmd = [sys.executable, "-m", "shrinkbert.eval.memprobe", str(Path(path).resolve()), "--threads", str(threads), "--batch", str(batch),
           "--seq-len", str(seq_len), "--attention", attention]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout_s, cwd=str(ROOT))
    except subprocess.TimeoutExpired:
        raise ShrinkbertError(f"memory probe timed out after {timeout_s:.0f} s") from None
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        tail = [line for line in (done.stderr or "").strip().splitlines() if line.strip()]
        raise ShrinkbertError(f"memory probe failed: {tail[-1] if tail else f'exit {done.returncode}'}")
    return json.loads(lines[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--attention", default="eager")
    args = parser.parse_args(argv)
    print(json.dumps(probe(args.path, args.threads, args.batch, args.seq_len, args.attention)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
