"""compress/: structured pruning, sparsify, vocab trimming, ONNX export, int8, edge bundle (tiny models)."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from fixtures import import_blocker, restamp

from shrinkbert.core.errors import ShrinkbertError

ROOT = Path(__file__).resolve().parents[1]


def metrics(path) -> dict:
    return json.loads((Path(path) / "shrinkbert.json").read_text())["metrics"]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    """A tiny BERT whose weights and biases are all non-zero (as after training), so calibration
    histograms and importance scores see real spreads."""
    from fixtures import make_decisive

    return make_decisive(tmp_path_factory.mktemp("cmp") / "model")


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> str:
    from fixtures import write_tiny_csv

    return str(write_tiny_csv(tmp_path_factory.mktemp("cmpdata") / "tiny.csv", n=160))


@pytest.fixture(scope="module")
def onnx_dir(model_dir, data, tmp_path_factory) -> Path:
    from shrinkbert.compress import export

    # unfused: static int8, --exclude and accuracy-aware mode need the graph's module names
    return export.run(export.Config(model=str(model_dir), output_dir=str(tmp_path_factory.mktemp("onnx") / "fp32"),
                                    task=data, parity_rows=24, optimization="none"))


@pytest.fixture(scope="module")
def int8_dir(onnx_dir, data, tmp_path_factory) -> Path:
    from shrinkbert.compress import quantize

    return quantize.run(quantize.Config(model=str(onnx_dir), output_dir=str(tmp_path_factory.mktemp("q") / "int8"),
                                        task=data, max_eval_rows=32))


def test_export_parity_and_dynamic_axes(onnx_dir):
    from optimum.onnxruntime import ORTModelForSequenceClassification

    m = metrics(onnx_dir)
    assert m["parity"]["passed"] and m["parity"]["max_abs_logit_diff"] < 1e-4
    assert m["parity"]["label_agreement"] == 1.0
    assert m["dynamic_axes"]["input_ids"] == ["batch_size", "sequence_length"]
    assert ORTModelForSequenceClassification.from_pretrained(onnx_dir).config.id2label[1] == "positive"


def test_export_parity_failure_writes_nothing(model_dir, tmp_path):
    from shrinkbert.compress import export

    out = tmp_path / "bad"
    with pytest.raises(ShrinkbertError, match="parity failed"):
        export.run(export.Config(model=str(model_dir), output_dir=str(out), tolerance=-1.0, parity_rows=4))
    assert not out.exists() and not list(tmp_path.glob(".partial-*"))


def test_prune_removes_heads_and_neurons_and_still_loads_and_exports(model_dir, data, tmp_path):
    from transformers import AutoModelForSequenceClassification

    from shrinkbert.compress import export, prune

    out = prune.run(prune.Config(model=str(model_dir), output_dir=str(tmp_path / "pruned"), task=data,
                                 head_fraction=0.5, neuron_fraction=0.5, importance_rows=32, max_eval_rows=16))
    m = metrics(out)
    assert m["before"]["heads"] == 8 and m["after"]["heads"] == 4
    assert m["after"]["intermediate_size"] == 32 and m["after"]["ffn_neurons"] == 64
    assert m["after"]["num_parameters"] < m["before"]["num_parameters"]
    model = AutoModelForSequenceClassification.from_pretrained(out)  # plain transformers, no custom code
    assert [l.attention.self.num_attention_heads for l in model.bert.encoder.layer] == m["after"]["heads_per_layer"]
    assert all(h >= 1 for h in m["after"]["heads_per_layer"])
    exported = export.run(export.Config(model=str(out), output_dir=str(tmp_path / "pruned_onnx"), parity_rows=8))
    assert metrics(exported)["parity"]["passed"]


def test_head_choice_never_empties_a_layer():
    import torch

    from shrinkbert.compress.prune import choose_heads

    scores = [torch.tensor([0.01, 0.02, 0.03, 0.04]), torch.tensor([0.9, 0.8, 0.7, 0.6])]
    plan = choose_heads(scores, 0.75, "global", min_keep=1)
    assert sum(len(v) for v in plan.values()) == 6
    assert all(4 - len(plan.get(i, [])) >= 1 for i in range(2))
    assert plan[0] == [0, 1, 2]  # the weakest layer loses all but its best head
    assert choose_heads(scores, 0.5, "per_layer", 1) == {0: [0, 1], 1: [2, 3]}


def test_sparsify_reaches_sparsity_and_shrinks_gzip_only(model_dir, tmp_path):
    from shrinkbert.compress import sparsify

    out = sparsify.run(sparsify.Config(model=str(model_dir), output_dir=str(tmp_path / "sparse"), sparsity=0.6))
    m = metrics(out)
    assert abs(m["sparsity_selected"] - 0.6) < 0.01
    assert m["gzip_bytes_after"] < m["gzip_bytes_before"]
    assert m["file_bytes_after"] == m["file_bytes_before"]
    assert "latency" in m["note"]


def test_trimmed_vocab_gives_identical_logits_on_covered_text(model_dir, tmp_path):
    from shrinkbert.compress import trim_vocab
    from shrinkbert.compress.common import load_pt, torch_logits

    # An added token no special role names, as MPNet's `<unk>` beside its `[UNK]`: it is kept and remapped.
    source = tmp_path / "source"
    shutil.copytree(model_dir, source)
    model, tok = load_pt(source)
    tok.add_tokens(["<extra>"], special_tokens=True)
    model.resize_token_embeddings(len(tok))
    model.save_pretrained(source)
    tok.save_pretrained(source)
    restamp(source)
    model_dir = source
    texts = ["the movie was good", "awful plot, but a great actor!", "it is quite dull"]
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(texts) + "\n")
    out = trim_vocab.run(trim_vocab.Config(model=str(model_dir), output_dir=str(tmp_path / "trim"),
                                           corpus_files=[str(corpus)], keep_ascii_chars=False))
    m = metrics(out)
    assert m["vocab_after"] < m["vocab_before"] / 2
    rows = [{"text": t, "text_pair": None, "label": None} for t in texts + ["good", "the plot"]]
    old_model, old_tok = load_pt(model_dir)
    new_model, new_tok = load_pt(out)
    assert new_model.config.vocab_size == m["vocab_after"] == len(new_tok)
    assert new_tok.convert_ids_to_tokens(new_tok.convert_tokens_to_ids("<extra>")) == "<extra>"
    np.testing.assert_allclose(torch_logits(new_model, new_tok, rows), torch_logits(old_model, old_tok, rows), atol=1e-6)


def test_dynamic_int8_is_smaller_and_runs(onnx_dir, int8_dir):
    from optimum.onnxruntime import ORTModelForSequenceClassification

    from shrinkbert.compress.common import onnx_file

    m = metrics(int8_dir)
    assert onnx_file(int8_dir).stat().st_size < onnx_file(onnx_dir).stat().st_size
    assert m["quantized_nodes"] > 0 and m["vs_fp32"]["label_agreement"] >= 0.9
    model = ORTModelForSequenceClassification.from_pretrained(int8_dir)
    assert model.config.num_labels == 2


def test_static_int8_with_npz_calibration_and_relative_paths(onnx_dir, tmp_path, monkeypatch):
    from transformers import AutoTokenizer

    from shrinkbert.compress import quantize
    from shrinkbert.compress.common import encode, load_rows

    tok = AutoTokenizer.from_pretrained(onnx_dir)
    rows, _ = load_rows(None)
    np.savez(tmp_path / "calib.npz", **dict(encode(tok, rows, 32, padding="max_length")))
    shutil.copytree(onnx_dir, tmp_path / "fp32")
    monkeypatch.chdir(tmp_path)  # relative paths must survive the temp-dir work of calibration
    out = quantize.run(quantize.Config(model="fp32", output_dir="static", approach="static",
                                       calibration_data="calib.npz", min_calibration_rows=8,
                                       per_channel=True, max_eval_rows=16))
    m = metrics(out)
    assert m["approach"] == "static" and m["quantized_nodes"] > 0
    # static int8 must keep what the model predicts, not only run (the fp32 logits are far apart)
    assert m["eval_rows"] == 16 and m["vs_fp32"]["label_agreement"] >= 0.9
    # int8 moves these logits by ~0.005 (measured): at most one of the 16 rows may flip, and accuracy can
    # move by no more than the rows that flipped
    assert m["vs_fp32"]["label_agreement"] >= 1 - 1 / m["vs_fp32"]["rows"], m["vs_fp32"]
    assert abs(m["val_accuracy_loss_points"]) <= 100 * (1 - m["vs_fp32"]["label_agreement"]) + 1e-6, m


def test_calibration_of_wrong_shape_or_too_small_is_one_clear_error(onnx_dir, tmp_path):
    from shrinkbert.compress import quantize

    np.savez(tmp_path / "flat.npz", input_ids=np.arange(64), attention_mask=np.ones(64, dtype=np.int64))
    with pytest.raises(ShrinkbertError, match="2-D integer array"):
        quantize.run(quantize.Config(model=str(onnx_dir), output_dir=str(tmp_path / "o1"), approach="static",
                                     calibration_data=str(tmp_path / "flat.npz")))
    np.savez(tmp_path / "few.npz", input_ids=np.ones((3, 8), dtype=np.int64), attention_mask=np.ones((3, 8), dtype=np.int64))
    with pytest.raises(ShrinkbertError, match="needs at least"):
        quantize.run(quantize.Config(model=str(onnx_dir), output_dir=str(tmp_path / "o2"), approach="static",
                                     calibration_data=str(tmp_path / "few.npz")))
    np.savez(tmp_path / "nomask.npz", ids=np.ones((40, 8), dtype=np.int64))
    with pytest.raises(ShrinkbertError, match="lacks model input"):
        quantize.run(quantize.Config(model=str(onnx_dir), output_dir=str(tmp_path / "o3"), approach="static",
                                     calibration_data=str(tmp_path / "nomask.npz")))
    assert not (tmp_path / "o1").exists()


def test_corrupt_onnx_is_one_clear_error(onnx_dir, tmp_path, capsys, monkeypatch):
    from shrinkbert.compress import quantize

    broken = tmp_path / "broken"
    shutil.copytree(onnx_dir, broken)
    data = (broken / "model.onnx").read_bytes()
    (broken / "model.onnx").write_bytes(data[: len(data) // 3])
    with pytest.raises(ShrinkbertError, match=r"model.onnx has [\d,]+ bytes, its shrinkbert.json recorded"):
        quantize.run(quantize.Config(model=str(broken), output_dir=str(tmp_path / "q")))  # verify on load
    monkeypatch.setenv("SHRINKBERT_NO_VERIFY", "1")  # past the manifest check, the graph's own load says it
    with pytest.raises(ShrinkbertError, match="corrupt or truncated"):
        quantize.run(quantize.Config(model=str(broken), output_dir=str(tmp_path / "q")))
    assert quantize.main(["--model", str(broken), "--output-dir", str(tmp_path / "q")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:") and "corrupt" in err[0]


def test_accuracy_aware_speaks_module_names(onnx_dir, data, tmp_path):
    from shrinkbert.compress import quantize

    out = quantize.run(quantize.Config(model=str(onnx_dir), output_dir=str(tmp_path / "aa"), task=data,
                                       accuracy_aware=True, tolerance=0.0, max_eval_rows=16,
                                       exclude=["encoder.layer.0.attention"]))
    m = metrics(out)
    modules = [row["module"] for row in m["accuracy_aware"]["sensitivity"]]
    assert "encoder.layer.1.intermediate" in modules and "classifier" in modules
    assert "encoder.layer.0.attention" not in modules  # excluded by the user, not probed
    assert not any("/" in name or "MatMul" in name for name in modules + m["kept_fp32"])
    assert m["kept_fp32"][0] == "encoder.layer.0.attention"
    assert m["accuracy_aware"]["met"]
    with pytest.raises(ShrinkbertError, match="no module 'encoder.layer.9"):
        quantize.run(quantize.Config(model=str(onnx_dir), output_dir=str(tmp_path / "x"),
                                     exclude=["encoder.layer.9.attention"]))


BLOCKED_RUNNER = import_blocker() + """
import json, sys
sys.path.insert(0, sys.argv[1])
from predict import Predictor
p = Predictor(sys.argv[1])
texts = json.loads(sys.argv[2])
print(json.dumps({"logits": p.logits(texts).tolist(), "pred": p.predict(texts),
                  "leaked": sorted(m for m in sys.modules if m.split(".")[0] in ("torch", "transformers"))}))
"""


def test_bundle_checks_its_labels_against_the_pytorch_reference(int8_dir, model_dir, data, tmp_path):
    from shrinkbert.compress import bundle
    from fixtures import flipped_copy

    # the int8 bundle against its own fp32 PyTorch model: labels agree on (nearly) every row
    out = bundle.run(bundle.Config(model=str(int8_dir), output_dir=str(tmp_path / "edge"), task=data,
                                   reference=str(model_dir), parity_rows=16))
    recorded = metrics(out)["vs_reference"]
    assert recorded["rows"] == 16 and recorded["label_agreement"] >= 0.9 and recorded["passed"]
    # against a reference whose labels are swapped (classifier negated), the same check must fail
    flipped = flipped_copy(model_dir, tmp_path / "flipped")
    with pytest.raises(ShrinkbertError, match=r"labels agree with .* it decides .*need 90%"):
        bundle.run(bundle.Config(model=str(int8_dir), output_dir=str(tmp_path / "strict"), task=data,
                                 reference=str(flipped), parity_rows=16))
    assert not (tmp_path / "strict").exists()


def test_bundle_runs_without_torch_and_agrees_with_onnx(int8_dir, onnx_dir, data, tmp_path):
    from transformers import AutoTokenizer

    from shrinkbert.compress import bundle
    from shrinkbert.compress.common import ort_logits, ort_session

    out = bundle.run(bundle.Config(model=str(int8_dir), output_dir=str(tmp_path / "edge"), task=data,
                                   reference=str(onnx_dir), parity_rows=16))
    assert {p.name for p in out.iterdir()} >= {"model.onnx", "tokenizer.json", "labels.json", "predict.py",
                                               "requirements.txt", "shrinkbert.json"}
    assert metrics(out)["vs_source"]["passed"]
    texts = ["the movie was good", "a dull, boring plot and a flat actor"]
    proc = subprocess.run([sys.executable, "-c", BLOCKED_RUNNER, str(out), json.dumps(texts)],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["leaked"] == []
    rows = [{"text": t, "text_pair": None, "label": None} for t in texts]
    expected = ort_logits(ort_session(int8_dir), AutoTokenizer.from_pretrained(int8_dir), rows, batch_size=2)
    np.testing.assert_allclose(np.asarray(result["logits"]), expected, atol=1e-4)
    assert [r["label"] for r in result["pred"]] == [["negative", "positive"][i] for i in expected.argmax(-1)]
    cli = subprocess.run([sys.executable, str(out / "predict.py"), "the movie was good"], capture_output=True,
                         text=True, timeout=120, cwd=tmp_path)
    assert cli.returncode == 0 and cli.stdout.split("\t")[0] in ("negative", "positive")


def test_undoing_skip_layer_norm_computes_the_same(tmp_path):
    """SkipLayerNormalization (with its bias, and its residual-sum output read by a later node) undone
    into Add + LayerNormalization gives the same outputs; a node whose mean output is read stays fused."""
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    from shrinkbert.compress.skip_layer_norm import unfuse

    rng = np.random.default_rng(0)
    weights = [numpy_helper.from_array(rng.standard_normal(8).astype(np.float32), name) for name in ("g", "b", "bias")]
    x, skip = (helper.make_tensor_value_info(n, TensorProto.FLOAT, ["batch", "seq", 8]) for n in ("x", "skip"))
    outs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("y", "z")]

    def graph(read_mean: bool):
        nodes = [helper.make_node("SkipLayerNormalization", ["x", "skip", "g", "b", "bias"],
                                  ["normed", "mean" if read_mean else "", "", "sum"], domain="com.microsoft",
                                  epsilon=1e-5, name="sln"),
                 helper.make_node("Add", ["normed", "sum"], ["y"]),
                 helper.make_node("Identity", ["mean" if read_mean else "normed"], ["z"])]
        return helper.make_model(helper.make_graph(nodes, "g", [x, skip], outs, initializer=weights),
                                 opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)],
                                 ir_version=9)

    feed = {"x": rng.standard_normal((2, 3, 8)).astype(np.float32), "skip": rng.standard_normal((2, 3, 8)).astype(np.float32)}

    def run(model):
        return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feed)

    fused = graph(read_mean=False)
    expected = run(fused)
    undone = onnx.load_from_string(fused.SerializeToString())
    assert unfuse(undone) == 1
    assert "SkipLayerNormalization" not in {n.op_type for n in undone.graph.node}
    for got, want in zip(run(undone), expected):
        np.testing.assert_allclose(got, want, atol=1e-5)
    kept = graph(read_mean=True)
    assert unfuse(kept) == 0 and "SkipLayerNormalization" in {n.op_type for n in kept.graph.node}


def test_o2_export_then_fused_int8_keeps_labels(model_dir, data, tmp_path):
    """The demo's edge path: ONNX export with O2 fusions, then dynamic int8 on the fused graph."""
    import onnx

    from shrinkbert.compress import export, quantize

    fused = export.run(export.Config(model=str(model_dir), output_dir=str(tmp_path / "o2"), task=data,
                                     parity_rows=16, optimization="O2"))
    m = metrics(fused)
    assert m["optimization"] == "O2" and m["parity"]["passed"] and m["parity"]["label_agreement"] == 1.0
    ops = {node.op_type for node in onnx.load(str(fused / "model.onnx")).graph.node}
    assert "Attention" in ops, f"O2 fused nothing: {sorted(ops)}"
    # the residual Add + LayerNorm fusion: kept or undone by measurement on this host, and the graph says which
    chosen = m["skip_layer_norm"]
    assert chosen["kept"] in ("fused", "unfused") and chosen["nodes"] > 0
    assert chosen["fused_ms_b1"] > 0 and chosen["unfused_ms_b1"] > 0 and "family" in chosen["machine"]
    assert ("SkipLayerNormalization" in ops) == (chosen["kept"] == "fused"), (chosen, sorted(ops))
    assert not list((fused).glob("*.unfused.onnx"))  # the twin timed against it is gone
    told = export.run(export.Config(model=str(model_dir), output_dir=str(tmp_path / "o2-fused"), task=data,
                                    parity_rows=8, optimization="O2", skip_layer_norm="fused"))
    assert metrics(told)["skip_layer_norm"] == {"kept": "fused", "chosen_by": "--skip-layer-norm fused"}
    assert "SkipLayerNormalization" in {node.op_type for node in onnx.load(str(told / "model.onnx")).graph.node}
    # its int8 graph keeps what the export was told; the export's own timing would leave quantize to time its own
    told_int8 = quantize.run(quantize.Config(model=str(told), output_dir=str(tmp_path / "o2-fused-int8")))
    assert metrics(told_int8)["skip_layer_norm"]["kept"] == "fused"
    # an int8 graph with the node is timed both ways without typing it (ORT's inference stops at its int8 ops)
    from shrinkbert.compress import skip_layer_norm

    graph = tmp_path / "int8-timed" / "model.onnx"
    graph.parent.mkdir()
    shutil.copy2(told_int8 / "model.onnx", graph)
    untyped = onnx.load(str(graph))
    assert skip_layer_norm.unfuse(untyped) > 0
    import contextlib

    (tmp_path / "cwd").mkdir()
    with contextlib.chdir(tmp_path / "cwd"), pytest.raises(Exception):
        skip_layer_norm.typed(untyped)  # ORT's inference stops at int8 ops, and leaves nothing in the working folder
    assert not list((tmp_path / "cwd").iterdir())
    timed = skip_layer_norm.choose(graph, 32, 1, 50, needs_types=False)  # ids below the tiny vocabulary's 99
    assert timed["kept"] in ("fused", "unfused") and timed["fused_ms_b1"] > 0 and timed["unfused_ms_b1"] > 0
    assert ("SkipLayerNormalization" in {n.op_type for n in onnx.load(str(graph)).graph.node}) == (timed["kept"] == "fused")
    int8 = quantize.run(quantize.Config(model=str(fused), output_dir=str(tmp_path / "o2-int8"), task=data,
                                        max_eval_rows=32))
    int8_ops = {node.op_type for node in onnx.load(str(int8 / "model.onnx")).graph.node}
    assert "QAttention" in int8_ops, f"int8 did not quantize the fused attention: {sorted(int8_ops)}"
    assert (int8 / "model.onnx").stat().st_size < (fused / "model.onnx").stat().st_size
    q = metrics(int8)
    if chosen["kept"] == "fused":  # the fp32 graph kept the fusion: the int8 graph was timed both ways itself
        assert q["skip_layer_norm"]["kept"] in ("fused", "unfused") and q["skip_layer_norm"]["unfused_ms_b1"] > 0, q
        assert ("SkipLayerNormalization" in int8_ops) == (q["skip_layer_norm"]["kept"] == "fused")
    else:
        assert "skip_layer_norm" not in q and "SkipLayerNormalization" not in int8_ops
    # as above: at most one flipped row, and accuracy moves only by the rows that flipped
    assert q["vs_fp32"]["label_agreement"] >= 1 - 1 / q["vs_fp32"]["rows"], q["vs_fp32"]
    assert abs(q["val_accuracy_int8"] - q["val_accuracy_fp32"]) <= 1 - q["vs_fp32"]["label_agreement"] + 1e-9, q
