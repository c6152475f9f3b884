"""Static int8 keeps LayerNorm, GELU, the residual Add and Softmax float, checked on the QUANTIZED
graph itself (compress/quantize.py, QDQ format), with ORT's whole QDQ operator set switched on so that
only keep_float stands between those ops and int8. The inspector below reads the graph on its own
terms (which tensors come out of a DequantizeLinear), not through compress/int8.py's node selection;
the same run with keep_float empty shows the inspector sees int8 inputs when they are there.

Found on the way (not asserted): a kept-float node may still read a dequantized tensor it shares
with a quantized MatMul (the residual Add's skip input is the LayerNorm output that the next
MatMul quantizes); ORT quantizes a tensor once for all its consumers."""
from __future__ import annotations

from pathlib import Path

import pytest

FLOAT_OPS = ("LayerNormalization", "Erf", "Gelu", "Softmax")


def int8_fed(model_file: Path) -> dict[str, list[str]]:
    """{op kind: [node names]} of LayerNorm/GELU(Erf)/Softmax nodes and residual Adds (an Add of two
    activations that feeds a LayerNorm) that were quantized: a QOperator int8 op, or in QDQ an input that passes through a
    Quantize/DequantizeLinear pair put there for that node alone (no other consumer shares it: a tensor
    shared with a quantized MatMul is quantized for the MatMul's sake)."""
    import onnx

    graph = onnx.load(str(model_file)).graph
    weights = {i.name for i in graph.initializer}
    producer = {out: node for node in graph.node for out in node.output}
    consumers: dict[str, list] = {}
    for node in graph.node:
        for tensor in node.input:
            consumers.setdefault(tensor, []).append(node)

    def origin(tensor: str) -> str:
        """The tensor behind a chain of Quantize/DequantizeLinear (and Identity, as torch's export shares biases)."""
        while (node := producer.get(tensor)) is not None and node.op_type in ("QuantizeLinear", "DequantizeLinear",
                                                                              "Identity"):
            tensor = node.input[0]
        return tensor

    def is_weight(tensor: str) -> bool:
        node = producer.get(origin(tensor))
        return origin(tensor) in weights or (node is not None and node.op_type == "Constant")

    def final_consumers(tensor: str) -> set[str]:
        found = set()
        for node in consumers.get(tensor, []):
            if node.op_type in ("QuantizeLinear", "DequantizeLinear"):
                found |= final_consumers(node.output[0])
            else:
                found.add(node.name)
        return found

    def quantized_for(node, tensor: str) -> bool:
        feeder, source = producer.get(tensor), producer.get(origin(tensor))
        # a pair right after a MatMul/Gemm/Gather is that op's own output quantization
        own_output = source is not None and source.op_type in ("MatMul", "Gemm", "Gather")
        return (feeder is not None and feeder.op_type == "DequantizeLinear" and not is_weight(tensor)
                and not own_output and final_consumers(origin(tensor)) == {node.name})

    def feeds_layernorm(node) -> bool:
        return any(c.op_type == "LayerNormalization" for out in node.output for c in consumers.get(out, []))

    found: dict[str, list[str]] = {}
    for node in graph.node:
        if node.op_type.startswith("QLinear") and node.op_type[7:] in ("Add", "Softmax", "LayerNormalization", "Gelu"):
            found.setdefault(node.op_type[7:], []).append(node.name)
        kind = node.op_type if node.op_type in FLOAT_OPS else None
        if node.op_type == "Add" and not any(is_weight(t) for t in node.input) and feeds_layernorm(node):
            kind = "residual Add"  # BERT's skip connection: an Add of two activations into a LayerNorm
        if kind and any(quantized_for(node, t) for t in node.input):
            found.setdefault(kind, []).append(node.name)
    return found


@pytest.fixture(scope="module")
def onnx_dir(tmp_path_factory) -> Path:
    from fixtures import make_tiny_bert
    from shrinkbert.compress import export

    model = make_tiny_bert(tmp_path_factory.mktemp("static") / "model")
    return export.run(export.Config(model=str(model), output_dir=str(tmp_path_factory.mktemp("static") / "fp32"),
                                    parity_rows=4, optimization="none"))


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> str:
    from fixtures import write_tiny_csv

    return str(write_tiny_csv(tmp_path_factory.mktemp("staticdata") / "tiny.csv", n=120))


def quantize_static(onnx_dir: Path, data: str, out: Path, keep_float: list[str]) -> Path:
    from shrinkbert.compress import quantize
    from shrinkbert.compress.common import onnx_file

    done = quantize.run(quantize.Config(model=str(onnx_dir), output_dir=str(out), task=data, approach="static",
                                        calibration="minmax", calibration_rows=32, min_calibration_rows=8,
                                        static_ops=[], keep_float=keep_float, max_eval_rows=0, max_length=32))
    return onnx_file(done)


def test_static_int8_graph_keeps_layernorm_gelu_add_softmax_float(onnx_dir, data, tmp_path):
    import onnx

    from shrinkbert.compress.int8 import FLOAT_KINDS

    model_file = quantize_static(onnx_dir, data, tmp_path / "kept", list(FLOAT_KINDS))
    ops = [n.op_type for n in onnx.load(str(model_file)).graph.node]
    assert ops.count("QuantizeLinear") > 0 and "MatMul" in ops  # it is a QDQ int8 graph
    for op in ("LayerNormalization", "Erf", "Softmax"):
        assert op in ops, f"the tiny BERT's graph has no {op} to check"
    assert int8_fed(model_file) == {}

    # the control: with nothing kept float, ORT's QDQ set quantizes every LayerNorm, and the inspector sees
    # it (onnxruntime 1.31 puts no QDQ pair of their own on Erf, Softmax or the residual Add even then)
    bare = int8_fed(quantize_static(onnx_dir, data, tmp_path / "bare", []))
    assert len(bare.get("LayerNormalization", [])) == ops.count("LayerNormalization"), bare
