"""Built graphs and models timed on this host, interleaved, beside its floor rates.

    taskset -c 0,1 python bench/host_latency.py --torch teacher=runs/demo/teacher \\
        --onnx teacher-int8=runs/demo/teacher-int8/model.onnx --onnx edge-int8=runs/demo/edge-int8/model.onnx

For a host where the kit's stages cannot run (a lent machine that only receives files): every
variant is already built, so this needs only onnxruntime, numpy and (for --torch) PyTorch and
transformers. Each (threads, case) times every variant in turn, rounds of --calls calls, the median
of the rounds' medians, after the host's GEMM rates at that thread count (eval/floor.py's
host_rates). Prints the CPU (vendor, family/model, ISA, the cores this process may use) and each
variant's p50 and its speed-up over the first --torch variant. Writes --out (JSON).

A second runtime, to see whether another one runs faster on this host: `--openvino
NAME=FILE[@f32|@bf16]` compiles a plain ONNX graph (OpenVINO cannot read ONNX Runtime's fused
com.microsoft ops, so export with `--optimization none`; a static QDQ int8 graph from `quantize --approach
static` of that export runs in int8) on OpenVINO's CPU plugin, latency hint, one stream, the same
thread count, at that inference precision (f32 unless told). OpenVINO is not a dependency of the kit:
`pip install openvino` first.

    shrinkbert export --model runs/demo/edge-trimmed --optimization none --output-dir /tmp/edge-plain
    shrinkbert quantize --model /tmp/edge-plain --approach static --output-dir /tmp/edge-qdq
    python bench/host_latency.py --torch teacher=runs/demo/teacher --onnx edge-int8=runs/demo/edge-int8/model.onnx \
        --openvino ov-f32=/tmp/edge-plain/model.onnx --openvino ov-bf16=/tmp/edge-plain/model.onnx@bf16 \
        --openvino ov-qdq=/tmp/edge-qdq/model.onnx --threads 2 --cases 1x24,1x128,8x128
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
CASES = [(1, 128), (1, 32), (8, 128)]


def named(pairs: list[str]) -> dict[str, str]:
    out = {}
    for pair in pairs:
        name, _, path = pair.partition("=")
        if not path:
            raise SystemExit(f"error: expected NAME=PATH, got {pair!r}")
        out[name] = path
    return out


def random_inputs(batch: int, length: int, vocab: int) -> dict[str, np.ndarray]:
    """Every runtime's inputs for one case: the same token ids (seed 0, below `vocab`), no padding."""
    ids = np.random.default_rng(0).integers(100, vocab, (batch, length)).astype(np.int64)
    return {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)}


def onnx_runner(path: str, threads: int, batch: int, length: int, vocab: int):
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    given = random_inputs(batch, length, vocab)
    feed = {i.name: given[i.name] for i in session.get_inputs() if i.name in given}
    return lambda: session.run(None, feed)


def openvino_runner(spec: str, threads: int, batch: int, length: int, vocab: int):
    import openvino

    path, _, precision = spec.partition("@")
    compiled = openvino.Core().compile_model(path, "CPU", {
        "PERFORMANCE_HINT": "LATENCY", "NUM_STREAMS": "1", "INFERENCE_NUM_THREADS": str(threads),
        "INFERENCE_PRECISION_HINT": precision or "f32"})  # its default on a bf16 host is bf16: say which
    request = compiled.create_infer_request()
    given = random_inputs(batch, length, vocab)
    feed = {port.get_any_name(): given[port.get_any_name()] for port in compiled.inputs}
    return lambda: request.infer(feed)


def torch_runner(model, batch: int, length: int, vocab: int):
    import torch

    given = random_inputs(batch, length, vocab)
    ids, mask = torch.from_numpy(given["input_ids"]), torch.from_numpy(given["attention_mask"])

    def run():
        with torch.inference_mode():
            model(input_ids=ids, attention_mask=mask)
    return run


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--onnx", action="append", default=[], metavar="NAME=FILE", help="an ONNX graph")
    p.add_argument("--torch", action="append", default=[], metavar="NAME=DIR",
                   help="a transformers classifier folder, run in fp32 (weights stored in fp16 are cast back)")
    p.add_argument("--openvino", action="append", default=[], metavar="NAME=FILE[@f32|@bf16]",
                   help="a plain or QDQ ONNX graph run by OpenVINO (pip install openvino)")
    p.add_argument("--threads", default="1,2")
    p.add_argument("--cases", default=",".join(f"{b}x{n}" for b, n in CASES),
                   help="BATCHxTOKENS cases, comma-separated (the demo's test rows average 24 tokens)")
    p.add_argument("--vocab", type=int, default=13000, help="token ids are drawn below this")
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--calls", type=int, default=20)
    p.add_argument("--out", default=str(ROOT / "runs/bench/host-latency.json"))
    args = p.parse_args(argv)
    cases = [tuple(int(n) for n in case.split("x")) for case in args.cases.split(",")]

    import torch

    from shrinkbert.core.device import describe_machine
    from shrinkbert.core.kinds import kind_of
    from shrinkbert.core.timing import interleaved_ms
    from shrinkbert.eval.floor import host_rates

    cores = len(os.sched_getaffinity(0))
    print(f"machine: {describe_machine()}; this process may use {cores} cores", flush=True)
    # each model with its own kind's head (a QA teacher as a QA model), from its artifact folder
    models = {name: kind_of(path).model_class().from_pretrained(path, dtype=torch.float32).eval()
              for name, path in named(args.torch).items()}
    graphs = named(args.onnx)
    results = {"machine": describe_machine(), "cores": cores, "torch": torch.__version__, "rates": {}, "p50_ms": {}}
    import onnxruntime

    results["onnxruntime"] = onnxruntime.__version__
    print(f"torch {torch.__version__}, onnxruntime {onnxruntime.__version__}", flush=True)
    openvino_graphs = named(args.openvino)
    if openvino_graphs:
        import openvino

        results["openvino"] = openvino.__version__
        print(f"openvino {openvino.__version__}", flush=True)
    for threads in [int(t) for t in args.threads.split(",")]:
        torch.set_num_threads(threads)
        rates = host_rates(threads)
        results["rates"][threads] = {k: v for k, v in rates.items() if k not in ("machine", "method")}
        print(f"\n{threads} thread(s): GOP/s int8 {rates['int8']}, ORT fp32 {rates['onnx_fp32']}, "
              f"torch fp32 {rates['torch_fp32']}", flush=True)
        for batch, length in cases:
            runners = {name: torch_runner(model, batch, length, args.vocab) for name, model in models.items()}
            runners.update({name: onnx_runner(path, threads, batch, length, args.vocab) for name, path in graphs.items()})
            runners.update({name: openvino_runner(spec, threads, batch, length, args.vocab)
                            for name, spec in openvino_graphs.items()})
            p50 = interleaved_ms(runners, args.rounds, args.calls, warmup=3)
            results["p50_ms"][f"t{threads}/b{batch}/s{length}"] = p50
            base = next(iter(models), None)
            cells = [f"{name} {ms:.2f} ms" + (f" ({p50[base] / ms:.2f}x)" if base and name != base else "")
                     for name, ms in p50.items()]
            print(f"  b{batch}/s{length}: " + ", ".join(cells), flush=True)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
