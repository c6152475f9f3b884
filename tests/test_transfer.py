"""Two-stage distillation: a teacher-labelled transfer set from a corpus; general distillation learns."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch

from shrinkbert.core.errors import ShrinkbertError


@pytest.fixture(scope="module")
def teacher(tmp_path_factory) -> Path:
    from fixtures import make_tiny_bert

    return make_tiny_bert(tmp_path_factory.mktemp("tt") / "teacher", layers=2, seed=3)


def _cfg(teacher, task, out, **overrides):
    from shrinkbert.core.config import build_config
    from shrinkbert.students.distill import Config

    values = {"teacher": str(teacher), "task": str(task), "output_dir": str(out), "epochs": 1,
              "batch_size": 8, "checkpoint_every": 0, "log_every": 1}
    values.update(overrides)
    return build_config(Config, values)


def _corpus_with_a_leak(tiny_csv, tmp_path) -> tuple[Path, str]:
    """A .txt corpus of new sentences plus one test row of the task, re-cased and re-punctuated."""
    from shrinkbert.core.data.load import load_task
    from fixtures import tiny_sentences

    _, splits = load_task(str(tiny_csv))
    test_row = splits["test"]["text"][0]
    lines = [text for text, _ in tiny_sentences(30, seed=7)]
    lines = [line for line in lines if line not in set(splits["test"]["text"]) | set(splits["validation"]["text"])]
    leaked = test_row.upper().replace(" ", " ,  ") + " !"
    path = tmp_path / "transfer.txt"
    path.write_text("\n".join(lines[:10] + [leaked] + lines[10:]) + "\n")
    return path, test_row


def test_transfer_rows_come_from_the_corpus_unlabelled_and_without_leaks(teacher, tiny_csv, cache_env, tmp_path):
    from shrinkbert.core.models import load_tokenizer
    from shrinkbert.students.augment import NO_LABEL
    from shrinkbert.students.distill_data import load_data
    from shrinkbert.core.data.dataspec import resolve_spec

    corpus, test_row = _corpus_with_a_leak(tiny_csv, tmp_path)
    cfg = _cfg(teacher, tiny_csv, tmp_path / "s", transfer_corpus=str(corpus), max_transfer_rows=0)
    tokenizer = load_tokenizer(teacher)
    record = {}
    task, train_set, _ = load_data(cfg, tokenizer, resolve_spec(cfg, [cfg.teacher]), record)
    plain = load_data(_cfg(teacher, tiny_csv, tmp_path / "p"), tokenizer, resolve_spec(cfg, [cfg.teacher]))[1]
    extra = train_set.select(range(len(plain), len(train_set)))
    assert record["transfer_corpus"]["leaks_removed"] == 1
    assert len(extra) == record["transfer_corpus"]["rows"] == record["transfer_rows"]["total"] > 0
    assert set(extra["labels"]) == {NO_LABEL}                        # no gold label on any transfer row
    assert set(plain["labels"]) <= {0, 1} and train_set["labels"][:len(plain)] == plain["labels"]
    decoded = {tokenizer.decode(ids, skip_special_tokens=True).replace(" ", "") for ids in extra["input_ids"]}
    assert test_row.replace(" ", "") not in decoded
    # the sample does not depend on the training seed (one cached teacher pass serves every seed)
    again = load_data(_cfg(teacher, tiny_csv, tmp_path / "s2", transfer_corpus=str(corpus), max_transfer_rows=5,
                           seed=9), tokenizer, resolve_spec(cfg, [cfg.teacher]))[1]
    first5 = load_data(_cfg(teacher, tiny_csv, tmp_path / "s3", transfer_corpus=str(corpus), max_transfer_rows=5),
                       tokenizer, resolve_spec(cfg, [cfg.teacher]))[1]
    assert again["input_ids"] == first5["input_ids"] and len(again) == len(plain) + 5
    # nor do the perturbed copies (--augment)
    copies = [load_data(_cfg(teacher, tiny_csv, tmp_path / f"a{seed}", augment=2, seed=seed), tokenizer,
                        resolve_spec(cfg, [cfg.teacher]))[1] for seed in (0, 9)]
    assert len(copies[0]) > len(plain) and copies[0]["input_ids"] == copies[1]["input_ids"]


def test_transfer_set_is_taught_by_the_teacher_logits_only(teacher, tiny_csv, cache_env, tmp_path):
    from shrinkbert.core.artifacts import read_manifest
    from shrinkbert.students.distill import run

    corpus, _ = _corpus_with_a_leak(tiny_csv, tmp_path)
    with pytest.raises(ShrinkbertError, match="no gold label"):
        run(_cfg(teacher, tiny_csv, tmp_path / "x", transfer_corpus=str(corpus), logits_weight=0, hard_weight=1))
    out = run(_cfg(teacher, tiny_csv, tmp_path / "s", layers=1, transfer_corpus=str(corpus), hard_weight=1.0,
                   max_steps=2))
    manifest = read_manifest(out)
    assert manifest["transfer"]["transfer_corpus"]["leaks_removed"] == 1
    assert manifest["student"]["teacher_outputs"]["used"] is True  # the teacher's logits label every row
    assert manifest["metrics"]["train_rows"] == manifest["data"]["rows"]["train"] > 40

    # On a batch of transfer rows alone, the gold-label term is absent: only the teacher teaches.
    from shrinkbert.students.augment import NO_LABEL
    from shrinkbert.students.losses import DistillLoss, LossWeights, parse_layer_map

    torch.manual_seed(0)
    logits, teacher_logits = torch.randn(4, 2), torch.randn(4, 2)

    class Out:
        pass

    out_s = Out()
    out_s.logits, out_s.hidden_states, out_s.attentions = logits, None, None
    batch = {"labels": torch.full((4,), NO_LABEL), "attention_mask": torch.ones(4, 3, dtype=torch.long)}
    layer_map = parse_layer_map(None, 1, 2)
    with_hard = DistillLoss(LossWeights(logits=1.0, hard=1.0), layer_map, 32, 32, 2.0, "kl")
    soft_only = DistillLoss(LossWeights(logits=1.0), layer_map, 32, 32, 2.0, "kl")
    target = {"logits": teacher_logits, "hidden_states": None, "attentions": None}
    assert float(with_hard(out_s, target, batch)[0]) == pytest.approx(float(soft_only(out_s, target, batch)[0]))


def test_general_distillation_lowers_the_students_loss(teacher, tmp_path, cache_env):
    from transformers import BertForMaskedLM

    from shrinkbert.core.artifacts import read_manifest
    from fixtures import restamp, tiny_sentences
    from shrinkbert.core.models import load_model
    from transformers import AutoModelForSequenceClassification
    from shrinkbert.students.distill import main

    mlm = tmp_path / "mlm"
    shutil.copytree(teacher, mlm)
    config = load_model(AutoModelForSequenceClassification, teacher).config
    torch.manual_seed(0)
    BertForMaskedLM(config).save_pretrained(mlm)
    restamp(mlm)  # a new model in the copied folder: its manifest records the new weights
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(text for text, _ in tiny_sentences(160, seed=5)))
    assert main(["--teacher", str(mlm), "--objective", "masked-lm", "--corpus", str(corpus), "--layers", "1",
                 "--hidden", "16", "--heads", "2", "--init", "random", "--hidden-weight", "1",
                 "--epochs", "6", "--batch-size", "16", "--learning-rate", "3e-3", "--log-every", "1",
                 "--checkpoint-every", "0", "--output-dir", str(tmp_path / "general")]) == 0
    history = [h["loss"] for h in read_manifest(tmp_path / "general")["history"] if h["kind"] == "train"]
    assert len(history) >= 50
    first, last = sum(history[:5]) / 5, sum(history[-5:]) / 5
    assert last < 0.7 * first, (first, last)


def test_a_pair_tasks_corpus_rows_are_next_or_random_line_pairs_without_leaks(tmp_path):
    from shrinkbert.core.data.leakguard import LeakGuard
    from shrinkbert.students.augment import corpus_transfer_pairs

    lines = [f"sentence number {i} of the corpus" for i in range(200)]
    (tmp_path / "corpus.txt").write_text("\n".join(lines) + "\n")
    guard = LeakGuard(["Sentence number 17 of the corpus!"])  # a test text, re-cased and re-punctuated
    firsts, seconds, read, leaks = corpus_transfer_pairs(str(tmp_path / "corpus.txt"), 0, guard)
    position = {line: i for i, line in enumerate(lines)}
    follows = [position[b] == position[a] + 1 for a, b in zip(firsts, seconds)]
    assert len(firsts) == len(seconds) and read == len(lines) and leaks >= 1
    assert 0.4 < sum(follows) / len(follows) < 0.7               # half the next line (a few random draws land on it)
    assert lines[17] not in firsts + seconds and len(set(zip(firsts, seconds))) == len(firsts)
    assert corpus_transfer_pairs(str(tmp_path / "corpus.txt"), 50, guard)[:2] == (firsts[:50], seconds[:50])
