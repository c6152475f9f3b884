"""A BERT student of a teacher of another family that shares its tokenizer's pieces (all-MiniLM-L6-v2
for an MPNet classifier): `distill --student` re-indexes the student's word embeddings to the teacher's ids
(students/vocab_map.py), trains it on the teacher's tokenized rows, saves it with the teacher's tokenizer, and
the chain export -> quantize -> bundle runs on. Tiny random models: an MPNet teacher whose vocabulary is the
tiny BERT's renumbered (fixtures.make_tiny_mpnet)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from fixtures import make_tiny_bert, make_tiny_mpnet, tiny_sentences, write_tiny_csv

ROWS = [text for text, _ in tiny_sentences(16, seed=11)]


@pytest.fixture(scope="module")
def mpnet_teacher(tmp_path_factory):
    import shrinkbert

    root = tmp_path_factory.mktemp("cross-family")
    task = write_tiny_csv(root / "tiny.csv", n=96)
    start = make_tiny_mpnet(root / "mpnet", hidden=32)
    return shrinkbert.finetune(model=str(start), task=str(task), epochs=1, max_length=32, checkpoint_every=0,
                               output_dir=str(root / "teacher")).path


def test_a_bert_student_of_an_mpnet_teacher_reads_its_ids_and_ships(mpnet_teacher, tmp_path):
    import shrinkbert
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    bert = make_tiny_bert(tmp_path / "bert", hidden=32, layers=1)
    before = AutoModelForSequenceClassification.from_pretrained(bert).get_input_embeddings().weight.detach().clone()
    bert_tokenizer, teacher_tokenizer = AutoTokenizer.from_pretrained(bert), AutoTokenizer.from_pretrained(mpnet_teacher)
    student = shrinkbert.distill(teacher=str(mpnet_teacher), student=str(bert), max_steps=1, learning_rate=1e-9,
                                 hidden_weight=1.0, max_length=32, checkpoint_every=0, output_dir=str(tmp_path / "student"))
    tokens = student.manifest["student"]["tokens"]
    teacher_rows = AutoModelForSequenceClassification.from_pretrained(mpnet_teacher).config.vocab_size
    assert tokens["tokens_found"] == teacher_rows and tokens["sample_split_differently"] == 0
    model = AutoModelForSequenceClassification.from_pretrained(student.path)
    assert model.config.model_type == "bert" and model.config.vocab_size == teacher_rows
    # every teacher id now holds the student's row of the same string ("good": 4 ids on in MPNet's numbering)
    rows = model.get_input_embeddings().weight.detach()
    for token in ("good", "film"):
        assert teacher_tokenizer.convert_tokens_to_ids(token) != bert_tokenizer.convert_tokens_to_ids(token)
        assert torch.allclose(rows[teacher_tokenizer.convert_tokens_to_ids(token)],
                              before[bert_tokenizer.convert_tokens_to_ids(token)], atol=1e-4)
    assert torch.allclose(rows[teacher_tokenizer.cls_token_id], before[bert_tokenizer.cls_token_id], atol=1e-4)
    # it ships with the teacher's tokenizer, through every later stage
    assert AutoTokenizer.from_pretrained(student.path).get_vocab() == teacher_tokenizer.get_vocab()
    onnx = shrinkbert.export(model=str(student.path), output_dir=str(tmp_path / "onnx"))
    int8 = shrinkbert.quantize(model=str(onnx.path), output_dir=str(tmp_path / "int8"))
    predictor = shrinkbert.bundle(model=str(int8.path), output_dir=str(tmp_path / "bundle")).load()
    assert [e.ids[:sum(e.attention_mask)] for e in predictor.encode(ROWS)] == teacher_tokenizer(ROWS)["input_ids"]
    with torch.no_grad():
        expected = torch.softmax(model.eval()(**teacher_tokenizer(ROWS, padding=True, return_tensors="pt")).logits, -1)
    logits = predictor.logits(ROWS)
    got = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    assert np.abs(got - expected.numpy()).max() < 0.05


def test_a_student_of_other_pieces_is_one_line(mpnet_teacher, tmp_path):
    import shrinkbert
    from transformers import BertTokenizerFast

    from shrinkbert.core.errors import ShrinkbertError

    stranger = make_tiny_bert(tmp_path / "stranger", hidden=32, layers=1)
    (tmp_path / "v.txt").write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "zzz", "qqq"]) + "\n")
    BertTokenizerFast(str(tmp_path / "v.txt")).save_pretrained(stranger)
    with pytest.raises(ShrinkbertError, match=r"student.* knows \d+ of the teacher's \d+ tokens"):
        shrinkbert.distill(teacher=str(mpnet_teacher), student=str(stranger), max_steps=1, max_length=32,
                           checkpoint_every=0, output_dir=str(tmp_path / "out"))
    assert not (tmp_path / "out").exists()
