"""The query adapter (students/query_adapter.py, `distill --query-corpus`): the map it fits, the weight
it chooses without labels, the projection it folds into, and a student that carries it through export
as sentence-transformers reads it. Tiny random models only."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from fixtures import make_tiny_bert, tiny_sentences
from shrinkbert.core.embedder import Embedder
from shrinkbert.students.query_adapter import (LAMBDAS, choose_adapter, fit_adapter, fold_into_dense, unit,
                                               validation_rows)


def _rotated(rows: int = 400, dim: int = 8, seed: int = 0):
    """Unit student rows and the teacher's: the same rows turned by a fixed rotation."""
    rng = np.random.default_rng(seed)
    student = unit(rng.normal(size=(rows, dim)))
    rotation = np.linalg.qr(rng.normal(size=(dim, dim)))[0]
    return student, student @ rotation, rotation


def test_the_adapter_learns_a_rotation_and_shrinks_to_the_identity():
    student, teacher, rotation = _rotated()
    np.testing.assert_allclose(fit_adapter(student, teacher, 1e-9), rotation, atol=1e-6)
    assert np.abs(fit_adapter(student, teacher, 1e9) - np.eye(8)).max() < 1e-5  # all shrinkage: the identity
    np.testing.assert_allclose(fit_adapter(student, student, 10.0), np.eye(8), atol=1e-9)  # nothing to correct


def test_the_weight_is_chosen_on_held_out_texts_by_agreement_with_the_teacher():
    student, teacher, rotation = _rotated()
    validation = np.arange(len(student)) % 5 == 0
    adapter, record = choose_adapter(student, teacher, validation)
    assert record["lambda"] == LAMBDAS[0]  # an exact rotation: the least shrinkage fits best
    assert record["validation_agreement"]["after"] > 0.99 > record["validation_agreement"]["before"]
    # teacher = student + noise the texts cannot predict: shrinking towards the identity wins
    rng = np.random.default_rng(1)
    noisy = unit(student + 0.8 * rng.normal(size=student.shape))
    _, record = choose_adapter(student[:60], noisy[:60], validation[:60])
    assert record["lambda"] > LAMBDAS[0]
    assert record["texts"] == 60 and record["validation_texts"] == 12


def test_the_validation_fifth_depends_on_each_text_only():
    texts = [f"question {i}?" for i in range(500)]
    fifth = validation_rows(texts)
    assert 60 < fifth.sum() < 140
    assert np.array_equal(validation_rows(texts[::-1]), fifth[::-1])


@pytest.mark.parametrize("dense_in", [None, 6])
def test_folding_applies_the_projection_then_the_adapter(dense_in):
    torch.manual_seed(0)
    adapter = np.random.default_rng(2).normal(size=(4, 4))
    dense = torch.nn.Linear(dense_in, 4) if dense_in else None
    folded = fold_into_dense(dense, adapter, hidden=4)
    x = torch.randn(5, dense_in or 4)
    before = (dense(x) if dense is not None else x).detach().numpy()
    np.testing.assert_allclose(folded(x).detach().numpy(), before @ adapter, atol=1e-5)


def test_distill_with_a_query_corpus_folds_the_adapter_and_export_keeps_it(tmp_path, capsys):
    import shrinkbert
    from shrinkbert.compress.embedding_onnx import OnnxEmbedder
    from shrinkbert.students.distill import main

    teacher = make_tiny_bert(tmp_path / "teacher", hidden=32, layers=2, intermediate=64)
    sentences = [text for text, _ in tiny_sentences(48, seed=1)]
    queries = [f"what is {text}?" for text, _ in tiny_sentences(80, seed=2)]
    (tmp_path / "lines.txt").write_text("\n".join(sentences))
    (tmp_path / "queries.txt").write_text("\n".join(queries))
    base = ["--mode", "embeddings", "--teacher", str(teacher), "--corpus", str(tmp_path / "lines.txt"),
            "--layers", "1", "--epochs", "1", "--batch-size", "16"]
    assert main(base + ["--query-corpus", str(tmp_path / "queries.txt"), "--output-dir", str(tmp_path / "out")]) == 0
    record = json.loads((tmp_path / "out" / "shrinkbert.json").read_text())["metrics"]["query_adapter"]
    assert record["lambda"] in LAMBDAS and record["texts"] == len(set(queries))
    assert record["validation_agreement"]["after"] >= record["validation_agreement"]["before"] - 1e-6
    student = Embedder.load(tmp_path / "out")
    assert student.dense is not None and student.dim == 32  # a same-width student gains a square projection
    from sentence_transformers import SentenceTransformer

    theirs = SentenceTransformer(str(tmp_path / "out"), device="cpu").encode(queries[:4], convert_to_numpy=True)
    np.testing.assert_allclose(theirs, student.encode(queries[:4]), atol=1e-5)
    shrinkbert.export(model=str(tmp_path / "out"), output_dir=str(tmp_path / "onnx"), optimization="none")
    np.testing.assert_allclose(OnnxEmbedder(tmp_path / "onnx").encode(queries[:4]), student.encode(queries[:4]), atol=1e-4)
    # too few texts to choose a weight on: one line, nothing written
    (tmp_path / "few.txt").write_text("\n".join(queries[:10]))
    capsys.readouterr()
    assert main(base + ["--query-corpus", str(tmp_path / "few.txt"), "--output-dir", str(tmp_path / "few")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --query-corpus holds 10 distinct texts") and err.count("\n") == 1
    assert not (tmp_path / "few").exists()
