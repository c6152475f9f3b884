"""A transformer embedder exported as one ONNX graph (pooling and normalisation inside): its vectors
match PyTorch's; the int8 twin stays close; a missing graph is one line."""
from __future__ import annotations

import numpy as np
import onnx
import pytest

import shrinkbert
from shrinkbert.compress.embedding_onnx import OUTPUT, OnnxEmbedder
from shrinkbert.core.kinds.embedder import Embedder, PoolingSpec, write_st_layout
from shrinkbert.core.errors import ShrinkbertError
from fixtures import make_tiny_bert

TEXTS = ["a good movie", "the plot was very dull and the actor was flat", "funny", ""]


@pytest.mark.parametrize("spec", [PoolingSpec("mean", True), PoolingSpec("cls", False)])
def test_the_graph_outputs_the_sentence_vector(tmp_path, spec):
    model = make_tiny_bert(tmp_path / "m", with_manifest=False)
    write_st_layout(model, spec, dim=32)
    exported = shrinkbert.export(model=str(model), output_dir=str(tmp_path / "onnx"), optimization="none")
    assert exported.metrics["parity"]["passed"] and exported.metrics["parity"]["max_abs_logit_diff"] <= 1e-4
    assert exported.metrics["parity"]["long_rows"] >= 2  # texts at and past max_length are held to it too
    graph = onnx.load(str(tmp_path / "onnx" / "model.onnx"))
    assert [o.name for o in graph.graph.output] == [OUTPUT]
    assert len(graph.graph.output[0].type.tensor_type.shape.dim) == 2  # [batch, dim]: pooled inside
    ours = OnnxEmbedder(tmp_path / "onnx").encode(TEXTS, batch_size=3)
    assert ours.shape == (len(TEXTS), 32)
    np.testing.assert_allclose(ours, Embedder.load(model).encode(TEXTS), atol=1e-4)
    assert (tmp_path / "onnx" / "modules.json").is_file()  # the pooling files travel with the graph

    int8 = shrinkbert.quantize(model=str(tmp_path / "onnx"), output_dir=str(tmp_path / "int8"))
    assert int8.metrics["isa"] and int8.manifest["kind"] == "embedding"
    assert [c["name"] for c in int8.manifest["checks"]] == ["int8_agreement"] and int8.manifest["checks"][0]["passed"]
    assert (tmp_path / "int8" / "modules.json").is_file()  # the pooling files travel with the int8 graph too
    quantized = OnnxEmbedder(tmp_path / "int8").encode(TEXTS)
    assert quantized.shape == ours.shape
    cosine = (quantized * ours).sum(1) / np.linalg.norm(quantized, axis=1) / np.linalg.norm(ours, axis=1)
    assert cosine.min() > 0.95
    assert any(node.op_type in ("MatMulInteger", "DynamicQuantizeLinear")
               for node in onnx.load(str(tmp_path / "int8" / "model.onnx")).graph.node)


def test_quantizing_a_folder_without_a_graph_is_one_line(tmp_path):
    with pytest.raises(ShrinkbertError, match="0 .onnx files"):
        shrinkbert.quantize(model=str(tmp_path), output_dir=str(tmp_path / "int8"))


def test_export_of_a_sentence_transformers_folder_as_it_ships_gives_the_vector_graph(tmp_path):
    """A folder with modules.json and no manifest (all-MiniLM-L6-v2 as installed) is exported as an
    embedding model: it has no classifier head, its sentence vectors are what it gives."""
    from shrinkbert.compress.export import main
    from shrinkbert.core.artifacts import read_manifest

    model = make_tiny_bert(tmp_path / "st", with_manifest=False)
    write_st_layout(model, PoolingSpec("mean", True), dim=32)
    assert main(["--model", str(model), "--output-dir", str(tmp_path / "onnx")]) == 0
    manifest = read_manifest(tmp_path / "onnx")
    assert manifest["stage"] == "export" and manifest["kind"] == "embedding"
    np.testing.assert_allclose(OnnxEmbedder(tmp_path / "onnx").encode(TEXTS), Embedder.load(model).encode(TEXTS),
                               atol=1e-4)
