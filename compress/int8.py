"""int8 primitives over Optimum's ORTQuantizer: instruction set, calibration, one quantization pass.

Fused (O2) graphs go through onnxruntime.quantization.quantize_dynamic with DefaultTensorType,
because ORTQuantizer fails on them ("Unable to find data type for weight_name...").
Calibration runs inside a temporary directory: ORT writes its augmented model and temp files
into the working directory.
"""
from __future__ import annotations

import contextlib
import os
import platform
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from shrinkbert.core.device import cpu_flags
from shrinkbert.core.errors import ShrinkbertError, require

ISAS = ("avx512_vnni", "avx512", "avx2", "arm64")
CALIBRATIONS = ("minmax", "entropy", "percentile")


def detect_isa() -> str:
    flags = cpu_flags()
    if platform.machine().lower() in ("aarch64", "arm64"):
        return "arm64"
    if "avx512_vnni" in flags or "avx512vnni" in flags:
        return "avx512_vnni"
    if "avx512f" in flags or "avx512bw" in flags:
        return "avx512"
    return "avx2"


def quantization_config(isa: str, static: bool, per_channel: bool, exclude_nodes: list[str]):
    from optimum.onnxruntime.configuration import AutoQuantizationConfig

    isa = detect_isa() if isa in ("", "auto") else isa
    require(isa in ISAS, f"isa must be auto or one of {', '.join(ISAS)}, got '{isa}'")
    make = getattr(AutoQuantizationConfig, isa)
    return make(is_static=static, per_channel=per_channel, nodes_to_exclude=list(exclude_nodes)), isa


def check_calibration(features: dict[str, np.ndarray], input_names: list[str], min_rows: int) -> dict[str, np.ndarray]:
    """A calibration set must hold every model input as a 2-D int array, all of one shape, enough rows."""
    missing = [n for n in input_names if n not in features and n != "token_type_ids"]
    if missing:
        raise ShrinkbertError(f"calibration set lacks model input(s) {', '.join(missing)} "
                              f"(has: {', '.join(features) or 'nothing'}; the model wants {', '.join(input_names)})")
    out = {}
    shape = None
    for name in input_names:
        array = np.asarray(features[name]) if name in features else None
        if array is None:  # token_type_ids: zeros like input_ids
            array = np.zeros_like(np.asarray(features["input_ids"]))
        if array.ndim != 2 or not np.issubdtype(array.dtype, np.integer):
            raise ShrinkbertError(f"calibration input '{name}' must be a 2-D integer array [rows, tokens], "
                                  f"got shape {list(array.shape)} of {array.dtype}")
        if shape is not None and array.shape != shape:
            raise ShrinkbertError(f"calibration inputs disagree in shape: '{name}' is {list(array.shape)}, "
                                  f"expected {list(shape)}")
        shape = array.shape
        out[name] = array.astype(np.int64)
    if shape[0] < min_rows:
        raise ShrinkbertError(f"calibration set has {shape[0]} rows; static int8 needs at least {min_rows} "
                              f"(pass more rows, or lower min_calibration_rows knowingly)")
    return out


def calibrate(onnx_path: Path, features: dict[str, np.ndarray], method: str, batch_size: int = 8,
              percentile: float = 99.999) -> dict[str, Any]:
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
                                 batch_size=batch_size)
        except ValueError as err:  # ORT's histogram collectors choke on tensors with a constant value
            raise ShrinkbertError(f"{method} calibration failed ({str(err).splitlines()[0]}); a tensor "
                                  f"is constant (e.g. the all-zero biases of an untrained model): use calibration minmax") from None


def quantize_file(src: Path, dst: Path, qconfig, ranges: dict | None = None, fused: bool = False) -> Path:
    """Quantize the ONNX file src into dst (a file path)."""
    src, dst = Path(src).resolve(), Path(dst).resolve()  # the work below runs in a temp dir
    if fused:
        import onnx
        from onnxruntime.quantization import QuantType, quantize_dynamic

        require(not qconfig.is_static, "static int8 needs an unfused graph: export with optimization none or O1")
        quantize_dynamic(str(src), str(dst), per_channel=qconfig.per_channel, weight_type=QuantType.QInt8,
                         nodes_to_exclude=list(qconfig.nodes_to_exclude),
                         extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})
        return dst
    from optimum.onnxruntime import ORTQuantizer

    with tempfile.TemporaryDirectory() as work, contextlib.chdir(work):
        shutil.copy2(src, Path(work) / "model.onnx")
        quantizer = ORTQuantizer.from_pretrained(Path(work), file_name="model.onnx")
        out = Path(work) / "out"
        quantizer.quantize(quantization_config=qconfig, save_dir=out, calibration_tensors_range=ranges)
        shutil.move(str(out / "model_quantized.onnx"), str(dst))
        if (out / "ort_config.json").is_file():
            shutil.copy2(out / "ort_config.json", Path(dst).parent / "ort_config.json")
    return dst


def quantized_node_count(path: Path) -> int:
    import onnx

    ops = {"MatMulInteger", "DynamicQuantizeLinear", "QLinearMatMul", "QuantizeLinear", "QAttention",
           "DynamicQuantizeMatMul", "MatMulIntegerToFloat", "QGemm"}
    return sum(1 for n in onnx.load(str(path), load_external_data=False).graph.node if n.op_type in ops)


def free_tmp(path: Path) -> None:
    with contextlib.suppress(OSError):
        os.remove(path)
