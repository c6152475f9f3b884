"""The embedding kind and the distilled transformer student: kind_of, the student with a projection
into its teacher's space (sentence-transformers loads it and agrees; the exported graph keeps the
projection), its own dimension, the teacher-vector cache, fine-tuning on scored and NLI pairs, the
drop-in measures, and bad input (one line, nothing written). Tiny random models only."""
from __future__ import annotations

import json

import numpy as np
import pytest

from fixtures import make_tiny_bert, tiny_sentences
from shrinkbert.core.builtin import minilm_path
from shrinkbert.core.data.load import load_corpus
from shrinkbert.core.kinds.embedder import Embedder, read_pooling
from shrinkbert.core.errors import ShrinkbertError
from shrinkbert.core.kinds import get_kind, kind_of
from shrinkbert.core.kinds.embedding import agreement
from shrinkbert.eval import embedding_eval
from shrinkbert.students import embedding_distill
from shrinkbert.students.embedding_distill import EmbeddingStudentConfig, distill_embedding

SENTENCES = [text for text, _ in tiny_sentences(48, seed=1)]


@pytest.fixture(scope="module")
def teacher(tmp_path_factory):
    return make_tiny_bert(tmp_path_factory.mktemp("emb-teacher") / "teacher", hidden=32, layers=2, intermediate=64)


@pytest.fixture(scope="module")
def narrow_student(teacher, tmp_path_factory):
    """A 1-layer student of width 16 (the teacher's 32): it needs the projection."""
    out = tmp_path_factory.mktemp("emb-student") / "student"
    config = EmbeddingStudentConfig(layers=1, hidden=16, heads=2, intermediate=32, epochs=2, batch_size=8, lr=1e-3)
    return distill_embedding(teacher, SENTENCES, out, config, cache_dir=tmp_path_factory.mktemp("cache"), log=lambda *_: None)


def test_kind_of_tells_an_embedding_artifact_from_the_bare_teacher(narrow_student):
    assert kind_of(narrow_student).name == "embedding"
    # minilm's config names a bare BertModel: it stays the classification stages' default kind
    minilm = minilm_path()
    assert json.loads((minilm / "config.json").read_text())["architectures"] == ["BertModel"]
    assert kind_of(minilm).name == "sequence"
    assert kind_of({"kind": "embedding"}).name == "embedding"
    assert kind_of({"architectures": ["BertModel"]}).name == "sequence"


def test_a_student_loads_without_a_pooler_or_a_train_this_model_report(narrow_student, capfd):
    """Saved without BERT's pooler (sentence vectors never use it): loading must not report it as new
    weights ("You should probably TRAIN this model") nor keep random ones; other new weights still show."""
    import logging

    from shrinkbert.core.quiet import NEW_WEIGHTS, _NamesReport, _pooler_only

    student = Embedder.load(narrow_student)
    assert student.model.pooler is None and "newly initialized" not in capfd.readouterr().err

    def kept(message: str) -> bool:
        return _NamesReport(NEW_WEIGHTS, _pooler_only).filter(logging.LogRecord("t", logging.WARNING, "", 0, message, None, None))
    assert not kept("... are newly initialized: ['pooler.dense.bias', 'pooler.dense.weight']\nYou should ...")
    assert kept("... are newly initialized: ['pooler.dense.bias', 'encoder.layer.0.output.dense.weight']")


def test_the_student_keeps_the_teachers_space_through_a_projection(narrow_student, teacher):
    spec = read_pooling(narrow_student)
    assert spec.dense and spec.normalize and spec.mode == "mean"
    student = Embedder.load(narrow_student)
    assert student.model.config.hidden_size == 16 and student.dim == 32 == Embedder.load(teacher).dim
    manifest = json.loads((narrow_student / "shrinkbert.json").read_text())
    assert manifest["kind"] == "embedding" and manifest["init"]["projection"] == {
        "in": 16, "out": 32, "init": "PCA basis transposed"}
    losses = [epoch["loss"] for epoch in manifest["training"]["epochs"]]
    assert losses[-1] < losses[0]


def test_sentence_transformers_loads_the_student_and_gives_the_kits_vectors(narrow_student):
    from sentence_transformers import SentenceTransformer

    texts = SENTENCES[:5] + [""]
    theirs = SentenceTransformer(str(narrow_student), device="cpu").encode(texts, convert_to_numpy=True)
    np.testing.assert_allclose(theirs, Embedder.load(narrow_student).encode(texts), atol=1e-5)
    assert theirs.shape == (6, 32)


def test_the_exported_graph_keeps_the_projection(narrow_student, tmp_path):
    import shrinkbert
    from shrinkbert.compress.embedding_onnx import OnnxEmbedder

    exported = shrinkbert.export(model=str(narrow_student), output_dir=str(tmp_path / "onnx"), optimization="none")
    gap = exported.metrics["parity"]["max_abs_logit_diff"]
    texts = SENTENCES[:7]
    graph = OnnxEmbedder(tmp_path / "onnx").encode(texts)
    assert graph.shape == (7, 32) and gap < 1e-4
    np.testing.assert_allclose(graph, Embedder.load(narrow_student).encode(texts), atol=1e-4)


def test_a_dimension_of_its_own_and_the_teacher_vector_cache(teacher, tmp_path, monkeypatch):
    config = EmbeddingStudentConfig(layers=1, dim=8, epochs=1, batch_size=16, hidden_weight=0.5)  # same width: hidden MSE too
    quiet = dict(cache_dir=tmp_path / "cache", log=lambda *_: None)
    out = distill_embedding(teacher, SENTENCES, tmp_path / "d8", config, **quiet)
    assert Embedder.load(out).encode(SENTENCES[:3]).shape == (3, 8)
    assert json.loads((out / "shrinkbert.json").read_text())["training"]["hidden_loss"] is True
    assert len(list((tmp_path / "cache" / "embedding-teacher").glob("*.npy"))) == 1
    # the same teacher and sentences again: the teacher's vectors come from the cache
    monkeypatch.setattr(Embedder, "encode", lambda *a, **k: pytest.fail("the teacher ran again"))
    vectors = embedding_distill.teacher_vectors(Embedder.load(teacher), teacher, SENTENCES, tmp_path / "cache")
    assert vectors.shape == (len(SENTENCES), 32)
    with pytest.raises(ShrinkbertError, match="--dim 64 must lie between 1 and the teacher's 32"):
        distill_embedding(teacher, SENTENCES, tmp_path / "d64", EmbeddingStudentConfig(layers=1, dim=64), **quiet)
    assert not (tmp_path / "d64").exists()


def test_an_empty_corpus_is_one_line_and_writes_nothing(teacher, tmp_path):
    (tmp_path / "empty.txt").write_text("\n  \n")
    with pytest.raises(ShrinkbertError) as raised:
        distill_embedding(teacher, load_corpus([str(tmp_path / "empty.txt")]), tmp_path / "out")
    assert "\n" not in str(raised.value)
    with pytest.raises(ShrinkbertError, match="holds no text"):
        distill_embedding(teacher, ["", "  "], tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_finetune_on_scored_pairs(teacher, tmp_path):
    import shrinkbert

    rows = list(zip(SENTENCES[::2], SENTENCES[1::2]))[:12]
    (tmp_path / "pairs.csv").write_text("sentence1,sentence2,score\n" + "".join(
        f"{a},{b},{i % 6}\n" for i, (a, b) in enumerate(rows)))
    # scored pairs: the finetune stage every kind uses (CosineSimilarityLoss), no hatch of its own
    out = shrinkbert.finetune(model=str(teacher), task=str(tmp_path / "pairs.csv"), epochs=1, batch_size=4,
                              checkpoint_every=0, output_dir=str(tmp_path / "sts")).path
    assert kind_of(out).name == "embedding" and (out / "modules.json").is_file()
    assert Embedder.load(out).encode(["a"]).shape == (1, 32)


@pytest.mark.parametrize("body,message", [
    ("sentence1,sentence2\na,b\n", "no text column"),  # no score: not scored pairs, and no classifier text
    ("sentence1,sentence2,score\na,b,7\n", "outside the declared range"),
    ("sentence1,sentence2,score\na,b,high\n", "not a number"),
])
def test_bad_pairs_files_write_nothing(teacher, tmp_path, body, message):
    import shrinkbert

    (tmp_path / "pairs.csv").write_text(body)
    with pytest.raises(ShrinkbertError, match=message) as raised:
        shrinkbert.finetune(model=str(teacher), task=str(tmp_path / "pairs.csv"), output_dir=str(tmp_path / "out"))
    assert "\n" not in str(raised.value) and not (tmp_path / "out").exists()


def test_drop_in_measures_by_hand():
    rng = np.random.default_rng(0)
    index, queries = rng.normal(size=(50, 6)), rng.normal(size=(5, 6))
    assert embedding_eval.drop_in_recall(index, queries, queries * 3.0, k=10) == 1.0  # the same directions
    truth = embedding_eval.top_k(queries, index, 10)
    cosine = (queries / np.linalg.norm(queries, axis=1, keepdims=True)) @ (index / np.linalg.norm(index, axis=1, keepdims=True)).T
    assert truth[:, 0].tolist() == cosine.argmax(axis=1).tolist()
    # a student whose queries point elsewhere finds fewer of the teacher's neighbours
    assert embedding_eval.drop_in_recall(index, queries, -queries, k=10) < 0.5
    assert agreement(queries, queries * 2) == pytest.approx(1.0)
    assert agreement(queries, -queries) == pytest.approx(-1.0)
    with pytest.raises(ShrinkbertError, match="teacher's space"):
        embedding_eval.drop_in_recall(index, queries, queries[:, :3])


def test_frozen_embedding_classification_separates_separable_classes():
    rng = np.random.default_rng(0)
    labels = np.arange(200) % 2
    vectors = rng.normal(size=(200, 4)) + labels[:, None] * 4.0
    accuracy = embedding_eval.classification_accuracy(vectors[:100], labels[:100], vectors[100:], labels[100:],
                                                      per_label=20)
    assert accuracy > 95
    shuffled = embedding_eval.classification_accuracy(vectors[:100], rng.permutation(labels[:100]), vectors[100:],
                                                      labels[100:], per_label=20)
    assert shuffled < accuracy


def test_the_kind_scores_pairs_from_stacked_vectors_in_batches_of_any_size():
    from scipy.stats import spearmanr

    from shrinkbert.core.data.tasks import Task

    kind = get_kind("embedding")
    task = Task("sts", ("0", "5"), pair=True, metrics=("spearman",), kind="embedding")
    rng = np.random.default_rng(1)
    first, second = rng.normal(size=(6, 4)), rng.normal(size=(6, 4))
    scores = [0.5, 4.0, 2.0, 3.5, 1.0, 5.0]
    cosine = [float(a @ b / np.linalg.norm(a) / np.linalg.norm(b)) for a, b in zip(first, second)]
    expected = spearmanr(cosine, scores).statistic * 100
    rows = [{"sentence1": f"a{i}", "sentence2": f"b{i}", "score": s} for i, s in enumerate(scores)]
    scored = kind.scored_logits(np.concatenate([first, second]), None, rows)  # encode's firsts, then seconds
    in_two = np.concatenate([kind.scored_logits(np.concatenate([first[:2], second[:2]]), None, rows[:2]),
                             kind.scored_logits(np.concatenate([first[2:], second[2:]]), None, rows[2:])])
    np.testing.assert_allclose(in_two, scored)  # parity checks compare batches of 1, 3 and 8 rows with 32
    assert kind.score(task, scored, scores)["spearman"] == pytest.approx(expected)
    assert kind.primary_metric(task)[0] == "spearman"
    with pytest.raises(ShrinkbertError, match="score range"):
        Task("sts", ("low", "high"), metrics=("spearman",), kind="embedding")
    with pytest.raises(ShrinkbertError, match="scores embedding tasks only"):
        Task("clf", ("a", "b"), metrics=("spearman",))


def test_an_option_the_vectors_objective_does_not_read_is_one_line_and_writes_nothing(teacher, tmp_path, capsys):
    from shrinkbert.students.distill import main

    (tmp_path / "lines.txt").write_text("\n".join(SENTENCES))
    base = ["--objective", "vectors", "--teacher", str(teacher), "--corpus", str(tmp_path / "lines.txt"),
            "--layers", "1", "--output-dir", str(tmp_path / "out")]
    assert main(base + ["--temperature", "4", "--attention-weight", "1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --attention-weight, --temperature are not read by the vectors objective")
    assert err.count("\n") == 1 and not (tmp_path / "out").exists()
    static = ["--teacher", str(teacher), "--student", "static", "--corpus",
              str(tmp_path / "lines.txt"), "--output-dir", str(tmp_path / "out")]
    assert main(static + ["--torch-compile"]) == 2  # a lookup table has nothing to compile
    assert capsys.readouterr().err.startswith("error: --torch-compile is not read by the static objective (its table has an optimizer of its own")
    # a value equal to the default is no setting at all: not refused (recipes pass shared keys such as seed)
    assert main(base + ["--temperature", "2", "--epochs", "1", "--batch-size", "16", "--similarity-weight", "2",
                        "--drop-in-weight", "1", "--keep-by", "validation"]) == 0
    manifest = json.loads((tmp_path / "out" / "shrinkbert.json").read_text())
    assert manifest["config"]["similarity_weight"] == 2 and manifest["config"]["keep_by"] == "validation"
    assert manifest["config"]["drop_in_weight"] == 1


def test_the_drop_in_loss_asks_for_the_teachers_coordinates_not_only_its_cosines():
    import torch

    from shrinkbert.core.kinds.losses import index_ranking_loss

    gen = torch.Generator().manual_seed(0)
    teacher, bank = torch.randn(6, 16, generator=gen), torch.randn(64, 16, generator=gen)
    rotation = torch.linalg.qr(torch.randn(16, 16, generator=gen))[0]
    assert index_ranking_loss(3 * teacher, teacher, bank) < 1e-6  # the same directions: the same ranking
    moved = teacher + 0.3 * torch.randn(6, 16, generator=gen)
    # the bank is read as an index of unit vectors, whatever the norms of the teacher's raw vectors in it
    assert index_ranking_loss(moved, teacher, 7 * bank) == pytest.approx(float(index_ranking_loss(moved, teacher, bank)))
    # a rotated copy keeps every pair's cosine (nothing for the similarity-matrix term to learn) but
    # ranks the teacher's index differently: a drop-in query must share the teacher's coordinates
    assert index_ranking_loss(teacher @ rotation, teacher, bank) > 0.1
    student = teacher.clone().requires_grad_()
    index_ranking_loss(student + 0.3 * torch.randn(6, 16, generator=gen), teacher, bank).backward()
    assert student.grad is not None and student.grad.abs().sum() > 0


def test_the_epoch_rule_weighs_agreement_only_when_asked():
    from shrinkbert.students.embedding_distill import selection_score

    start = {"validation_spearman": 86.00, "unseen_agreement": 0.725}  # the untrained start agrees more
    trained = {"validation_spearman": 86.15, "unseen_agreement": 0.700}  # ranks pairs better
    assert selection_score(start) > selection_score(trained)  # the default: validation + 100 x agreement
    assert selection_score(trained, "validation") > selection_score(start, "validation")
    with pytest.raises(ShrinkbertError, match="keep_by 'agreement'"):
        selection_score(start, "agreement")


def test_the_similarity_matrix_loss_sees_the_order_of_pairs_not_the_scale():
    import torch

    from shrinkbert.core.kinds.losses import similarity_matrix_loss

    teacher = torch.randn(6, 16, generator=torch.Generator().manual_seed(0))
    rotation = torch.linalg.qr(torch.randn(16, 16, generator=torch.Generator().manual_seed(1)))[0]
    # a rotated, rescaled copy keeps every pair's cosine: nothing to learn; each vector moved apart does not
    assert similarity_matrix_loss(3 * teacher @ rotation, teacher) < 1e-10
    assert similarity_matrix_loss(teacher + torch.randn(6, 16), teacher) > 1e-3
    student = teacher.clone().requires_grad_()
    similarity_matrix_loss(student[:1], teacher[:1]).backward()  # one row: no pairs, still a step
    assert student.grad is not None and not student.grad.any()
