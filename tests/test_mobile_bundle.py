"""The mobile target: `bundle --target mobile` writes ONNX Runtime Mobile's .ort file and
the required-operators config a minimal build reads, and the bundle stage checks the .ort file's
outputs against the bundle's on its parity rows (long texts included) before writing anything."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest


@pytest.fixture(scope="module")
def int8_model(tmp_path_factory) -> tuple[Path, Path]:
    import shrinkbert
    from fixtures import make_tiny_bert, write_tiny_csv

    root = tmp_path_factory.mktemp("mobile")
    task = write_tiny_csv(root / "tiny.csv", n=96)
    onnx = shrinkbert.export(model=str(make_tiny_bert(root / "model")), output_dir=str(root / "onnx"), task=str(task))
    return Path(shrinkbert.quantize(model=str(onnx.path), output_dir=str(root / "int8"), task=str(task)).path), task


def test_the_mobile_bundle_holds_an_ort_file_that_answers_as_the_bundle(int8_model, tmp_path):
    import shrinkbert
    from shrinkbert.compress.edge_predictor import Predictor

    int8, task = int8_model
    bundle = shrinkbert.bundle(model=str(int8), output_dir=str(tmp_path / "bundle"), task=str(task), target="mobile",
                               max_length=32, spin="on")
    root = Path(bundle.path)
    meta = json.loads((root / "labels.json").read_text())
    assert meta["mobile"]["model_file"] == "mobile/model.ort"
    ort_file, operators = root / "mobile" / "model.ort", root / "mobile" / "required_operators.config"
    assert ort_file.read_bytes()[4:8] == b"ORTM"  # ONNX Runtime's flatbuffer format, not an ONNX protobuf
    ops = operators.read_text()
    assert "ai.onnx;" in ops and any(op in ops for op in ("MatMulInteger", "DynamicQuantizeMatMul", "QAttention"))
    assert str(tmp_path) not in ops  # the converter's comment names the bundle's file, not a scratch path
    vs_mobile = bundle.metrics["vs_source"]["mobile_ort"]
    long_rows = bundle.metrics["vs_source"]["long_texts"]["rows"]  # texts at and past max_length are in it too
    assert vs_mobile["rows"] == bundle.metrics["vs_source"]["rows"] + long_rows and long_rows > 0
    assert vs_mobile["max_abs_logit_diff"] <= 1e-4
    assert "mobile/model.ort within" in bundle.checks[0]["detail"]
    assert "mobile/model.ort" in json.loads((root / "shrinkbert.json").read_text())["files"]  # verified on load too
    # the .ort file run on its own gives the Python bundle's probabilities
    predictor, on_ort = Predictor(root), Predictor(root, model_file="mobile/model.ort")
    texts = ["a warm and funny film", "dull, slow and far too long " * 20]
    expected = predictor.probabilities(predictor.encode(texts))
    with pytest.raises(Exception, match="ONNXRuntimeError"):  # the named file is the one opened, or none
        Predictor(root, model_file="mobile/none.ort")
    assert np.allclose(on_ort.probabilities(on_ort.encode(texts)), expected, atol=1e-5)


def test_a_mobile_file_that_differs_from_the_bundle_writes_nothing(int8_model, tmp_path, monkeypatch):
    """Watched to fail: an .ort converted from another graph (here: the graph with its first
    weights zeroed) is refused by the bundle's own check."""
    import onnx
    from onnx import numpy_helper

    import shrinkbert
    from shrinkbert.compress import mobile_layout
    from shrinkbert.core.errors import ShrinkbertError

    int8, task = int8_model
    original = mobile_layout.write_mobile_layout

    def from_another_graph(bundle, model_file):
        other = onnx.load(str(model_file))
        first = next(t for t in other.graph.initializer if numpy_helper.to_array(t).dtype == np.float32
                     and numpy_helper.to_array(t).size > 1)  # a LayerNorm's scale, say
        first.CopyFrom(numpy_helper.from_array(np.zeros_like(numpy_helper.to_array(first)), first.name))
        changed = Path(bundle).parent / "changed.onnx"
        onnx.save(other, str(changed))
        return original(bundle, changed)

    monkeypatch.setattr("shrinkbert.compress.bundle_logits.write_mobile_layout", from_another_graph)
    with pytest.raises(ShrinkbertError, match="bundle parity failed"):
        shrinkbert.bundle(model=str(int8), output_dir=str(tmp_path / "bundle"), task=str(task), target="mobile",
                          max_length=32, spin="on")
    assert not (tmp_path / "bundle").exists()
