"""int8 primitives over Optimum's ORTQuantizer: instruction set, calibration, one quantization pass.

Fused (O2) graphs go through onnxruntime.quantization.quantize_dynamic with DefaultTensorType,
because ORTQuantizer fails on them ("Unable to find data type for weight_name...").
Calibration runs inside a temporary directory: ORT writes its augmented model and temp files
into the working directory.
"""
from __future__ import annotations

import contextlib
import platform
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from shrinkbert.core.device import (cpu_flags, cpu_model, detect_isa)  # noqa: F401  (detect_isa: int8.detect_isa is public)
from shrinkbert.core.errors import ShrinkbertError, require
from shrinkbert.core.ortsession import graph_feed
from shrinkbert.core.quiet import quiet_library_warnings

ISAS = ("avx512_vnni", "avx512", "avx2", "arm64")
CALIBRATIONS = ("minmax", "entropy", "percentile")


WEIGHT_TYPES = ("s8", "u8")
# What each instruction set gets unless the user overrides it, chosen with bench/int8.py on a fine-tuned
# MiniLM teacher (its figures are in bench/results). On x86 without VNNI, per-channel kept more accuracy
# than per-tensor, and per-channel + reduce_range kept it on the O2-fused path that ships at full int8
# speed; u8u8 kept accuracy too but ran slower, so reduce_range is the x86 default. VNNI and ARM
# kernels do not saturate: full range there.
ISA_DEFAULTS = {
    "avx2": {"per_channel": True, "reduce_range": True, "weight_type": "s8",
             "why": "x86 without VNNI: u8s8 kernels can saturate, so 7-bit weights (reduce_range); "
                    "per-channel + reduce_range kept accuracy on the O2 path at full int8 speed (u8u8 was slower)"},
    "avx512": {"per_channel": True, "reduce_range": True, "weight_type": "s8",
               "why": "AVX512 without VNNI: u8s8 kernels can saturate, so 7-bit weights (reduce_range)"},
    "avx512_vnni": {"per_channel": True, "reduce_range": False, "weight_type": "s8",
                    "why": "VNNI: no saturation, full 8-bit range"},
    "arm64": {"per_channel": True, "reduce_range": False, "weight_type": "s8",
              "why": "ARM: no saturation, full 8-bit range"},
}


def cpu_description() -> str:
    """'AMD EPYC ... (avx2)': the CPU model and the detected int8 instruction set, for every int8 figure."""
    vnni = "avx512_vnni" in cpu_flags() or "avx512vnni" in cpu_flags()
    return f"{cpu_model() or platform.machine()}, int8 ISA {detect_isa()}{'' if vnni else ' (no VNNI)'}"


def resolve_isa(isa: str) -> str:
    isa = detect_isa() if isa in ("", "auto") else isa
    require(isa in ISAS, f"isa must be auto or one of {', '.join(ISAS)}, got '{isa}'")
    return isa


def choose(isa: str = "auto", per_channel: bool | None = None, reduce_range: bool | None = None,
           weight_type: str = "auto") -> dict[str, Any]:
    """The int8 settings for this instruction set: each one the ISA's default unless given.

    Returns {isa, per_channel, reduce_range, weight_type, activation_type, source: {setting: 'isa'|'user'},
    why}; this dict goes into the manifest as it is.
    """
    isa = resolve_isa(isa)
    weight_type = (weight_type or "auto").lower()
    require(weight_type in ("auto",) + WEIGHT_TYPES,
            f"weight_type must be auto, s8 or u8, got '{weight_type}'")
    defaults = ISA_DEFAULTS[isa]
    given = {"per_channel": per_channel, "reduce_range": reduce_range,
             "weight_type": None if weight_type == "auto" else weight_type}
    chosen = {k: (defaults[k] if v is None else v) for k, v in given.items()}
    return {"isa": isa, **chosen, "activation_type": "u8",
            "source": {k: ("isa" if v is None else "user") for k, v in given.items()},
            "why": defaults["why"]}


def quantization_config(isa: str, static: bool, per_channel: bool | None, exclude_nodes: list[str],
                        reduce_range: bool | None = None, weight_type: str = "auto",
                        operators: list[str] | None = None):
    """(Optimum QuantizationConfig, choice dict): the ISA decides what the caller leaves None/auto."""
    from onnxruntime.quantization import QuantType
    from optimum.onnxruntime.configuration import QuantizationConfig, default_quantization_parameters

    choice = choose(isa, per_channel, reduce_range, weight_type)
    fmt, mode, ops = default_quantization_parameters(static, operators_to_quantize=list(operators or []))
    if not static and not operators:
        # ONNX Runtime's ConvInteger is slower than its float Conv on CPUs (a CNN student's filters): dynamic
        # int8 leaves convolutions float unless the operators are named
        ops = [op for op in ops if op not in FLOAT_CONV]
    qconfig = QuantizationConfig(
        is_static=static, format=fmt, mode=mode, activations_dtype=QuantType.QUInt8, activations_symmetric=False,
        weights_dtype=QuantType.QInt8 if choice["weight_type"] == "s8" else QuantType.QUInt8,
        weights_symmetric=True, per_channel=choice["per_channel"], reduce_range=choice["reduce_range"],
        nodes_to_quantize=[], nodes_to_exclude=list(exclude_nodes), operators_to_quantize=ops)
    choice["operators"] = list(ops)
    return qconfig, choice


FLOAT_CONV = ("Conv",)  # what dynamic int8 keeps float by default (see quantization_config)
# Static int8: what stays float by default (the ops users commonly keep out of static int8).
FLOAT_KINDS = ("layernorm", "gelu", "residual_add", "softmax_input")
STATIC_OPS = ["MatMul", "Gemm", "Gather"]  # Gather: the embedding tables (weight-only, no activation range)


def float_nodes(model, kinds: list[str]) -> dict[str, list[str]]:
    """{kind: [node names]} of the nodes static int8 keeps float: LayerNorm (fused or decomposed),
    GELU (Erf/Gelu and the ops of the activation subgraph), the residual Add (an Add of two
    activations) and what feeds Softmax (the Softmax node and the producers of its input)."""
    unknown = [k for k in kinds if k not in FLOAT_KINDS]
    require(not unknown, f"keep_float kinds must be among {', '.join(FLOAT_KINDS)}, got {', '.join(unknown)}")
    inits = {i.name for i in model.graph.initializer}
    producer = {out: node for node in model.graph.node for out in node.output}
    found: dict[str, list[str]] = {k: [] for k in kinds}
    for node in model.graph.node:
        name, op = node.name, node.op_type
        if "layernorm" in found and (op in ("LayerNormalization", "SkipLayerNormalization",
                                            "EmbedLayerNormalization") or "layernorm" in name.lower()):
            found["layernorm"].append(name)
        if "gelu" in found and op not in ("MatMul", "Gemm") and (
                op in ("Gelu", "FastGelu", "BiasGelu", "Erf") or "act_fn" in name):
            found["gelu"].append(name)
        if "residual_add" in found and op == "Add" and not any(i in inits for i in node.input):
            found["residual_add"].append(name)
        if "softmax_input" in found and op == "Softmax":
            found["softmax_input"].append(name)
            for tensor in node.input:
                src = producer.get(tensor)
                if src is not None and src.op_type not in ("MatMul", "Gemm"):
                    found["softmax_input"].append(src.name)
    return {k: sorted(set(v)) for k, v in found.items()}


def check_calibration(features: dict[str, np.ndarray], input_names: list[str], min_rows: int) -> dict[str, np.ndarray]:
    """A calibration set must hold every model input as a 2-D int array, all of one shape, enough rows;
    token types it lacks are zeros, as every graph feed fills them (core/ortsession.graph_feed)."""
    missing = [n for n in input_names if n not in features and n != "token_type_ids"]
    if missing:
        raise ShrinkbertError(f"calibration set lacks model input(s) {', '.join(missing)} "
                              f"(has: {', '.join(features) or 'nothing'}; the model wants {', '.join(input_names)})")
    for name in input_names:
        array = np.asarray(features[name]) if name in features else None
        if array is not None and (array.ndim != 2 or not np.issubdtype(array.dtype, np.integer)):
            raise ShrinkbertError(f"calibration input '{name}' must be a 2-D integer array [rows, tokens], "
                                  f"got shape {list(array.shape)} of {array.dtype}")
    out = graph_feed(features, input_names)
    shapes = {name: array.shape for name, array in out.items()}
    if len(set(shapes.values())) > 1:
        raise ShrinkbertError("calibration inputs disagree in shape: "
                              + ", ".join(f"'{name}' is {list(shape)}" for name, shape in shapes.items()))
    rows = next(iter(shapes.values()))[0]
    if rows < min_rows:
        raise ShrinkbertError(f"calibration set has {rows} rows; static int8 needs at least {min_rows} "
                              f"(pass more rows, or lower min_calibration_rows knowingly)")
    return out


def calibrate(onnx_path: Path, features: dict[str, np.ndarray], method: str, batch_size: int = 8,
              percentile: float = 99.999, operators: list[str] | None = None) -> dict[str, Any]:
    """Activation ranges from real rows, computed in a temp dir (ORT writes files into the cwd)."""
    from datasets import Dataset
    from optimum.onnxruntime import ORTQuantizer
    from optimum.onnxruntime.configuration import AutoCalibrationConfig

    require(method in CALIBRATIONS, f"calibration must be one of {', '.join(CALIBRATIONS)}, got '{method}'")
    onnx_path = Path(onnx_path).resolve()  # the work below runs in a temp dir
    dataset = Dataset.from_dict({k: v.tolist() for k, v in features.items()})
    if method == "minmax":
        calib = AutoCalibrationConfig.minmax(dataset)
    elif method == "entropy":
        calib = AutoCalibrationConfig.entropy(dataset)
    else:
        calib = AutoCalibrationConfig.percentiles(dataset, percentile=percentile)
    with tempfile.TemporaryDirectory() as work, contextlib.chdir(work):
        shutil.copy2(onnx_path, Path(work) / "model.onnx")
        quantizer = ORTQuantizer.from_pretrained(Path(work), file_name="model.onnx")
        try:
            return quantizer.fit(dataset=dataset, calibration_config=calib,
                                 onnx_augmented_model_name=str(Path(work) / "augmented_model.onnx"),
                                 operators_to_quantize=list(operators) if operators else None,
                                 batch_size=batch_size)
        except ValueError as err:  # ORT's histogram collectors choke on tensors with a constant value
            raise ShrinkbertError(f"{method} calibration failed ({str(err).splitlines()[0]}); a tensor "
                                  f"is constant (e.g. the all-zero biases of an untrained model): use calibration minmax") from None


@quiet_library_warnings()
def quantize_file(src: Path, dst: Path, qconfig, ranges: dict | None = None, fused: bool = False) -> Path:
    """Quantize the ONNX file src into dst (a file path)."""
    src, dst = Path(src).resolve(), Path(dst).resolve()  # the work below runs in a temp dir
    if fused:
        import onnx
        from onnxruntime.quantization import QuantType, quantize_dynamic

        require(not qconfig.is_static, "static int8 needs an unfused graph: export with optimization none or O1")
        quantize_dynamic(str(src), str(dst), per_channel=qconfig.per_channel, reduce_range=qconfig.reduce_range,
                         weight_type=qconfig.weights_dtype if qconfig.weights_dtype is not None else QuantType.QInt8,
                         nodes_to_exclude=list(qconfig.nodes_to_exclude),
                         extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})
        return _topologically_sorted(dst)
    from optimum.onnxruntime import ORTQuantizer

    with tempfile.TemporaryDirectory() as work, contextlib.chdir(work):
        shutil.copy2(src, Path(work) / "model.onnx")
        quantizer = ORTQuantizer.from_pretrained(Path(work), file_name="model.onnx")
        out = Path(work) / "out"
        quantizer.quantize(quantization_config=qconfig, save_dir=out, calibration_tensors_range=ranges)
        shutil.move(str(out / "model_quantized.onnx"), str(dst))
        if (out / "ort_config.json").is_file():
            shutil.copy2(out / "ort_config.json", Path(dst).parent / "ort_config.json")
    return _topologically_sorted(dst)


def _topologically_sorted(path: Path) -> Path:
    """The quantizer can leave a node before one it reads (DeBERTa's relative positions: an If
    branch reading an outer value made later): onnx.checker refuses such a graph and ONNX Runtime
    loads it. Put the nodes in order, counting what subgraphs read, in place."""
    import onnx

    if not Path(path).is_file():  # nothing written (a quantizer stubbed out in a test): nothing to order
        return path
    model = onnx.load(str(path))
    nodes = list(model.graph.node)
    made_by = {out: i for i, node in enumerate(nodes) for out in node.output if out}
    needs = [{made_by[name] for name in _reads(node) if name in made_by} - {i} for i, node in enumerate(nodes)]
    order, placed = [], set()
    while len(order) < len(nodes):
        ready = [i for i in range(len(nodes)) if i not in placed and needs[i] <= placed]
        if not ready:
            raise ShrinkbertError(f"{path} has a cycle in its graph")
        order.extend(ready)
        placed.update(ready)
    if order != list(range(len(nodes))):
        del model.graph.node[:]
        model.graph.node.extend(nodes[i] for i in order)
        onnx.save_model(model, str(path))
    return path


def _reads(node) -> set[str]:
    """The value names a node reads, with those its subgraphs read from the outer scope."""
    import onnx

    names = {name for name in node.input if name}
    for attribute in node.attribute:
        graphs = [attribute.g] if attribute.type == onnx.AttributeProto.GRAPH else list(attribute.graphs)
        for graph in graphs:
            inner = {out for n in graph.node for out in n.output} | {i.name for i in graph.input}
            names |= {name for n in graph.node for name in _reads(n)} - inner
    return names


def quantize_int4(src: Path, dst: Path, block_size: int = 32, exclude_nodes: list[str] = (),
                  accuracy_level: int = 0) -> Path:
    """Weight-only 4-bit: MatMul weights (MatMulNBits) and the embedding tables (GatherBlockQuantized) in
    blocks of block_size, symmetric; activations stay float (accuracy_level 4: int8 activations inside
    the kernel)."""
    import onnx
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

    require(block_size >= 16 and block_size & (block_size - 1) == 0,
            f"int4 block_size must be a power of two >= 16, got {block_size}")
    model = onnx.load(str(src))
    from onnxruntime.quantization.matmul_nbits_quantizer import DefaultWeightOnlyQuantConfig

    ops, axes = ("MatMul", "Gather"), (("MatMul", 0), ("Gather", 1))
    algo = DefaultWeightOnlyQuantConfig(block_size=block_size, is_symmetric=True, accuracy_level=accuracy_level or None,
                                        op_types_to_quantize=ops, quant_axes=axes)
    quantizer = MatMulNBitsQuantizer(model, bits=4, block_size=block_size, is_symmetric=True,
                                     accuracy_level=accuracy_level or None, nodes_to_exclude=list(exclude_nodes),
                                     op_types_to_quantize=ops, quant_axes=axes, algo_config=algo)
    quantizer.process()
    onnx.save_model(quantizer.model.model, str(dst))
    return Path(dst)


def quantized_node_count(path: Path) -> int:
    import onnx

    ops = {"MatMulInteger", "DynamicQuantizeLinear", "QLinearMatMul", "QuantizeLinear", "QAttention",
           "DynamicQuantizeMatMul", "MatMulIntegerToFloat", "QGemm", "MatMulNBits", "GatherBlockQuantized",
           "ConvInteger", "DynamicQuantizeLSTM"}
    return sum(1 for n in onnx.load(str(path), load_external_data=False).graph.node if n.op_type in ops)
