"""ORT's SkipLayerNormalization fusion against Add + LayerNormalization, through the kit's own stages.

    python bench/skip_layer_norm.py runs/demo/edge-trimmed runs/demo/teacher     # PyTorch artifacts

Each model is exported twice with O2 (`--skip-layer-norm fused` and `unfused`) and each export is
quantized with the kit's dynamic int8 defaults; then the four graphs per model run interleaved (rounds
of 40 calls each, every graph in turn, median of the rounds' medians) at b1/s128, b1/s32 and b8/s128,
on 1 and 2 threads, spinning on (as a bundle runs). Prints the CPU (vendor, family/model, ISA) and
the unfused/fused speed-up per graph and case. Outputs under runs/bench/skip-layer-norm/.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
CASES = [(1, 128), (1, 32), (8, 128)]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("models", nargs="+", help="PyTorch model artifacts (a classifier each)")
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--calls", type=int, default=40)
    p.add_argument("--out", default=str(ROOT / "runs/bench/skip-layer-norm"))
    args = p.parse_args(argv)

    import shrinkbert
    from shrinkbert.core.device import describe_machine
    from shrinkbert.core.ortsession import ort_session

    print(f"machine: {describe_machine()}", flush=True)
    graphs: dict[str, Path] = {}
    for model in args.models:
        name = Path(model).name
        for mode in ("fused", "unfused"):
            onnx_dir = Path(args.out) / f"{name}-{mode}"
            if not (onnx_dir / "model.onnx").is_file():
                shrinkbert.export(model=model, output_dir=str(onnx_dir), skip_layer_norm=mode)
            int8_dir = Path(args.out) / f"{name}-{mode}-int8"
            if not (int8_dir / "model.onnx").is_file():
                shrinkbert.quantize(model=str(onnx_dir), output_dir=str(int8_dir))
            graphs[f"{name} fp32 {mode}"] = onnx_dir / "model.onnx"
            graphs[f"{name} int8 {mode}"] = int8_dir / "model.onnx"
    rng = np.random.default_rng(0)
    for threads in (2, 1):
        sessions = {key: ort_session(path, threads, spin=True) for key, path in graphs.items()}
        for batch, length in CASES:
            ids = rng.integers(1000, 5000, (batch, length)).astype(np.int64)
            feeds = {}
            for key, session in sessions.items():
                names = {i.name for i in session.get_inputs()}
                feed = {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)}
                feeds[key] = {k: v for k, v in feed.items() if k in names}
                for _ in range(5):
                    session.run(None, feeds[key])
            times: dict[str, list[float]] = {key: [] for key in sessions}
            for _ in range(args.rounds):
                for key, session in sessions.items():
                    samples = []
                    for _ in range(args.calls):
                        start = time.perf_counter()
                        session.run(None, feeds[key])
                        samples.append(time.perf_counter() - start)
                    times[key].append(1000 * statistics.median(samples))
            ms = {key: statistics.median(values) for key, values in times.items()}
            print(f"\n{threads} thread(s), b{batch}/s{length}:")
            for key in ms:
                if key.endswith(" fused"):
                    twin = key[:-len("fused")] + "unfused"
                    print(f"  {key[:-6]:<28} fused {ms[key]:8.3f} ms  unfused {ms[twin]:8.3f} ms  "
                          f"speed-up {ms[key] / ms[twin]:.2f}x", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
