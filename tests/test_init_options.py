"""Students past the plateau: PCA-projected embeddings, a learned projection folded
into the table, several teachers averaged, a student as the teacher (an assistant)."""
from __future__ import annotations

import pytest
import torch
from transformers import AutoModelForSequenceClassification, BertConfig, BertForSequenceClassification

from shrinkbert.core.errors import ShrinkbertError
from shrinkbert.students.ensemble import (TeacherEnsemble, TeacherSet, describe_teachers, split_teachers,
                                          teacher_source)
from shrinkbert.students.init import init_from_teacher, pca_basis, stream_basis
from shrinkbert.students.projection import attach_projection, fold_projection


def _bert(hidden=32, layers=2, heads=4, intermediate=64, seed=0) -> BertForSequenceClassification:
    torch.manual_seed(seed)
    config = BertConfig(vocab_size=120, hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
                        intermediate_size=intermediate, max_position_embeddings=32, num_labels=3)
    return BertForSequenceClassification(config).eval()


def _inputs(seed=1):
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(1, 120, (4, 9), generator=generator)
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids)}


def _logits(model, inputs):
    with torch.no_grad():
        return model(**inputs).logits


def test_pca_basis_is_orthonormal_and_keeps_more_variance_than_any_columns():
    teacher = _bert()
    table = teacher.bert.embeddings.word_embeddings.weight.detach()
    basis = pca_basis(table, 8)
    assert torch.allclose(basis.T @ basis, torch.eye(8), atol=1e-5)
    centred = table - table.mean(dim=0)
    kept_pca = (centred @ basis).pow(2).sum()
    kept_best_columns = centred.pow(2).sum(dim=0).topk(8).values.sum()
    assert kept_pca >= kept_best_columns * (1 - 1e-5)


def test_pca_init_projects_every_stream_weight_and_columns_init_is_unchanged():
    teacher = _bert()
    student = _bert(hidden=16, heads=2, intermediate=32, seed=5)
    record = init_from_teacher(student, teacher, embeddings="pca")
    basis = stream_basis(teacher, 16, embeddings="pca")
    t_emb, s_emb = teacher.bert.embeddings, student.bert.embeddings
    assert record["embeddings"] == "pca"
    assert torch.allclose(s_emb.word_embeddings.weight, t_emb.word_embeddings.weight @ basis, atol=1e-6)
    assert torch.allclose(s_emb.LayerNorm.bias, basis.T @ t_emb.LayerNorm.bias, atol=1e-6)
    # the layers read the stream through the same basis: the query of layer 1 (from teacher layer 1)
    t_query = teacher.bert.encoder.layer[0].attention.self.query.weight
    s_query = student.bert.encoder.layer[0].attention.self.query.weight
    projected = t_query @ basis  # every student row is a kept teacher row (whole heads), projected
    assert all(torch.isclose(projected, row, atol=1e-6).all(dim=1).any() for row in s_query)
    assert torch.isfinite(_logits(student, _inputs())).all()
    # "columns" (today's init) still equals the one-hot basis of the kept dims
    columns = _bert(hidden=16, heads=2, intermediate=32, seed=5)
    init_from_teacher(columns, teacher)
    one_hot = stream_basis(teacher, 16)
    assert torch.equal(columns.bert.embeddings.word_embeddings.weight, t_emb.word_embeddings.weight @ one_hot)
    assert not torch.allclose(columns.bert.embeddings.word_embeddings.weight, s_emb.word_embeddings.weight)
    with pytest.raises(ShrinkbertError, match="embeddings"):
        init_from_teacher(columns, teacher, embeddings="svd")


def test_init_layers_copy_the_teacher_layers_named():
    teacher, student = _bert(layers=4), _bert(layers=2, seed=3)
    record = init_from_teacher(student, teacher, layer_ids=[0, 1])  # --init-layers 1,2
    assert record["layers_from_teacher"] == [1, 2]
    for s_layer, t_layer in zip(student.bert.encoder.layer, teacher.bert.encoder.layer[:2]):
        assert torch.equal(s_layer.output.dense.weight, t_layer.output.dense.weight)


def test_full_width_columns_init_is_an_exact_copy():
    teacher, student = _bert(), _bert(seed=3)
    init_from_teacher(student, teacher)
    inputs = _inputs()
    assert torch.allclose(_logits(student, inputs), _logits(teacher, inputs), atol=1e-6)


@pytest.mark.parametrize("embeddings", ["columns", "pca"])
def test_projection_starts_where_init_left_and_folds_to_the_same_logits(embeddings, tmp_path):
    teacher = _bert()
    student = _bert(hidden=16, heads=2, intermediate=32, seed=5)
    init_from_teacher(student, teacher, embeddings=embeddings)
    inputs = _inputs()
    before = _logits(student, inputs)
    attach_projection(student, teacher, stream_basis(teacher, 16, embeddings=embeddings))
    assert torch.allclose(_logits(student, inputs), before, atol=1e-5)  # attaching changes nothing
    trainable = [n for n, p in student.named_parameters() if "word_embeddings" in n]
    assert trainable == ["bert.embeddings.word_embeddings.projection"]  # the table itself is frozen
    with torch.no_grad():  # what training does: move the projection
        student.bert.embeddings.word_embeddings.projection.add_(0.05 * torch.randn(32, 16))
    trained = _logits(student, inputs)
    assert not torch.allclose(trained, before, atol=1e-3)
    assert fold_projection(student) and not fold_projection(student)
    assert isinstance(student.bert.embeddings.word_embeddings, torch.nn.Embedding)
    assert torch.allclose(_logits(student, inputs), trained, atol=1e-5)  # folded: the same logits
    student.save_pretrained(tmp_path)
    reloaded = AutoModelForSequenceClassification.from_pretrained(tmp_path).eval()
    assert torch.allclose(_logits(reloaded, inputs), trained, atol=1e-5)


def test_two_identical_teachers_are_one_teacher_and_two_different_average_their_soft_labels():
    one, other = _bert(), _bert(seed=7)
    inputs, temperature = _inputs(), 2.0
    pair = TeacherEnsemble([one, _bert()], temperature)  # the same weights twice
    soft = lambda logits: torch.softmax(logits / temperature, dim=-1)  # noqa: E731
    with torch.no_grad():
        assert torch.allclose(soft(pair(**inputs).logits), soft(one(**inputs).logits), atol=1e-6)
        mixed = TeacherEnsemble([one, other], temperature)(**inputs, output_hidden_states=True)
        expected = (soft(one(**inputs).logits) + soft(other(**inputs).logits)) / 2
        assert torch.allclose(soft(mixed.logits), expected, atol=1e-6)
        assert torch.allclose(mixed.hidden_states[-1], one(**inputs, output_hidden_states=True).hidden_states[-1])


def test_teacher_lists_and_cache_identity(tmp_path):
    assert split_teachers("a,b") == ["a", "b"] and split_teachers("a") == ["a"] and split_teachers("") == []
    with pytest.raises(ShrinkbertError, match="twice"):
        split_teachers("a,a")
    assert teacher_source("a", 2.0) == "a"
    pair = teacher_source("a,b", 2.0)
    assert isinstance(pair, TeacherSet) and str(pair) == "a,b"
    identity = pair.cache_identity(lambda p: f"h({p})")
    assert identity == "ensemble:h(a),h(b)@T=2" != teacher_source("a,b", 1.0).cache_identity(lambda p: f"h({p})")
    assert describe_teachers("a") == [{"path": "a", "stage": None, "role": "teacher"}]


def _distill_cfg(teacher, task, out, **overrides):
    from shrinkbert.core.config import build_config
    from shrinkbert.students.distill import Config

    values = {"teacher": str(teacher), "task": str(task), "output_dir": str(out), "max_steps": 2, "batch_size": 8,
              "checkpoint_every": 0, "log_every": 1, "max_length": 32}
    values.update(overrides)
    return build_config(Config, values)


def test_distill_from_an_ensemble_with_a_projected_table_then_from_that_student(tiny_bert, tiny_csv, cache_env,
                                                                                 tmp_path):
    from fixtures import make_tiny_bert

    from shrinkbert.core.artifacts import read_manifest
    from shrinkbert.students.distill import run

    second = make_tiny_bert(tmp_path / "second", seed=4)
    student = run(_distill_cfg(f"{tiny_bert},{second}", tiny_csv, tmp_path / "student", hidden=16, heads=2,
                               intermediate=32, init_embeddings="projected"))
    manifest = read_manifest(student)
    assert [p["path"] for p in manifest["parents"]] == [str(tiny_bert), str(second)]
    assert [t["role"] for t in manifest["student"]["teachers"]] == ["teacher", "teacher"]
    assert manifest["student"]["init"]["projection"] == "folded into the word-embedding table"
    model = AutoModelForSequenceClassification.from_pretrained(student)  # a plain BERT: no projection left
    assert model.bert.embeddings.word_embeddings.weight.shape[1] == 16
    assert manifest["num_parameters"] == sum(p.numel() for p in model.parameters())  # counted as saved, folded
    # the student as a teacher assistant for a smaller one
    smaller = read_manifest(run(_distill_cfg(student, tiny_csv, tmp_path / "smaller", layers=1, hidden=16, heads=2,
                                             intermediate=32, init_embeddings="pca", init_layers="1")))
    assert smaller["student"]["init"]["layers_from_teacher"] == [1]  # --init-layers 1, not the uniform 2
    assert smaller["student"]["teachers"] == [{"path": str(student), "stage": "distill", "role": "assistant"}]
    assert smaller["student"]["init"]["embeddings"] == "pca"
    with pytest.raises(ShrinkbertError, match="init-embeddings"):
        run(_distill_cfg(student, tiny_csv, tmp_path / "x", init="random", init_embeddings="pca"))


def test_auto_init_is_pca_for_a_narrower_task_student_only(tiny_bert, tiny_csv, cache_env, tmp_path):
    from shrinkbert.core.artifacts import read_manifest
    from shrinkbert.students.distill import run
    from shrinkbert.students.distill_models import init_embeddings

    assert init_embeddings("auto", 160, 384) == "pca" and init_embeddings("auto", 384, 384) == "columns"
    assert init_embeddings("auto", 160, 384, masked_lm=True) == "columns"  # masked-LM distillation: not measured
    assert init_embeddings("projected", 160, 384) == "pca" and init_embeddings("columns", 160, 384) == "columns"
    narrow = read_manifest(run(_distill_cfg(tiny_bert, tiny_csv, tmp_path / "narrow", hidden=16, heads=2,
                                            intermediate=32)))
    assert narrow["config"]["init_embeddings"] == "auto" and narrow["student"]["init"]["embeddings"] == "pca"
    full = read_manifest(run(_distill_cfg(tiny_bert, tiny_csv, tmp_path / "full", intermediate=32)))
    assert full["student"]["init"]["embeddings"] == "columns"


def test_frozen_embeddings_leave_the_table_as_initialised_and_train_the_rest(tiny_bert, tiny_csv, cache_env,
                                                                             tmp_path):
    from shrinkbert.core.artifacts import read_manifest
    from shrinkbert.students.distill import run

    teacher = AutoModelForSequenceClassification.from_pretrained(tiny_bert)
    out = run(_distill_cfg(tiny_bert, tiny_csv, tmp_path / "frozen", layers=1, freeze_embeddings=True,
                           learning_rate=1e-2))
    student = AutoModelForSequenceClassification.from_pretrained(out)
    # a full-width student starts from the teacher's table exactly; frozen, it ends there bit for bit
    assert torch.equal(student.bert.embeddings.word_embeddings.weight, teacher.bert.embeddings.word_embeddings.weight)
    # the layer it took from the teacher (its first, as --layers 1 maps it) and the embedding LayerNorm moved
    assert not torch.equal(student.bert.encoder.layer[0].attention.self.query.weight,
                           teacher.bert.encoder.layer[1].attention.self.query.weight)
    assert not torch.equal(student.bert.embeddings.LayerNorm.weight, teacher.bert.embeddings.LayerNorm.weight)
    assert read_manifest(out)["student"]["frozen"] == "word embeddings"
    with pytest.raises(ShrinkbertError, match="freeze-embeddings"):
        run(_distill_cfg(tiny_bert, tiny_csv, tmp_path / "x", hidden=16, heads=2, init_embeddings="projected",
                         freeze_embeddings=True))
