"""The same ONNX graphs under two (or more) ONNX Runtime installs, in fresh processes over interleaved rounds:
whether a newer release is faster on this host before the pin moves.

    uv venv /tmp/ort-next && VIRTUAL_ENV=/tmp/ort-next uv pip install onnxruntime==1.32.0 numpy
    python bench/ort_versions.py --python .venv/bin/python --python /tmp/ort-next/bin/python \\
        runs/demo/edge-int8/model.onnx runs/demo/teacher-int8/model.onnx runs/demo/teacher-onnx/model.onnx

Each round runs every interpreter once, one after the other (every other round in reverse), each timing every graph at every case
(--cases, batch x tokens; random token ids, no padding) on --threads intra-op threads with denormals
flushed, as the bundle runs; the table gives, per graph and case, the median over rounds of each process's
p50, and the ratio to the first interpreter's (above 1: faster than the first). Prints the CPU (vendor,
family/model, ISA); `--json FILE` keeps every round.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# Run by each interpreter: it needs onnxruntime and numpy only, so a bare venv of another release will do.
CHILD = r"""
import json, sys, time
import numpy as np, onnxruntime as ort
threads, calls, cases, graphs = int(sys.argv[1]), int(sys.argv[2]), json.loads(sys.argv[3]), sys.argv[4:]
out = {"version": ort.__version__, "p50_ms": {}}
for graph in graphs:
    options = ort.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
    options.add_session_config_entry("session.set_denormal_as_zero", "1")
    session = ort.InferenceSession(graph, options, providers=["CPUExecutionProvider"])
    names = {i.name for i in session.get_inputs()}
    for batch, length in cases:
        ids = np.random.default_rng(0).integers(100, 5000, (batch, length)).astype(np.int64)
        feed = {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)}
        feed = {k: v for k, v in feed.items() if k in names}
        for _ in range(5):
            session.run(None, feed)
        n = max(5, calls // batch)  # a batch of 8 is 8 calls' work
        times = []
        for _ in range(n):
            start = time.perf_counter()
            session.run(None, feed)
            times.append(time.perf_counter() - start)
        out["p50_ms"][f"{graph}|b{batch}/s{length}"] = float(np.median(times) * 1000)
print(json.dumps(out))
"""


def parse_cases(text: str) -> list[tuple[int, int]]:
    return [tuple(int(x) for x in case.split("x")) for case in text.split(",")]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("graphs", nargs="+", help="ONNX files (inputs input_ids, attention_mask[, token_type_ids])")
    p.add_argument("--python", action="append", required=True,
                   help="an interpreter with onnxruntime and numpy (twice or more; the first is the baseline)")
    p.add_argument("--cases", default="1x128,1x27,8x128", help="batch x tokens, comma-separated")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--calls", type=int, default=60, help="timed calls a case at batch 1 (fewer at larger batches)")
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--json", help="write every round here")
    args = p.parse_args(argv)
    if len(args.python) < 2:
        p.error("give --python at least twice: the releases to compare")
    from shrinkbert.core.device import describe_machine
    from shrinkbert.core.progress import progress_bar

    graphs = [str(Path(g).resolve()) for g in args.graphs]
    cases = parse_cases(args.cases)
    rounds: list[dict] = []
    versions: dict[str, str] = {}
    for index in progress_bar(range(args.rounds), desc="rounds", unit="round"):
        row = {}
        # every other round in reverse, so neither release always runs right after the other
        for python in (args.python if index % 2 == 0 else args.python[::-1]):
            done = subprocess.run([python, "-c", CHILD, str(args.threads), str(args.calls), json.dumps(cases), *graphs],
                                  capture_output=True, text=True, check=True, timeout=600)
            result = json.loads(done.stdout.strip().splitlines()[-1])
            versions[python] = result["version"]
            row[python] = result["p50_ms"]
        rounds.append(row)
    print(f"machine: {describe_machine()}; {args.threads} threads, {args.rounds} rounds, fresh processes interleaved")
    base = args.python[0]
    header = " | ".join(f"{versions[py]} ms" + ("" if py == base else f" | x {versions[base]}") for py in args.python)
    print(f"| graph | case | {header} |")
    print("|---|---|" + "--:|" * (2 * len(args.python) - 1))
    table = []
    for key in rounds[0][base]:
        graph, case = key.split("|")
        medians = {py: float(np.median([r[py][key] for r in rounds])) for py in args.python}
        cells = " | ".join(f"{medians[py]:.3f}" + ("" if py == base else f" | {medians[base] / medians[py]:.2f}x")
                           for py in args.python)
        print(f"| {Path(graph).parent.name}/{Path(graph).name} | {case} | {cells} |")
        table.append({"graph": f"{Path(graph).parent.name}/{Path(graph).name}", "case": case,
                      **{f"{versions[py]} ms": round(medians[py], 3) for py in args.python}})
    from record import record
    record("ort-versions", section="latency", title="ONNX Runtime releases against each other", rows=table,
           note=f"Each round every release in fresh processes, every other round reversed; {args.threads} threads; "
                f"median of {args.rounds} rounds' p50.")
    if args.json:
        Path(args.json).write_text(json.dumps({"machine": describe_machine(), "versions": versions, "rounds": rounds},
                                              indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
