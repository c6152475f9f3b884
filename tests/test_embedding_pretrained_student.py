"""A pretrained embedding student of another family and width (all-MiniLM-L6-v2 for all-mpnet-base-v2):
its word embeddings re-indexed to the teacher's ids by token string (students/vocab_map.py), a ridge
least-squares projection into the teacher's space, the exported graph taking what the teacher's
tokenizer writes, and the refusals where the two do not share their pieces. Tiny random models only:
an MPNet teacher whose vocabulary is the BERT student's renumbered as MPNet's is (four special tokens
first, <mask> last)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from fixtures import make_tiny_bert, make_tiny_mpnet, tiny_sentences
from shrinkbert.core.kinds.embedder import Embedder
from shrinkbert.core.errors import ShrinkbertError
from shrinkbert.students.embedding_distill import (EmbeddingStudentConfig, distill_embedding,
                                                   least_squares_projection)
from shrinkbert.students.vocab_map import adopt_vocabulary, token_map

SENTENCES = [text for text, _ in tiny_sentences(64, seed=3)]


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    root = tmp_path_factory.mktemp("pretrained-student")
    return make_tiny_mpnet(root / "mpnet"), make_tiny_bert(root / "bert", hidden=32, layers=2, intermediate=64)


def test_reindexed_student_gives_the_same_vectors_through_the_teachers_tokenizer(pair):
    """Re-indexing changes nothing but the ids: the student fed the teacher's tokens (<s> for [CLS],
    every piece 4 places on) gives the vectors it gave through its own tokenizer."""
    teacher_dir, student_dir = pair
    teacher, before, after = Embedder.load(teacher_dir), Embedder.load(student_dir), Embedder.load(student_dir)
    record = adopt_vocabulary(after.model, after.tokenizer, teacher.tokenizer, teacher.model.config.vocab_size,
                              SENTENCES[:20])
    after.tokenizer = teacher.tokenizer
    assert record["tokens_found"] == teacher.model.config.vocab_size
    assert record["sample_split_differently"] == 0
    assert teacher.tokenizer("good film")["input_ids"] != before.tokenizer("good film")["input_ids"]
    np.testing.assert_allclose(after.encode(SENTENCES[:9]), before.encode(SENTENCES[:9]), atol=1e-5)


def test_the_token_map_matches_strings_and_special_tokens_by_role(pair):
    teacher_dir, student_dir = pair
    teacher, student = Embedder.load(teacher_dir).tokenizer, Embedder.load(student_dir).tokenizer
    mapped = token_map(student, teacher, len(teacher.get_vocab()))
    assert mapped[teacher.cls_token_id] == student.cls_token_id
    assert mapped[teacher.sep_token_id] == student.sep_token_id
    assert mapped[teacher.mask_token_id] == student.mask_token_id
    assert mapped[teacher.convert_tokens_to_ids("good")] == student.convert_tokens_to_ids("good")


def test_the_projection_recovers_a_linear_map_into_the_teachers_space(pair):
    _, student_dir = pair
    student = Embedder.load(student_dir)
    rng = np.random.default_rng(0)
    weight, bias = rng.normal(size=(32, 48)), rng.normal(size=48)
    targets = (student.encode(SENTENCES, normalize=False) @ weight + bias).astype(np.float32)
    dense, record = least_squares_projection(student, SENTENCES, targets, 48)
    student.dense = dense
    got = student.encode(SENTENCES[:10], normalize=False)
    cosine = np.sum(got * targets[:10], axis=1) / np.linalg.norm(got, axis=1) / np.linalg.norm(targets[:10], axis=1)
    assert cosine.min() > 0.99 and record["in"] == 32 and record["out"] == 48


def test_distilled_into_the_teachers_space_exported_without_token_types(pair, tmp_path):
    import shrinkbert
    from shrinkbert.compress.embedding_onnx import OnnxEmbedder

    teacher_dir, student_dir = pair
    config = EmbeddingStudentConfig(epochs=1, batch_size=16, lr=1e-3)
    out = distill_embedding(teacher_dir, SENTENCES, tmp_path / "student", config, cache_dir=tmp_path / "cache",
                            student_path=student_dir, log=lambda *_: None)
    manifest = json.loads((out / "shrinkbert.json").read_text())
    assert manifest["init"]["projection"]["in"] == 32 and manifest["init"]["projection"]["out"] == 48
    assert manifest["init"]["projection"]["init"].startswith("ridge least squares on 64 training sentences")
    student = Embedder.load(out)
    assert student.dim == 48 and student.tokenizer.get_vocab() == Embedder.load(teacher_dir).tokenizer.get_vocab()
    shrinkbert.export(model=str(out), output_dir=str(tmp_path / "onnx"), optimization="none")
    graph = OnnxEmbedder(tmp_path / "onnx")
    assert "token_type_ids" not in graph.inputs  # the teacher's tokenizer writes none
    np.testing.assert_allclose(graph.encode(SENTENCES[:7]), student.encode(SENTENCES[:7]), atol=1e-4)


def test_a_student_of_other_pieces_is_one_line(pair, tmp_path):
    """A cased student splits the sample into other pieces than the uncased teacher; a student of
    another vocabulary knows too few of the teacher's tokens."""
    from transformers import BertTokenizerFast

    teacher_dir, student_dir = pair
    teacher = Embedder.load(teacher_dir)
    cased = Embedder.load(student_dir)
    cased.tokenizer = BertTokenizerFast(str(student_dir / "vocab.txt"), do_lower_case=False)
    shouting = [text.upper() for text in SENTENCES[:20]]
    with pytest.raises(ShrinkbertError, match="splits 20 of 20 sample sentences into other pieces"):
        adopt_vocabulary(cased.model, cased.tokenizer, teacher.tokenizer, teacher.model.config.vocab_size, shouting)
    (tmp_path / "v.txt").write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "zzz", "qqq"]) + "\n")
    stranger = BertTokenizerFast(str(tmp_path / "v.txt"))
    with pytest.raises(ShrinkbertError, match=r"knows \d+ of the teacher.s \d+ tokens"):
        adopt_vocabulary(cased.model, stranger, teacher.tokenizer, teacher.model.config.vocab_size, SENTENCES[:5])
