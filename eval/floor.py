"""The host's floor: what its cores reach on large matrix products, and how long a model's own matrix
products would take at that rate.

    rates = host_rates(threads=2)                       # GOP/s: int8 and fp32 in ONNX Runtime, fp32 in PyTorch
    macs = multiply_adds(encoder_shape(config), batch=1, tokens=128)
    floor = floor_ms(macs, rates["int8"])               # the least time those products can take here

A model's multiply-adds are its encoder's dense products: per layer and token the query/key/value and
output projections and the FFN (two matrices; three for a gated one), plus attention's two products
(tokens x tokens per head). The task's head (a pooler, a classifier), embedding lookups, norms,
softmax and activations are not counted: the floor is a lower bound, and `p50 / floor` says how far above it a
variant runs (1x would be pure arithmetic at the rate of a large, well-shaped product).

The rates are measured on single-node graphs of one large square product (1024^3) at the report's
thread count, with no variant running, interleaved, the fastest round (a floor is what the cores reach
undisturbed; 1024^3 reached as much as 2048x1024^2 and 1024^2x4096 here, and twice a student's
128x384x1536): ONNX Runtime MatMulInteger (uint8 x int8, what dynamic
int8 graphs run), ONNX Runtime MatMul in fp32 and PyTorch's fp32 matmul. A variant is held to the
rate of the arithmetic it runs: int8 graphs to the int8 rate, fp32 graphs to ONNX Runtime's fp32
rate, PyTorch models to PyTorch's.
"""
from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

SQUARE = (1024, 1024, 1024)
# Ops that mean a graph computes its products in int8 (dynamic: MatMulInteger and its fused forms;
# static QDQ: QuantizeLinear/QLinear*). A fp32 graph has none of them.
INT8_OPS = frozenset({"MatMulInteger", "DynamicQuantizeMatMul", "QAttention", "QLinearMatMul", "QGemm",
                      "MatMulIntegerToFloat", "QuantizeLinear", "DynamicQuantizeLinear"})
RATE_OF_RUNTIME = {"pytorch": "torch_fp32", "onnx_fp32": "onnx_fp32", "onnx_int8": "int8"}


@dataclass(frozen=True)
class EncoderShape:
    """The dense products of an encoder: its width, each layer's attention width, its FFN."""
    hidden: int
    attention: tuple[int, ...]  # per layer: heads kept x head size (a pruned layer keeps fewer heads)
    intermediate: int
    ffn_matrices: int = 2       # 3 for a gated FFN (ModernBERT's GLU: two input halves, one output)


def encoder_shape(config) -> EncoderShape:
    """The shape of a transformers encoder config of any family the kit knows (core/families)."""
    from shrinkbert.core.families import family_of

    family = family_of(config)
    widths = family.widths(config)
    head_size = int(getattr(config, "head_dim", 0) or widths.hidden // widths.heads)
    pruned = {int(layer): len(heads) for layer, heads in (getattr(config, "pruned_heads", None) or {}).items()}
    attention = tuple((widths.heads - pruned.get(layer, 0)) * head_size for layer in range(widths.layers))
    return EncoderShape(widths.hidden, attention, widths.intermediate, family.ffn_matrices)


def multiply_adds(shape: EncoderShape, batch: int, tokens: float) -> float:
    """Multiply-adds of one call on `batch` rows of `tokens` tokens each."""
    h = shape.hidden
    per_token = sum(h * 3 * a + a * h + shape.ffn_matrices * h * shape.intermediate for a in shape.attention)
    attention = sum(2 * tokens * tokens * a for a in shape.attention)
    return batch * (tokens * per_token + attention)


def floor_ms(macs: float, gops: float) -> float:
    """The time `macs` multiply-adds take at `gops` billion operations (2 per multiply-add) a second."""
    return 2 * macs / (gops * 1e9) * 1000


def product_graph(op: str, m: int, k: int, n: int, path: Path) -> Path:
    """A one-node ONNX graph: [m, k] input x constant [k, n] weight, as `op` (MatMulInteger, MatMul or
    com.microsoft DynamicQuantizeMatMul)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    opset = [helper.make_opsetid("", 17)]
    if op == "MatMul":
        inputs = [helper.make_tensor_value_info("a", TensorProto.FLOAT, [m, k])]
        weights = [numpy_helper.from_array(rng.standard_normal((k, n)).astype(np.float32), "b")]
        node = helper.make_node("MatMul", ["a", "b"], ["y"])
        out = helper.make_tensor_value_info("y", TensorProto.FLOAT, [m, n])
    elif op == "MatMulInteger":
        inputs = [helper.make_tensor_value_info("a", TensorProto.UINT8, [m, k])]
        weights = [numpy_helper.from_array(rng.integers(-127, 127, (k, n)).astype(np.int8), "b")]
        node = helper.make_node("MatMulInteger", ["a", "b"], ["y"])
        out = helper.make_tensor_value_info("y", TensorProto.INT32, [m, n])
    elif op == "DynamicQuantizeMatMul":  # fp32 in, int8 weights with a scale, fp32 out
        inputs = [helper.make_tensor_value_info("a", TensorProto.FLOAT, [m, k])]
        weights = [numpy_helper.from_array(rng.integers(-127, 127, (k, n)).astype(np.int8), "b"),
                   numpy_helper.from_array(np.array([0.01], np.float32), "scale")]
        node = helper.make_node("DynamicQuantizeMatMul", ["a", "b", "scale"], ["y"], domain="com.microsoft")
        out = helper.make_tensor_value_info("y", TensorProto.FLOAT, [m, n])
        opset.append(helper.make_opsetid("com.microsoft", 1))
    else:
        raise ValueError(f"no product graph for op {op!r}")
    graph = helper.make_graph([node], op, inputs, [out], initializer=weights)
    onnx.save(helper.make_model(graph, opset_imports=opset, ir_version=9), str(path))  # what ONNX Runtime reads
    return path


def ort_product(op: str, shape: tuple[int, int, int], threads: int, folder: Path) -> Callable[[], Any]:
    """A call that runs `op` on `shape` in ONNX Runtime at `threads` threads."""
    from shrinkbert.core.ortsession import ort_session

    m, k, _ = shape
    session = ort_session(product_graph(op, *shape, folder / f"{op}-{m}x{k}.onnx"), threads)
    rng = np.random.default_rng(1)
    a = rng.integers(0, 255, (m, k)).astype(np.uint8) if op == "MatMulInteger" else rng.standard_normal((m, k)).astype(np.float32)
    return lambda: session.run(None, {"a": a})


def torch_product(shape: tuple[int, int, int], threads: int) -> Callable[[], Any]:
    """A call that runs an fp32 matmul of `shape` in PyTorch at `threads` threads."""
    import torch

    torch.set_num_threads(threads)
    m, k, n = shape
    a, b = torch.randn(m, k), torch.randn(k, n)

    def run():
        with torch.inference_mode():
            return a @ b
    return run


def time_products(cases: dict[str, tuple[Callable[[], Any], tuple[int, int, int]]], rounds: int,
                  calls: int, best: bool = False) -> dict[str, dict[str, float]]:
    """{case: {"ms", "gops"}}: the cases timed against each other (core/timing.py interleaved_ms: the
    median of interleaved rounds' medians; with `best`, the fastest round's median, a floor's rate)."""
    from shrinkbert.core.timing import interleaved_ms

    ms = interleaved_ms({name: run for name, (run, _) in cases.items()}, rounds, calls, best=best)
    return {name: {"ms": ms[name], "gops": 2 * m * k * n / (ms[name] / 1000) / 1e9}
            for name, (_, (m, k, n)) in cases.items()}


def host_rates(threads: int, rounds: int = 5, calls: int = 5) -> dict[str, Any]:
    """The host's GOP/s on a 1024^3 product at `threads` threads, the fastest of `rounds` interleaved
    rounds: `int8` (ONNX Runtime MatMulInteger), `onnx_fp32` (ONNX Runtime MatMul), `torch_fp32`
    (PyTorch matmul); with the method and the CPU."""
    from shrinkbert.core.device import describe_machine

    with tempfile.TemporaryDirectory() as work:
        cases = {"int8": (ort_product("MatMulInteger", SQUARE, threads, Path(work)), SQUARE),
                 "onnx_fp32": (ort_product("MatMul", SQUARE, threads, Path(work)), SQUARE),
                 "torch_fp32": (torch_product(SQUARE, threads), SQUARE)}
        timed = time_products(cases, rounds, calls, best=True)
    return {**{name: round(t["gops"], 1) for name, t in timed.items()}, "threads": threads,
            "machine": describe_machine(),
            "method": f"{SQUARE[0]}^3 product, the fastest of {rounds} interleaved rounds of {calls} calls (median "
                      "of each), measured with no variant running; "
                      "int8 = ONNX Runtime MatMulInteger (u8 x s8), onnx_fp32 = ONNX Runtime MatMul, "
                      "torch_fp32 = PyTorch matmul"}


def graph_runs_int8(onnx_file: str | Path) -> bool:
    """Whether an ONNX graph computes its products in int8 (its op types; the weights are not read)."""
    import onnx

    graph = onnx.load(str(onnx_file), load_external_data=False).graph
    return any(node.op_type in INT8_OPS for node in graph.node)


def variant_config(path: str | Path, manifest: dict | None):
    """The transformers config a variant was made from: its own config.json, else (a bundle, which
    keeps only its graph) the nearest parent's in its manifest; None where none is found."""
    from transformers import AutoConfig

    candidates = [Path(path)] + [Path(p["path"]) for p in (manifest or {}).get("parents") or []
                                 if isinstance(p, dict) and p.get("path")]
    for folder in candidates:
        if (folder / "config.json").is_file():
            try:
                return AutoConfig.from_pretrained(str(folder))
            except (ValueError, OSError, json.JSONDecodeError):
                continue
    return None


def variant_floor(path: str | Path, manifest: dict | None, runner_kind: str, model_files: list[str],
                  cases: list, latency: dict[str, dict[str, float]], rates: dict[str, Any]) -> dict[str, Any] | None:
    """A measured variant's floor per case (eval/latency.py Cases): the rate it is held to, its multiply-adds,
    the floor in ms and its p50 over that floor; None where its shape or its arithmetic is not known."""
    config = variant_config(path, manifest)
    if config is None:
        return None
    try:
        shape = encoder_shape(config)
    except Exception:  # a model the kit's families do not describe: no floor rather than a wrong one
        return None
    if runner_kind == "pytorch":
        arithmetic = "pytorch"
    else:
        graphs = [Path(path) / name for name in model_files if name.endswith(".onnx")]
        if not graphs:
            return None
        arithmetic = "onnx_int8" if any(graph_runs_int8(g) for g in graphs) else "onnx_fp32"
    rate = RATE_OF_RUNTIME[arithmetic]
    per_case = {}
    for case in cases:
        stats = latency.get(case.label) or {}
        tokens = case.seq_len if case.seq_len is not None else stats.get("mean_tokens_per_row")
        if not tokens:
            continue
        macs = multiply_adds(shape, case.batch_size, tokens)
        floor = floor_ms(macs, rates[rate])
        p50 = stats.get("p50")
        per_case[case.label] = {"macs": macs, "floor_ms": floor, "p50_over_floor": p50 / floor if p50 else None}
    return {"arithmetic": arithmetic, "rate": rate, "gops": rates[rate], "cases": per_case}
