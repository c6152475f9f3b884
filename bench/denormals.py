"""ONNX Runtime with and without denormal floats flushed to zero, on padded input.

    python bench/denormals.py runs/demo/edge-int8/model.onnx:128 runs/squad/student-int8/model.onnx:384
    python bench/denormals.py GRAPH:SEQ ... --real 6 --rounds 5 --calls 40

Each graph is run at batch 1 on a text of --real tokens padded to SEQ (as the report's bNN/sSEQ cases
pad real rows, and as a short question sits in a QA window): ONNX Runtime adds a large negative
number to the attention scores of padded positions, and the softmax over them then meets denormal
floats, which x86 cores handle slowly. Each setting runs in a fresh process of its own, the
settings alternating round by round so drift on a shared machine hits both alike: `off` is a plain
session, `on` the bundle's (compress/bundle_files.open_session: ONNX Runtime's threads flush
denormals to zero, the session created on a thread of its own so the caller's thread keeps its
settings; with --threads 1 on the caller's thread, where one thread computes). Prints each graph's median p50 over rounds, the ratio off / on and the host's CPU and ISA.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def child(graph: str, seq: int, real: int, flush: bool, calls: int, threads: int) -> None:
    """One setting's p50 in ms, printed as JSON (a process of its own)."""
    import numpy as np
    import onnxruntime as ort

    from shrinkbert.compress.bundle_files import open_session

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    session = open_session(graph, options, flush_denormals=flush)
    ids = np.zeros((1, seq), np.int64)
    ids[0, :real] = 1000  # an ordinary WordPiece id; the values do not change the arithmetic
    mask = np.zeros((1, seq), np.int64)
    mask[0, :real] = 1
    given = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
    feed = {i.name: given[i.name] for i in session.get_inputs() if i.name in given}
    for _ in range(5):
        session.run(None, feed)
    samples = []
    for _ in range(calls):
        start = time.perf_counter()
        session.run(None, feed)
        samples.append((time.perf_counter() - start) * 1000)
    print(json.dumps({"p50_ms": float(np.median(samples))}))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("graphs", nargs="*", help="GRAPH.onnx:SEQ (sequence length to pad to; default 128)")
    parser.add_argument("--real", type=int, default=6, help="real tokens in the padded text")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=40, help="timed calls per setting and round")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--child", nargs=3, metavar=("GRAPH", "SEQ", "FLUSH"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        graph, seq, flush = args.child
        child(graph, int(seq), args.real, flush == "on", args.calls, args.threads)
        return 0
    if not args.graphs:
        parser.error("give at least one GRAPH.onnx:SEQ")
    from shrinkbert.core.device import cpu_model, detect_isa

    cases = [(g.rsplit(":", 1)[0], int(g.rsplit(":", 1)[1])) if ":" in g else (g, 128) for g in args.graphs]
    p50: dict[tuple[str, int, str], list[float]] = {}
    for round_ in range(args.rounds):
        for graph, seq in cases:
            for flush in (("off", "on") if round_ % 2 == 0 else ("on", "off")):
                done = subprocess.run([sys.executable, __file__, "--child", graph, str(seq), flush, "--real",
                                       str(args.real), "--calls", str(args.calls), "--threads", str(args.threads)],
                                      capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
                if done.returncode:
                    print(done.stderr[-2000:], file=sys.stderr)
                    return 1
                p50.setdefault((graph, seq, flush), []).append(json.loads(done.stdout.strip().splitlines()[-1])["p50_ms"])
    import numpy as np

    print(f"host: {cpu_model()}, {detect_isa()}, {os.cpu_count()} cores; {args.threads} ONNX Runtime threads; "
          f"b1, {args.real} real tokens padded to SEQ; median of {args.rounds} rounds' p50 ({args.calls} calls each)")
    print(f"{'graph':60s} {'SEQ':>4s} {'off ms':>8s} {'on ms':>8s} {'off / on':>9s}")
    for graph, seq in cases:
        off, on = (float(np.median(p50[(graph, seq, flush)])) for flush in ("off", "on"))
        print(f"{graph:60s} {seq:4d} {off:8.2f} {on:8.2f} {off / on:8.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
