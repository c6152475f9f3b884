"""ONNX Runtime's thread-pool settings on one graph, every setting's session in one process, timed in interleaved
rounds: whether any of them shortens a short int8 call (most of a small model's time is not arithmetic).

    python bench/ort_session_knobs.py runs/demo/edge-int8/model.onnx --cases 1x128,1x27 --rounds 15

Settings, each with the bundle's own (intra-op threads as given, inter-op 1, denormals flushed):
  base                     ORT's defaults otherwise (spinning on): what the bundle runs
  block N                  session.dynamic_block_base = N (ORT splits a parallel loop into blocks that
                           shrink as they are taken, for N in --blocks), so two threads finish together
  pinned                   session.intra_op_thread_affinities: the pool's worker on the second core
  1 thread                 one thread, for scale
Prints the CPU (vendor, family/model, ISA) and, per case, each setting's median of its rounds' p50s and its
ratio to base (above 1: faster than base).
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def settings(threads: int, blocks: list[int]) -> dict[str, tuple[int, dict[str, str]]]:
    out = {"base": (threads, {})}
    out.update({f"block {n}": (threads, {"session.dynamic_block_base": str(n)}) for n in blocks})
    cpus = sorted(os.sched_getaffinity(0))
    if threads == 2 and len(cpus) >= 2:  # ORT's affinity strings count logical processors from 1
        out["pinned"] = (threads, {"session.intra_op_thread_affinities": str(cpus[1] + 1)})
    out["1 thread"] = (1, {})
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("graph", help="an ONNX file (inputs input_ids, attention_mask[, token_type_ids])")
    p.add_argument("--cases", default="1x128,1x27", help="batch x tokens, comma-separated")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--blocks", default="1,2,4", help="dynamic_block_base values")
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--calls", type=int, default=30)
    args = p.parse_args(argv)
    from host_latency import random_inputs  # bench/, beside this script
    from shrinkbert.core.device import describe_machine
    from shrinkbert.core.ortsession import graph_feed, ort_session
    from shrinkbert.core.progress import progress_bar

    chosen = settings(args.threads, [int(n) for n in args.blocks.split(",")])
    sessions = {name: ort_session(args.graph, threads, spin=True, flush_denormals=True, config=entries)
                for name, (threads, entries) in chosen.items()}
    names = {i.name for i in next(iter(sessions.values())).get_inputs()}
    print(f"machine: {describe_machine()}; {args.graph}, {args.rounds} interleaved rounds of {args.calls} calls")
    table = []
    for case in args.cases.split(","):
        batch, length = (int(x) for x in case.split("x"))
        feed = graph_feed(random_inputs(batch, length, vocab=5000), names)
        p50s: dict[str, list[float]] = {name: [] for name in sessions}
        for _ in progress_bar(range(args.rounds), desc=f"b{batch}/s{length}", unit="round", leave=False):
            for name, s in sessions.items():
                for _ in range(5):
                    s.run(None, feed)
                times = []
                for _ in range(args.calls):
                    start = time.perf_counter()
                    s.run(None, feed)
                    times.append(time.perf_counter() - start)
                p50s[name].append(float(np.median(times)) * 1000)
        base = float(np.median(p50s["base"]))
        print(f"b{batch}/s{length}: " + ", ".join(
            f"{name} {float(np.median(v)):.3f} ms ({base / float(np.median(v)):.2f}x)" for name, v in p50s.items()))
        table.append({"case": f"b{batch}/s{length}", **{name: f"{float(np.median(v)):.3f} ({base / float(np.median(v)):.2f}x)"
                                                         for name, v in p50s.items()}})
    from record import record
    record("ort-session-knobs", section="latency", title="ONNX Runtime's thread-pool settings on one graph", rows=table,
           note=f"{Path(args.graph).parent.name}/{Path(args.graph).name}; every setting's session in one process, "
                f"{args.rounds} interleaved rounds of {args.calls} calls, denormals flushed; median p50 ms (x the base).")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
