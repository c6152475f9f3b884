"""Token classification through the training and compression stages, on a tiny BERT and a tiny CoNLL file."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from shrinkbert.core.errors import ShrinkbertError
from fixtures import TINY_TAGS, make_tiny_bert, write_tiny_conll


@pytest.fixture(scope="module")
def conll(tmp_path_factory):
    return write_tiny_conll(tmp_path_factory.mktemp("tagdata") / "tags.conll", n=160)


@pytest.fixture(scope="module")
def tagger(tmp_path_factory, conll):
    """A tiny token-classification teacher fine-tuned on the CoNLL file."""
    from shrinkbert import finetune

    root = tmp_path_factory.mktemp("tagger")
    start = make_tiny_bert(root / "start", num_labels=5, label_names=TINY_TAGS, token=True)
    return finetune(model=str(start), task=str(conll), output_dir=str(root / "teacher"), epochs=12,
                    learning_rate=3e-3, batch_size=8, max_length=32, checkpoint_every=0)


def test_alignment_labels_first_subtoken_only():
    from shrinkbert.core.kinds.tagging import IGNORE, align_labels, first_positions

    word_ids = [None, 0, 0, 1, 2, 2, 2, None]
    assert align_labels(word_ids, [3, 1, 4]) == [IGNORE, 3, IGNORE, 1, 4, IGNORE, IGNORE, IGNORE]
    assert align_labels(word_ids, [3, 1, 4], all_subtokens=True) == [IGNORE, 3, 3, 1, 4, 4, 4, IGNORE]
    assert first_positions(word_ids) == [1, 3, 4]


def test_tag_scores_entity_f1_counts_spans_not_words():
    from shrinkbert.core.kinds.token import tag_scores
    from shrinkbert.core.data.tasks import Task

    task = Task("t", ("O", "B-PER", "I-PER"), metrics=("seqeval", "accuracy"), kind="token")
    gold = [1, 2, 0, 1]          # two entities: words 0-1 and word 3
    pred = [1, 0, 0, 1]          # the first span is cut short: 1 of 2 predicted spans is right
    scores = tag_scores(task, pred, gold, [4])
    assert scores["accuracy"] == pytest.approx(0.75)
    assert scores["entity_precision"] == pytest.approx(0.5)
    assert scores["entity_recall"] == pytest.approx(0.5)


def test_finetune_token_task_records_entity_f1_and_labels(tagger):
    from transformers import AutoConfig

    metrics = tagger.metrics
    assert 0.0 <= metrics["test_entity_f1"] <= 1.0
    assert metrics["test_accuracy"] > 0.75  # O alone is ~80%; the tags are set by the words
    config = AutoConfig.from_pretrained(tagger.path)
    assert config.architectures == ["BertForTokenClassification"]
    assert [config.id2label[i] for i in range(5)] == ["O", "B-NEG", "B-POS", "I-NEG", "I-POS"]
    assert tagger.data["label_names"] == ["O", "B-NEG", "B-POS", "I-NEG", "I-POS"]


def test_cached_per_token_logits_match_the_live_teacher(tagger, tmp_path):
    from transformers import AutoModelForTokenClassification, AutoTokenizer

    from shrinkbert.core.data.load import load_task, tokenize_task
    from shrinkbert.students.cache import compute_teacher_outputs
    from shrinkbert.students.distill_data import make_collate, with_row_index

    tokenizer = AutoTokenizer.from_pretrained(tagger.path)
    model = AutoModelForTokenClassification.from_pretrained(tagger.path).eval()
    task, splits = load_task(tagger.data["task"])
    rows = with_row_index(tokenize_task(splits["train"].select(range(12)), tokenizer, task, 32))
    collate = make_collate(tokenizer)
    cache = compute_teacher_outputs(model, rows, collate, batch_size=5, log=lambda *_: None)
    assert cache.per_token and len(cache) == 12
    batch = collate([rows[i] for i in (7, 2, 9)])
    looked_up = cache.lookup(batch["row_idx"], batch["input_ids"].shape[1])["logits"]
    with torch.no_grad():
        live = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
    real = batch["attention_mask"].bool()
    torch.testing.assert_close(looked_up[real], live[real], atol=1e-5, rtol=1e-4)
    assert (looked_up[~real] == 0).all()
    path = cache.save(tmp_path / "c.safetensors")
    again = type(cache).load(path)
    assert again.per_token and torch.equal(again.logits, cache.logits)


def test_distill_prune_trim_export_quantize_a_tagger(tagger, tmp_path):
    from transformers import AutoConfig

    from shrinkbert import distill, export, prune, quantize, trim_vocab

    student = distill(teacher=tagger, layers=1, output_dir=str(tmp_path / "student"), epochs=2,
                      learning_rate=3e-3, batch_size=16, hidden_weight=1.0, attention_weight=1.0,
                      checkpoint_every=0)
    m = student.metrics
    assert {"test_accuracy", "test_entity_f1", "teacher_test_entity_f1", "retention"} <= set(m)
    assert m["retention"] == pytest.approx(m["test_entity_f1"] / max(m["teacher_test_entity_f1"], 1e-12))
    assert AutoConfig.from_pretrained(student.path).architectures == ["BertForTokenClassification"]
    assert student.manifest["student"]["teacher_outputs"]["used"]

    pruned = prune(model=student, output_dir=str(tmp_path / "pruned"), head_fraction=0.5, neuron_fraction=0.5,
                   importance_rows=32, max_eval_rows=32)
    assert pruned.metrics["after"]["num_parameters"] < pruned.metrics["before"]["num_parameters"]
    trimmed = trim_vocab(model=student, output_dir=str(tmp_path / "trimmed"))
    onnx = export(model=trimmed, output_dir=str(tmp_path / "onnx"))
    parity = onnx.metrics["parity"]
    assert parity["passed"] and parity["rows_source"] == tagger.data["task"]
    # parity rows are words: as many as the validation rows' words that fit
    assert parity["rows"] > 32
    assert onnx.metrics["val_accuracy_torch"] == pytest.approx(onnx.metrics["val_accuracy_onnx"], abs=1e-9)
    int8 = quantize(model=onnx, output_dir=str(tmp_path / "int8"), max_eval_rows=32)
    assert "val_entity_f1_int8" in int8.metrics and 0 < int8.metrics["eval_rows"] <= 32


def test_transfer_sets_refuse_token_tasks(tagger, tmp_path):
    from shrinkbert import distill

    with pytest.raises(ShrinkbertError, match="token task"):
        distill(teacher=tagger, layers=1, output_dir=str(tmp_path / "s"), augment=1, max_steps=1)
    assert not (tmp_path / "s").exists()


def test_a_tag_the_teacher_does_not_know_is_refused(tagger, tmp_path):
    from shrinkbert import distill

    other = tmp_path / "other.conll"
    other.write_text("good\tB-POS\nmovie\tB-GENRE\n\nbad\tB-NEG\nfilm\tO\n\n" * 8)
    with pytest.raises(ShrinkbertError, match="labels"):
        distill(teacher=tagger, task=str(other), layers=1, output_dir=str(tmp_path / "s"), max_steps=1)
    assert not (tmp_path / "s").exists()


def test_word_rows_parity_is_per_word(tagger):
    """compress.common turns a tagger's logits into one row per word that fits, and labels to match."""
    from shrinkbert.compress.common import align_labels, load_pt, load_rows, torch_logits
    from shrinkbert.core.data.dataspec import DataSpec

    model, tokenizer = load_pt(tagger.path)
    rows, task = load_rows(DataSpec(task=tagger.data["task"]), "validation", 6)
    labels = align_labels(rows, task, model.config.id2label, tokenizer, max_length=6)  # cuts long rows
    logits = torch_logits(model, tokenizer, rows, max_length=6)
    assert logits.shape == (len(labels), 5) and sum(labels.counts) == len(labels)
    assert all(c <= 4 for c in labels.counts)  # 6 positions minus [CLS] and [SEP]
    assert np.isfinite(logits).all()
    json.dumps(labels.counts)


def test_a_word_with_no_subtokens_keeps_later_tags_in_place(tagger):
    """A zero-width space is a word the tokenizer drops: gold tags must still pair with their own words."""
    from transformers import AutoTokenizer

    from shrinkbert.core.kinds.tagging import encode_words, encoded_word_ids, gold_words

    tokenizer = AutoTokenizer.from_pretrained(tagger.path)
    words = [["good", "\u200b", "movie", "bad"]]
    encoded = encode_words(tokenizer, words, 32)
    flat, counts = gold_words([[1, 4, 0, 2]], encoded_word_ids(encoded, 1))
    assert flat == [1, 0, 2] and counts == [3]


def test_artifact_load_gives_a_token_model(tagger):
    from transformers import BertForTokenClassification

    assert isinstance(tagger.load(), BertForTokenClassification)
