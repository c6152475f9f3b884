"""Pruning a sentence-embedding model (compress/prune.py, the stage every kind uses) and distilling into it (recovery).

A tiny random BERT written as a sentence-transformers folder (modules.json, mean pooling, normalised,
no manifest: the layout all-MiniLM-L6-v2 ships in) stands in for the teacher; the importance rows
and validation pairs are the real STS-B from ../shared/data, cut small.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from fixtures import make_tiny_bert, run_cli, tiny_sentences
from shrinkbert.compress.export import main as export
from shrinkbert.compress.prune import main as prune
from shrinkbert.core.artifacts import read_manifest
from shrinkbert.core.kinds.embedder import Embedder, PoolingSpec, write_st_layout
from shrinkbert.core.kinds.embedding import NEIGHBOUR_SCALE, neighbour_loss
from shrinkbert.students.distill import main as distill

ROOT = Path(__file__).resolve().parents[1]
STSB = ROOT.parent / "shared" / "data" / "stsb"
needs_stsb = pytest.mark.skipif(not STSB.is_dir(), reason=f"{STSB} is absent (../shared/data is not beside the clone)")
SMALL = ["--importance-rows", "24", "--max-eval-rows", "24", "--batch-size", "8"]


def sentence_transformers_folder(folder: Path, silent_head: tuple[int, int] | None = None) -> Path:
    """A tiny BERT (2 layers of 4 heads, hidden 32) in the sentence-transformers layout, no manifest;
    silent_head=(layer, head): that head's value weights are zeroed, so its output is always zero."""
    make_tiny_bert(folder, with_manifest=False)
    embedder = Embedder.load(folder)
    if silent_head is not None:
        layer, head = silent_head
        value = embedder.model.encoder.layer[layer].attention.self.value
        size = value.out_features // 4
        with torch.no_grad():
            value.weight[head * size:(head + 1) * size] = 0
            value.bias[head * size:(head + 1) * size] = 0
    embedder.model.save_pretrained(folder, safe_serialization=True)  # a bare BertModel, as MiniLM ships
    write_st_layout(folder, PoolingSpec(), embedder.model.config.hidden_size)
    return folder


def test_neighbour_loss_is_cross_entropy_of_scaled_cosines_with_itself_as_the_answer():
    vectors = torch.tensor([[3.0, 0.0], [1.0, 1.0], [0.0, -2.0]], requires_grad=True)
    raw = vectors.detach().double().numpy()
    unit = raw / np.linalg.norm(raw, axis=1, keepdims=True)
    logits = NEIGHBOUR_SCALE * unit @ unit.T
    by_hand = np.mean([np.log(np.exp(row).sum()) - row[i] for i, row in enumerate(logits)])
    loss = neighbour_loss(vectors)
    assert float(loss.detach()) == pytest.approx(by_hand, abs=1e-6)
    loss.backward()  # not zero at the model's own vectors: a gradient pruning can rank by
    assert float(vectors.grad.abs().sum()) > 1e-6


@needs_stsb
def test_prune_removes_the_silent_head_first_keeps_the_vectors_and_a_sentence_transformers_folder(tmp_path):
    teacher = sentence_transformers_folder(tmp_path / "teacher", silent_head=(1, 2))
    out = tmp_path / "pruned"
    assert prune(["--model", str(teacher), "--task", str(STSB), "--head-fraction", "0.125", "--neuron-fraction", "0",
                  *SMALL, "--output-dir", str(out)]) == 0
    manifest = read_manifest(out)
    assert manifest["stage"] == "prune" and manifest["kind"] == "embedding"
    metrics = manifest["metrics"]
    assert metrics["heads_removed"] == {"1": [2]}  # 1 of 8 heads: the one whose output is always zero
    assert metrics["after"]["heads_per_layer"] == [4, 3] and metrics["eval_rows"] == 24
    # a head that never contributed is gone and nothing else: the same vectors, the same Spearman
    assert metrics["vs_unpruned"]["max_abs_logit_diff"] < 1e-5 and metrics["vs_unpruned"]["rows"] == 48
    assert metrics["val_spearman_after_no_recovery"] == pytest.approx(metrics["val_spearman_before"], abs=1e-3)
    assert metrics["val_accuracy_before"] is None  # Spearman ranks pairs together: no per-pair accuracy
    assert (out / "modules.json").is_file() and manifest["data"]["task"] == str(STSB.resolve())
    sentences = ["a man plays a guitar", "rain by friday"]
    pruned = Embedder.load(out)
    assert {int(k): v for k, v in pruned.model.config.pruned_heads.items()} == {1: [2]}
    assert np.allclose(pruned.encode(sentences), Embedder.load(teacher).encode(sentences), atol=1e-5)


@needs_stsb
def test_a_pruned_embedding_model_exports_and_recovers_by_distillation_into_it(tmp_path, cache_env):
    teacher = sentence_transformers_folder(tmp_path / "teacher")
    pruned = tmp_path / "pruned"
    assert prune(["--model", str(teacher), "--task", str(STSB), "--head-fraction", "0.25", "--neuron-fraction", "0.5",
                  *SMALL, "--output-dir", str(pruned)]) == 0
    assert export(["--model", str(pruned), "--output-dir", str(tmp_path / "onnx")]) == 0
    assert all(c["passed"] for c in read_manifest(tmp_path / "onnx")["checks"])  # vectors match PyTorch
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(text for text, _ in tiny_sentences(60, seed=5)) + "\n")
    recovered = tmp_path / "recovered"
    assert distill(["--objective", "vectors", "--teacher", str(teacher), "--student", str(pruned), "--corpus", str(corpus),
                    "--task", str(STSB), "--epochs", "1", "--batch-size", "16", "--max-eval-rows", "20",
                    "--output-dir", str(recovered)]) == 0
    manifest = read_manifest(recovered)
    assert {Path(p["path"]).name for p in manifest["parents"]} == {"teacher", "pruned"}
    assert manifest["init"] == {"from": str(pruned), "shape": "its own"}
    config, pruned_config = (json.loads((folder / "config.json").read_text()) for folder in (recovered, pruned))
    assert config["intermediate_size"] == pruned_config["intermediate_size"] == 32  # the pruned shape, kept
    assert config["pruned_heads"] == pruned_config["pruned_heads"] and sum(map(len, config["pruned_heads"].values())) == 2


def test_prune_errors_are_one_line_and_write_nothing(tmp_path, capsys):
    teacher = sentence_transformers_folder(tmp_path / "teacher")
    done = run_cli(["prune", "--model", str(teacher), "--output-dir", str(tmp_path / "x")], tmp_path)
    assert done.returncode == 2 and done.stderr.strip().startswith("error: ") and "--task" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and not (tmp_path / "x").exists()
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("a cat sat\nthe market fell\n")
    assert distill(["--objective", "vectors", "--teacher", str(teacher), "--student", str(teacher), "--layers", "1",
                    "--corpus", str(corpus), "--output-dir", str(tmp_path / "y")]) == 2
    assert "drop --layers" in capsys.readouterr().err and not (tmp_path / "y").exists()
