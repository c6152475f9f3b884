"""The host's floor: what int8 and fp32 matrix products reach here, and how far a model is from it (issue 42).

    python bench/gemm_floor.py                                 # the GEMM table only
    python bench/gemm_floor.py --bundle runs/demo/bundle       # and a bundle's p50 against its arithmetic floor

Times single ONNX Runtime nodes at the bundle's thread count (2 by default, as the report runs):
MatMulInteger (uint8 x int8 -> int32, what dynamic int8 graphs run), the fused DynamicQuantizeMatMul
(the quantized MatMul of an O2 graph, activations quantized inside), and MatMul in fp32; and
PyTorch's fp32 matmul (the teacher's runtime). Two shapes: a large square product (the host's
throughput) and the shape a small student's FFN has at 128 tokens (what a bundle meets). Interleaved
rounds, median per case, GOP/s = 2*M*K*N / time. With --bundle: the bundle's multiply-adds per
b1/s128 call (its MatMul and Gemm nodes' weights x 128 tokens, plus attention), the time those take
at the measured int8 rate, and the bundle's own p50: the share of its time that is arithmetic.
Prints the CPU (vendor, family/model) and its ISA beside every figure.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SHAPES = {"square 1024": (1024, 1024, 1024), "student FFN (128 tok, 384->1536)": (128, 384, 1536)}


def _graph(op: str, m: int, k: int, n: int, path: Path) -> Path:
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    if op == "MatMul":
        inputs = [helper.make_tensor_value_info("a", TensorProto.FLOAT, [m, k])]
        weights = [numpy_helper.from_array(rng.standard_normal((k, n)).astype(np.float32), "b")]
        node = helper.make_node("MatMul", ["a", "b"], ["y"])
        out = helper.make_tensor_value_info("y", TensorProto.FLOAT, [m, n])
        opset = [helper.make_opsetid("", 17)]
    elif op == "MatMulInteger":
        inputs = [helper.make_tensor_value_info("a", TensorProto.UINT8, [m, k])]
        weights = [numpy_helper.from_array(rng.integers(-127, 127, (k, n)).astype(np.int8), "b")]
        node = helper.make_node("MatMulInteger", ["a", "b"], ["y"])
        out = helper.make_tensor_value_info("y", TensorProto.INT32, [m, n])
        opset = [helper.make_opsetid("", 17)]
    else:  # DynamicQuantizeMatMul: fp32 in, int8 weights with a scale, fp32 out
        inputs = [helper.make_tensor_value_info("a", TensorProto.FLOAT, [m, k])]
        weights = [numpy_helper.from_array(rng.integers(-127, 127, (k, n)).astype(np.int8), "b"),
                   numpy_helper.from_array(np.array([0.01], np.float32), "scale")]
        node = helper.make_node("DynamicQuantizeMatMul", ["a", "b", "scale"], ["y"], domain="com.microsoft")
        out = helper.make_tensor_value_info("y", TensorProto.FLOAT, [m, n])
        opset = [helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]
    graph = helper.make_graph([node], op, inputs, [out], initializer=weights)
    onnx.save(helper.make_model(graph, opset_imports=opset, ir_version=9), str(path))  # what ONNX Runtime reads
    return path


def _ort_case(op: str, shape: tuple[int, int, int], threads: int, folder: Path):
    from shrinkbert.core.ortsession import ort_session

    m, k, _ = shape
    session = ort_session(_graph(op, *shape, folder / f"{op}-{m}x{k}.onnx"), threads)
    rng = np.random.default_rng(1)
    a = rng.integers(0, 255, (m, k)).astype(np.uint8) if op == "MatMulInteger" else rng.standard_normal((m, k)).astype(np.float32)
    return lambda: session.run(None, {"a": a})


def _torch_case(shape: tuple[int, int, int], threads: int):
    import torch

    torch.set_num_threads(threads)
    m, k, n = shape
    a, b = torch.randn(m, k), torch.randn(k, n)

    def run():
        with torch.inference_mode():
            return a @ b
    return run


def _median_ms(run, calls: int) -> float:
    samples = []
    for _ in range(calls):
        start = time.perf_counter()
        run()
        samples.append(1000 * (time.perf_counter() - start))
    return statistics.median(samples)


def bundle_macs(bundle: Path, tokens: int = 128) -> int:
    """Multiply-adds of one b1 call at `tokens` tokens: every MatMul/Gemm-like node's constant weight
    (rows x cols) per token, plus attention's two products (tokens^2 x head width, summed over layers)."""
    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(bundle / "model.onnx"))
    constants = {t.name: numpy_helper.to_array(t).shape for t in model.graph.initializer}
    macs, attention = 0, 0
    for node in model.graph.node:
        shapes = [constants[name] for name in node.input if name in constants and len(constants[name]) == 2]
        if node.op_type in ("MatMul", "MatMulInteger", "DynamicQuantizeMatMul", "Gemm", "MatMulNBits",
                            "QAttention", "Attention", "FusedMatMul") and shapes:
            rows, cols = shapes[0]
            macs += rows * cols * tokens
            if node.op_type in ("QAttention", "Attention"):  # fused QKV weights [hidden, 3*hidden]
                attention += 2 * tokens * tokens * rows
    return macs + attention


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--threads", type=int, default=2, help="intra-op threads (the report's and the bundles' 2)")
    p.add_argument("--rounds", type=int, default=5, help="interleaved rounds over all cases")
    p.add_argument("--calls", type=int, default=20, help="timed calls per case per round")
    p.add_argument("--bundle", default="", help="a classifier bundle to set against the int8 floor")
    p.add_argument("--out", default=str(ROOT / "runs/bench/gemm_floor.json"))
    args = p.parse_args(argv)

    from shrinkbert.compress.int8 import cpu_description

    host = cpu_description()
    print(f"host: {host}; {args.threads} threads", flush=True)
    results: dict[str, dict[str, list[float]]] = {}
    with tempfile.TemporaryDirectory() as work:
        cases = {}
        for label, shape in SHAPES.items():
            for op in ("MatMulInteger", "DynamicQuantizeMatMul", "MatMul"):
                cases[(label, f"ORT {op}")] = (_ort_case(op, shape, args.threads, Path(work)), shape)
            cases[(label, "PyTorch fp32 matmul")] = (_torch_case(shape, args.threads), shape)
        for run, _ in cases.values():  # warm-up
            for _ in range(3):
                run()
        for _ in range(args.rounds):  # interleaved: drift on a shared machine hits every case alike
            for (label, name), (run, shape) in cases.items():
                results.setdefault(label, {}).setdefault(name, []).append(_median_ms(run, args.calls))
    rows = []
    for (label, name), (_, shape) in cases.items():
        ms = statistics.median(results[label][name])
        m, k, n = shape
        rows.append({"shape": label, "case": name, "ms": ms, "gops": 2 * m * k * n / ms / 1e6})
    print(f"\n| shape | case | ms (median of {args.rounds} rounds) | GOP/s |\n|---|---|--:|--:|")
    for row in rows:
        print(f"| {row['shape']} | {row['case']} | {row['ms']:.3f} | {row['gops']:,.0f} |")
    report = {"host": host, "threads": args.threads, "rows": rows}
    if args.bundle:
        sys.path.insert(0, str(ROOT))
        from shrinkbert.compress.edge_predictor import Predictor

        bundle = Path(args.bundle)
        macs = bundle_macs(bundle)
        student_rate = next(r["gops"] for r in rows if r["shape"].startswith("student") and r["case"] == "ORT DynamicQuantizeMatMul")
        floor_ms = 2 * macs / student_rate / 1e6
        bench = Predictor(bundle, threads=args.threads).benchmark(batch_size=1, seq_len=128, runs=50)
        p50 = float(bench.get("p50_ms", bench.get("p50", 0.0)))
        print(f"\nbundle {bundle}: {macs / 1e6:,.0f}M multiply-adds at b1/s128; at the student-shaped int8 rate "
              f"({student_rate:,.0f} GOP/s) that is {floor_ms:.2f} ms; its p50 is {p50:.2f} ms: "
              f"{floor_ms / p50:.0%} of its time is that arithmetic ({host})")
        report["bundle"] = {"path": str(bundle), "macs": macs, "floor_ms": floor_ms, "p50_ms": p50}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
