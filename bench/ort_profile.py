"""Where an ONNX graph's time goes: ONNX Runtime's own profile, summed by operator type.

    python bench/ort_profile.py runs/squad-quick/student-int8/model.onnx --seq-len 384
    python bench/ort_profile.py runs/demo/edge-int8/model.onnx --seq-len 128 --threads 1
    python bench/ort_profile.py runs/demo/teacher-onnx/model.onnx --batch-size 8

The graph as ORT runs it (its load-time rewrites applied, all optimisations on, as the kit's sessions
load it), --batch-size rows (default 1) of --seq-len random token ids (below the graph's vocabulary, which a
trimmed graph has cut) with a full attention mask, --calls calls after 5 untimed ones; prints each operator
type's kernel ms per call, its share and its node count, then the kernels' total, with the host's CPU and ISA.
Kernel time only: the call's own overhead (inputs, outputs, thread hand-offs between nodes) is the gap
between this total and the call's wall time.
"""
from __future__ import annotations

import argparse
import collections
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def vocab_rows(graph: str) -> int:
    """The rows of the word-embedding table: the largest 2-D initializer a Gather reads (weights not loaded)."""
    import onnx

    model = onnx.load(graph, load_external_data=False)
    gathered = {node.input[0] for node in model.graph.node if node.op_type == "Gather"}
    return max(t.dims[0] for t in model.graph.initializer if t.name in gathered and len(t.dims) == 2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("graph", help="an ONNX file")
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--batch-size", type=int, default=1)
    parser.add_argument("--threads", type=int, default=0, help="intra-op threads (0: ORT's default, one per core)")
    parser.add_argument("--calls", type=int, default=30)
    args = parser.parse_args()

    import numpy as np
    import onnxruntime as ort

    from shrinkbert.core.device import describe_machine
    from shrinkbert.core.ortsession import graph_feed

    options = ort.SessionOptions()
    options.intra_op_num_threads = args.threads
    options.enable_profiling = True
    options.profile_file_prefix = str(Path(tempfile.mkdtemp()) / "ort")
    session = ort.InferenceSession(args.graph, options, providers=["CPUExecutionProvider"])
    rows = vocab_rows(args.graph)
    ids = np.random.default_rng(0).integers(min(1000, rows // 2), min(20000, rows),
                                            size=(args.batch_size, args.seq_len), dtype=np.int64)
    feed = graph_feed({"input_ids": ids, "attention_mask": np.ones_like(ids)},
                      [i.name for i in session.get_inputs()])
    for _ in range(5 + args.calls):
        session.run(None, feed)
    events = json.loads(Path(session.end_profiling()).read_text())
    # ORT's first 5 calls are in the profile too: keep each node's last --calls kernel timings
    per_node: dict[str, list] = collections.defaultdict(list)
    for event in events:
        if event.get("cat") == "Node" and event["name"].endswith("_kernel_time"):
            per_node[event["name"]].append((event["args"]["op_name"], event["dur"]))
    total: collections.Counter = collections.Counter()
    nodes: collections.Counter = collections.Counter()
    for timings in per_node.values():
        op = timings[0][0]
        total[op] += sum(d for _, d in timings[-args.calls:])
        nodes[op] += 1
    kernels = sum(total.values())
    print(f"machine: {describe_machine()}; {args.graph} at b{args.batch_size}/s{args.seq_len}, "
          f"threads {args.threads or 'default'}, {args.calls} calls")
    for op, micros in total.most_common():
        print(f"  {op:28s} {micros / args.calls / 1000:8.3f} ms  {100 * micros / kernels:5.1f}%  nodes {nodes[op]}")
    print(f"  kernels {kernels / args.calls / 1000:.3f} ms a call")


if __name__ == "__main__":
    sys.exit(main())
