"""The mobile target of a bundle (`shrinkbert bundle --target mobile`): the graph in ONNX Runtime's
own format, which ONNX Runtime Mobile (Android, iOS) reads, beside the Python bundle.

    mobile/model.ort                    the bundle's graph converted by onnxruntime.tools
                                        (convert_onnx_models_to_ort: optimisations fixed at level
                                        'all' for ARM, so no x86-only layouts)
    mobile/required_operators.config    the operators and opsets the graph uses: what a minimal ONNX
                                        Runtime build needs (build.sh --minimal_build
                                        --include_ops_by_config mobile/required_operators.config)

The bundle stage runs the .ort file in ONNX Runtime on the same parity rows as the bundle and refuses
to write a bundle whose .ort outputs differ (compress/bundle.py). Tokenizing on a phone is the app's:
tokenizer.json is the Hugging Face tokenizers file the Python bundle reads.
"""
from __future__ import annotations

import contextlib
import io
import shutil
import tempfile
from pathlib import Path

MOBILE_DIR = "mobile"
ORT_FILE = f"{MOBILE_DIR}/model.ort"
OPERATORS_FILE = f"{MOBILE_DIR}/required_operators.config"
TARGET_PLATFORM = "arm"  # phones; 'amd64' would fix x86-only layouts into the file


def write_mobile_layout(bundle: Path, model_file: Path) -> dict:
    """Convert `model_file` (the bundle's ONNX graph) into bundle/mobile/; returns labels.json's
    "mobile" entry."""
    from onnxruntime.tools.convert_onnx_models_to_ort import OptimizationStyle, convert_onnx_models_to_ort

    with tempfile.TemporaryDirectory(dir=bundle) as scratch:  # the converter names its files after the graph
        source = Path(scratch) / "model.onnx"
        shutil.copy2(model_file, source)
        converted = Path(scratch) / "converted"
        with contextlib.redirect_stdout(io.StringIO()):  # it prints each step; the stage logs the result
            convert_onnx_models_to_ort(source, output_dir=converted, optimization_styles=[OptimizationStyle.Fixed],
                                       target_platform=TARGET_PLATFORM)
        (bundle / MOBILE_DIR).mkdir(exist_ok=True)
        shutil.move(converted / "model.ort", bundle / ORT_FILE)
        config = (converted / "model.required_operators.config").read_text()
        # its comment names the graph it read, here a scratch path: name the bundle's file instead
        (bundle / OPERATORS_FILE).write_text("\n".join(f"# - {ORT_FILE}" if line.startswith("# - ") else line
                                                       for line in config.splitlines()) + "\n")
    return {"mobile": {"model_file": ORT_FILE, "required_operators": OPERATORS_FILE,
                       "optimization": f"fixed, level all, {TARGET_PLATFORM}"}}

