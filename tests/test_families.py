"""Every encoder family through the five-stage chain a user runs on their own teacher:
finetune -> distill -> export -> quantize -> bundle, each family a tiny random model made here from
its transformers config (tests/fixtures.make_tiny_family), with its own tokenizer model (WordPiece,
byte-level BPE for RoBERTa, Unigram for DeBERTa-v2)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from fixtures import FAMILY_MODELS, make_tiny_family, tiny_sentences, write_tiny_csv

ROWS = [text for text, _ in tiny_sentences(24, seed=7)]


@pytest.fixture(scope="session")
def family_teachers(tmp_path_factory) -> dict:
    """{model_type: fine-tuned teacher artifact} for every family, made once."""
    import shrinkbert

    root = tmp_path_factory.mktemp("families")
    task = write_tiny_csv(root / "tiny.csv", n=96)
    teachers = {}
    for family in FAMILY_MODELS:
        start = make_tiny_family(root / family / "init", family)
        teachers[family] = shrinkbert.finetune(model=str(start), task=str(task), epochs=1, max_length=32,
                                               checkpoint_every=0, output_dir=str(root / family / "teacher")).path
    return teachers


@pytest.mark.parametrize("family", FAMILY_MODELS)
def test_five_stage_chain(family, family_teachers, tmp_path):
    import shrinkbert
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from shrinkbert.core.families import family_of

    teacher_dir = family_teachers[family]
    student = shrinkbert.distill(teacher=str(teacher_dir), layers=1, epochs=1, hidden_weight=1.0, checkpoint_every=0,
                                 max_steps=1, learning_rate=1e-9, output_dir=str(tmp_path / "student"))
    # At the teacher's widths a student is the teacher's chosen layer, copied whole (2 -> 1 takes layer 2).
    teacher_model = AutoModelForSequenceClassification.from_pretrained(teacher_dir).eval()
    student_model = AutoModelForSequenceClassification.from_pretrained(student.path).eval()
    assert student_model.config.model_type == teacher_model.config.model_type
    assert student.manifest["small_data"] == {"train_rows": 76, "switched_on": {},  # the suite runs it off
                                              "left_off": {"augment": 8}}
    kind = family_of(teacher_model)
    assert len(kind.layers(student_model)) == 1
    student_layer, teacher_layer = kind.layers(student_model)[0].state_dict(), kind.layers(teacher_model)[1].state_dict()
    # (ModernBERT's first layer has no attention norm, whichever teacher layer it starts from.)
    assert set(student_layer) == set(teacher_layer) - ({"attn_norm.weight"} if family == "modernbert" else set())
    assert all(torch.allclose(student_layer[k], teacher_layer[k], atol=1e-6) for k in student_layer)
    assert torch.allclose(student_model.get_input_embeddings().weight, teacher_model.get_input_embeddings().weight,
                          atol=1e-6)

    onnx = shrinkbert.export(model=str(student.path), output_dir=str(tmp_path / "onnx"))
    # every family's layers answer to BERT's group names (quantize --exclude, accuracy-aware); MPNet, ELECTRA,
    # DeBERTa, DistilBERT and ModernBERT graphs once had none
    import onnx as onnx_lib

    from shrinkbert.compress.onnx_modules import node_groups

    groups = node_groups(onnx_lib.load(str(onnx.path / "model.onnx")))
    assert {"embeddings", "encoder.layer.0.attention", "encoder.layer.0.intermediate", "encoder.layer.0.output"} <= set(groups)
    int8 = shrinkbert.quantize(model=str(onnx.path), output_dir=str(tmp_path / "int8"))
    bundle = shrinkbert.bundle(model=str(int8.path), output_dir=str(tmp_path / "bundle"))
    predictor = bundle.load()
    # The bundle's tokenizer.json runtime reads the family's tokenizer model as transformers does ...
    tokenizer = AutoTokenizer.from_pretrained(student.path)
    assert [e.ids[:sum(e.attention_mask)] for e in predictor.encode(ROWS)] == tokenizer(ROWS)["input_ids"]
    # ... and its int8 graph stays near the PyTorch student it came from.
    with torch.no_grad():
        encoded = tokenizer(ROWS, padding=True, return_tensors="pt")
        inputs = {k: v for k, v in encoded.items() if k != "token_type_ids" or "token_type_ids" in predictor.input_names}
        expected = torch.softmax(student_model(**inputs).logits, -1).numpy()
    got = np.exp(predictor.logits(ROWS)) / np.exp(predictor.logits(ROWS)).sum(-1, keepdims=True)
    assert np.abs(got - expected).max() < 0.05
    assert {p["label"] for p in predictor.predict(ROWS)} <= {"negative", "positive"}


@pytest.mark.parametrize("family", ["deberta-v2", "modernbert"])
def test_narrower_student_of_an_unsliced_family_is_one_line(family, family_teachers, tmp_path):
    import shrinkbert
    from shrinkbert.core.errors import ShrinkbertError

    with pytest.raises(ShrinkbertError, match="keeps the teacher's widths") as err:
        shrinkbert.distill(teacher=str(family_teachers[family]), layers=1, hidden=16, heads=2, max_steps=1,
                           output_dir=str(tmp_path / "student"))
    assert "\n" not in str(err.value)
    assert not (tmp_path / "student").exists()
    # --init random builds any shape of the family
    student = shrinkbert.distill(teacher=str(family_teachers[family]), layers=1, hidden=16, heads=2, init="random",
                                 max_steps=1, checkpoint_every=0, output_dir=str(tmp_path / "random"))
    assert student.manifest["student"]["shape"]["hidden"] == 16
    assert student.manifest["student"]["init"] == {"random": True}


@pytest.mark.parametrize("family", ["roberta", "electra", "mpnet", "distilbert"])
def test_narrower_student_is_sliced_for_the_bert_layout(family, family_teachers, tmp_path):
    import shrinkbert
    from transformers import AutoModelForSequenceClassification

    from shrinkbert.core.families import Widths, family_of
    from shrinkbert.core.predict import encoder_inputs

    student = shrinkbert.distill(teacher=str(family_teachers[family]), layers=1, hidden=16, heads=2, intermediate=32,
                                 max_steps=1, learning_rate=1e-9, checkpoint_every=0, output_dir=str(tmp_path / "s"))
    model = AutoModelForSequenceClassification.from_pretrained(student.path)
    assert model.config.model_type == family
    assert family_of(model).widths(model.config) == Widths(layers=1, hidden=16, heads=2, intermediate=32)
    # The head (a two-layer classifier for RoBERTa, ELECTRA and MPNet; pre_classifier + classifier for
    # DistilBERT) came from the teacher, sliced on its hidden side.
    assert "classifier" in student.manifest["student"]["init"]["carried"]
    # At the teacher's own widths the sliced path is an exact copy: the student computes the teacher.
    same = shrinkbert.distill(teacher=str(family_teachers[family]), layers=2, hidden=32, heads=4, init_embeddings="columns",
                              max_steps=1, learning_rate=1e-9, checkpoint_every=0, output_dir=str(tmp_path / "same"))
    rows = [text for text, _ in tiny_sentences(8, seed=3)]
    logits = []
    for path in (family_teachers[family], same.path):
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(path)
        with torch.no_grad():
            encoded = tokenizer(rows, padding=True, return_tensors="pt")
            m = AutoModelForSequenceClassification.from_pretrained(path).eval()
            logits.append(m(**encoder_inputs(m, encoded)).logits)
    assert torch.allclose(logits[0], logits[1], atol=1e-4)


@pytest.mark.parametrize("family", FAMILY_MODELS)
def test_parameter_count_matches_the_built_model(family, family_teachers):
    from transformers import AutoConfig, AutoModelForSequenceClassification

    from shrinkbert.students.shape import count_config_parameters

    config = AutoConfig.from_pretrained(family_teachers[family])
    model = AutoModelForSequenceClassification.from_config(config)
    assert count_config_parameters(config) == sum(p.numel() for p in model.parameters())


def test_unknown_family_is_refused():
    from transformers import GPT2Config

    from shrinkbert.core.errors import ShrinkbertError
    from shrinkbert.core.families import family_of

    with pytest.raises(ShrinkbertError, match="model_type 'gpt2' is not an encoder family"):
        family_of(GPT2Config())


@pytest.mark.parametrize("family", FAMILY_MODELS)
def test_structured_pruning_slices_each_family_it_can_and_refuses_the_rest_in_one_line(family, family_teachers, tmp_path):
    import shrinkbert
    from transformers import AutoModelForSequenceClassification

    from shrinkbert.core.errors import ShrinkbertError
    from shrinkbert.core.families import family_of

    teacher_dir = family_teachers[family]
    kind = family_of(AutoModelForSequenceClassification.from_pretrained(teacher_dir))
    heads = 0.25 if kind.prunes_heads else 0.0
    if kind.layout is None:  # DeBERTa, ModernBERT: their attention and FFN are not sliced here
        with pytest.raises(ShrinkbertError, match="structured pruning slices"):
            shrinkbert.prune(model=str(teacher_dir), head_fraction=0.25, neuron_fraction=0.5,
                             output_dir=str(tmp_path / "pruned"))
        assert not (tmp_path / "pruned").exists()
        return
    if not kind.prunes_heads:  # MPNet: one relative-position bias for every layer's heads
        with pytest.raises(ShrinkbertError, match="FFN neurons only"):
            shrinkbert.prune(model=str(teacher_dir), head_fraction=0.25, output_dir=str(tmp_path / "refused"))
    pruned = shrinkbert.prune(model=str(teacher_dir), head_fraction=heads, neuron_fraction=0.5, max_eval_rows=16,
                              importance_rows=16, output_dir=str(tmp_path / "pruned"))
    after = pruned.metrics["after"]
    assert after["heads"] == 8 - int(8 * heads) and after["intermediate_size"] == 32  # 2 layers x 4 heads, FFN 64
    # It reloads with the family's own class at its pruned shape, and exports with parity.
    model = AutoModelForSequenceClassification.from_pretrained(pruned.path)
    layout = kind.layout
    from shrinkbert.compress.importance import module_at

    assert [module_at(layer, layout.ffn_in).out_features for layer in kind.layers(model)] == [32, 32]
    assert sum(module_at(layer, layout.query).out_features for layer in kind.layers(model)) == after["heads"] * 8
    onnx = shrinkbert.export(model=str(pruned.path), optimization="none", output_dir=str(tmp_path / "onnx"))
    assert onnx.metrics["parity"]["passed"]


@pytest.mark.parametrize("family", ["roberta", "modernbert", "electra"])
def test_continued_pretraining_takes_every_family(family, family_teachers, tmp_path):
    """Domain MLM on a user's teacher of another family: its masked-LM class with a new head (warmed up
    first), its own mask token; NSP, BERT's alone, is one line. ELECTRA's discriminator has no MLM head."""
    from transformers import AutoModelForMaskedLM

    from shrinkbert.core.artifacts import read_manifest
    from shrinkbert.teachers import pretrain

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(text for text, _ in tiny_sentences(160, seed=11)) + "\n")
    common = ["--model", str(family_teachers[family]), "--corpus", str(corpus), "--max-length", "32",
              "--batch-size", "8", "--checkpoint-every", "0"]
    out = tmp_path / "mlm"
    assert pretrain.main([*common, "--max-steps", "3", "--head-warmup-steps", "2", "--output-dir", str(out)]) == 0
    metrics = read_manifest(out)["metrics"]
    assert metrics["head_warmup"]["steps"] == 2 and metrics["steps"] == 3 and np.isfinite(metrics["heldout_mlm_loss_after"])
    model = AutoModelForMaskedLM.from_pretrained(out)
    assert model.config.model_type == family and model.config.architectures[0].endswith("ForMaskedLM")
    assert pretrain.main([*common, "--nsp", "--output-dir", str(tmp_path / "nsp")]) == 2
    assert not (tmp_path / "nsp").exists()


@pytest.mark.parametrize("family", ["roberta", "modernbert"])
def test_a_pretrained_student_is_of_its_teachers_family_and_distils_on(family, family_teachers, tmp_path):
    """`pretrain --teacher`: a smaller masked-LM model of the teacher's family, cut from its layers (Turc
    et al.'s pretrained compact student), which `distill --student` then turns into a classifier."""
    import shrinkbert
    from transformers import AutoConfig

    from shrinkbert.core.artifacts import read_manifest
    from shrinkbert.teachers import pretrain

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(text for text, _ in tiny_sentences(160, seed=12)) + "\n")
    common = ["--teacher", str(family_teachers[family]), "--layers", "1", "--corpus", str(corpus), "--max-length", "32",
              "--batch-size", "8", "--checkpoint-every", "0", "--max-steps", "2"]
    assert pretrain.main([*common, "--output-dir", str(tmp_path / "student")]) == 0
    config = AutoConfig.from_pretrained(tmp_path / "student")
    assert config.model_type == family and config.architectures[0].endswith("ForMaskedLM")
    assert (config.num_hidden_layers, AutoConfig.from_pretrained(family_teachers[family]).num_hidden_layers) == (1, 2)
    task = shrinkbert.distill(teacher=str(family_teachers[family]), student=str(tmp_path / "student"), epochs=1,
                              max_length=32, checkpoint_every=0, output_dir=str(tmp_path / "distilled"))
    assert AutoConfig.from_pretrained(task.path).architectures[0].endswith("ForSequenceClassification")
    assert "classifier" in read_manifest(task.path)["student"]["heads_from_teacher"]  # the family's own head, carried
    assert pretrain.main([*common, "--nsp", "--output-dir", str(tmp_path / "nsp")]) == 2  # BERT's objective alone
    assert not (tmp_path / "nsp").exists()


def test_an_mlm_head_is_named_by_the_architecture_not_guessed():
    """ELECTRA's pre-training class is the discriminator (no MLM head): general distillation must not ask it
    for MLM logits, and continued pretraining must warm a new head up first."""
    from types import SimpleNamespace

    from shrinkbert.core.families import is_mlm

    assert not is_mlm(SimpleNamespace(architectures=["ElectraForPreTraining"]))
    assert is_mlm(SimpleNamespace(architectures=["BertForPreTraining"]))
    assert is_mlm(SimpleNamespace(architectures=["RobertaForMaskedLM"])) and is_mlm(SimpleNamespace(architectures=["ElectraForMaskedLM"]))
    assert not is_mlm(SimpleNamespace(architectures=None))
    # next-sentence prediction is BERT's objective alone (pretrain --nsp refuses the others in one line)
    from shrinkbert.core.families import next_sentence_prediction

    assert next_sentence_prediction(SimpleNamespace(model_type="bert"))
    assert not any(next_sentence_prediction(SimpleNamespace(model_type=t))
                   for t in ("roberta", "xlm-roberta", "electra", "mpnet", "distilbert", "deberta-v2", "modernbert", "xlnet"))
