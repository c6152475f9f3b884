"""The host's floor: what int8 and fp32 matrix products reach here, and how far a model is from it.

    python bench/gemm_floor.py                                 # the GEMM table only
    python bench/gemm_floor.py --bundle runs/demo/bundle       # and a bundle's p50 against its arithmetic floor

Times single ONNX Runtime nodes at the bundle's thread count (2 by default, as the report runs):
MatMulInteger (uint8 x int8 -> int32, what dynamic int8 graphs run), the fused DynamicQuantizeMatMul
(the quantized MatMul of an O2 graph, activations quantized inside), and MatMul in fp32; and
PyTorch's fp32 matmul (the teacher's runtime). Two shapes: a large square product (the host's
throughput) and the shape a small student's FFN has at 128 tokens (what a bundle meets). Interleaved
rounds, median per case, GOP/s = 2*M*K*N / time (eval/floor.py, which the report's floor column uses).
With --bundle: the bundle's multiply-adds per b1/s128 call (its encoder's dense products, from its
parent's config: eval/floor.py multiply_adds), the time those take at the large product's int8 rate
(the report's floor) and at the student-shaped one, and the bundle's own p50 over each.
Prints the CPU (vendor, family/model) and its ISA beside every figure.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from shrinkbert.eval.floor import (encoder_shape, floor_ms, multiply_adds, ort_product, time_products,  # noqa: E402
                                   torch_product, variant_config)
SHAPES = {"square 1024": (1024, 1024, 1024), "student FFN (128 tok, 384->1536)": (128, 384, 1536)}


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
    with tempfile.TemporaryDirectory() as work:
        cases = {}
        for label, shape in SHAPES.items():
            for op in ("MatMulInteger", "DynamicQuantizeMatMul", "MatMul"):
                cases[f"{label}|ORT {op}"] = (ort_product(op, shape, args.threads, Path(work)), shape)
            cases[f"{label}|PyTorch fp32 matmul"] = (torch_product(shape, args.threads), shape)
        timed = time_products(cases, args.rounds, args.calls)  # interleaved rounds, the eval report's own method
    rows = [{"shape": key.split("|")[0], "case": key.split("|")[1], **timed[key]} for key in cases]
    print(f"\n| shape | case | ms (median of {args.rounds} rounds) | GOP/s |\n|---|---|--:|--:|")
    for row in rows:
        print(f"| {row['shape']} | {row['case']} | {row['ms']:.3f} | {row['gops']:,.0f} |")
    report = {"host": host, "threads": args.threads, "rows": rows}
    if args.bundle:
        from shrinkbert.compress.edge_predictor import Predictor

        bundle = Path(args.bundle)
        manifest = json.loads((bundle / "shrinkbert.json").read_text())
        config = variant_config(bundle, manifest)
        if config is None:
            raise SystemExit(f"error: no config.json in {bundle} or its manifest's parents: its shape is unknown")
        macs = multiply_adds(encoder_shape(config), 1, 128)
        bench = Predictor(bundle, threads=args.threads).benchmark(batch_size=1, seq_len=128, runs=50)
        p50 = float(bench.get("p50_ms", bench.get("p50", 0.0)))
        floors = {}
        for key in ("square 1024|ORT MatMulInteger", "student FFN (128 tok, 384->1536)|ORT DynamicQuantizeMatMul"):
            floors[key] = floor_ms(macs, timed[key]["gops"])
            print(f"bundle {bundle}: {macs / 1e6:,.0f}M multiply-adds at b1/s128; at {key.replace('|', ' ')} "
                  f"({timed[key]['gops']:,.0f} GOP/s) that takes {floors[key]:.2f} ms; its p50 {p50:.2f} ms is "
                  f"{p50 / floors[key]:.1f}x that ({host})")
        report["bundle"] = {"path": str(bundle), "macs": macs, "floor_ms": floors, "p50_ms": p50}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=2))
    from record import record
    record("gemm-rates", section="latency", title="The host's matrix-product rates",
           rows=[{"shape": row["shape"], "case": row["case"], "ms": round(row["ms"], 3), "GOP/s": round(row["gops"])}
                 for row in rows],
           note=f"Single nodes, {args.threads} threads, median of {args.rounds} interleaved rounds of {args.calls} calls.")
    if args.bundle:
        key = "square 1024|ORT MatMulInteger"
        record("bundle-floor", section="latency", title="The demo's bundle against the host's int8 floor, alone",
               rows=[{"int8 rate GOP/s (MatMulInteger 1024^3)": round(timed[key]["gops"]), "bundle p50 ms": round(p50, 2),
                      "floor ms": round(floors[key], 2), "p50 / floor": f"{p50 / floors[key]:.1f}x"}],
               note=f"{Path(args.bundle).name}, b1/s128, {args.threads} threads.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
