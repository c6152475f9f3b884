"""students/: shapes from targets, init from the teacher, KD losses, teacher-output cache, the stage."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from shrinkbert.core.errors import ShrinkbertError


@pytest.fixture(scope="module")
def teacher4(tmp_path_factory) -> Path:
    """A 4-layer tiny teacher (hidden 32, 4 heads, FFN 64), so students can drop layers."""
    from fixtures import make_tiny_bert

    return make_tiny_bert(tmp_path_factory.mktemp("t4") / "teacher", layers=4, seed=1)


def _load(path, **kwargs):
    from transformers import AutoModelForSequenceClassification

    from shrinkbert.core.models import load_model

    return load_model(AutoModelForSequenceClassification, path, **kwargs).eval()


def _batch(tokenizer_dir, texts=("good movie", "the plot was dull and boring")):
    from shrinkbert.core.models import load_tokenizer

    tok = load_tokenizer(tokenizer_dir)
    batch = dict(tok(list(texts), padding=True, return_tensors="pt", return_token_type_ids=True))
    batch["labels"] = torch.tensor([1, 0])[: len(texts)]
    return batch


# ---------------------------------------------------------------------------------------------
# losses


def test_each_loss_zero_for_identical_and_positive_otherwise():
    from shrinkbert.students.losses import attention_loss, kd_logits_loss, masked_mse

    torch.manual_seed(0)
    logits = torch.randn(4, 3)
    assert kd_logits_loss(logits, logits.clone(), 2.0).item() == pytest.approx(0.0, abs=1e-6)
    assert kd_logits_loss(logits, torch.randn(4, 3), 2.0).item() > 0
    hidden, mask = torch.randn(2, 5, 8), torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]])
    assert masked_mse(hidden, hidden.clone(), mask).item() == 0.0
    other = hidden.clone()
    other[0, 4] += 100.0  # a padding position: ignored
    assert masked_mse(hidden, other, mask).item() == 0.0
    other[0, 0] += 1.0
    assert masked_mse(hidden, other, mask).item() > 0
    attn = torch.softmax(torch.randn(2, 4, 5, 5), -1)
    for kind in ("kl", "mse"):
        assert attention_loss(attn, attn.clone(), mask, kind).item() == pytest.approx(0.0, abs=1e-6)
        assert attention_loss(attn, torch.softmax(torch.randn(2, 4, 5, 5), -1), mask, kind).item() > 0
    # different head counts: averaged over heads, still zero for the same mean distribution
    assert attention_loss(attn.mean(1, keepdim=True).expand(2, 2, 5, 5), attn, mask).item() == pytest.approx(0, abs=1e-6)


def test_distill_loss_all_terms_zero_against_itself_positive_against_another(tiny_bert):
    from shrinkbert.students.losses import DistillLoss, LossWeights, parse_layer_map

    model = _load(tiny_bert, attn_implementation="eager")
    batch = _batch(tiny_bert)
    inputs = {k: batch[k] for k in ("input_ids", "attention_mask", "token_type_ids")}
    weights = LossWeights(logits=1, hidden=1, attention=1, embedding=1, hard=0)
    loss = DistillLoss(weights, parse_layer_map(None, 2, 2), 32, 32, temperature=2.0)
    assert len(loss.projections) == 0  # same widths: nothing to learn
    with torch.no_grad():
        out = model(**inputs, output_hidden_states=True, output_attentions=True)
        total, logs = loss(out, {"logits": out.logits, "hidden_states": out.hidden_states,
                                 "attentions": out.attentions}, batch)
    assert set(logs) == {"loss_logits", "loss_hidden", "loss_attention", "loss_embedding"}
    assert total.item() == pytest.approx(0.0, abs=1e-5)
    other = _load(tiny_bert, attn_implementation="eager")
    torch.manual_seed(3)
    for p in other.parameters():
        p.data.add_(torch.randn_like(p) * 0.2)
    with torch.no_grad():
        t_out = other(**inputs, output_hidden_states=True, output_attentions=True)
        _, logs = loss(out, {"logits": t_out.logits, "hidden_states": t_out.hidden_states,
                             "attentions": t_out.attentions}, batch)
    assert all(v > 0 for v in logs.values()), logs


def test_switched_off_losses_are_not_computed_and_projections_only_when_widths_differ():
    from shrinkbert.students.losses import DistillLoss, LossWeights

    loss = DistillLoss(LossWeights(logits=1), {1: 2}, 16, 32)
    assert not loss.needs_hidden and not loss.needs_attentions and len(loss.projections) == 0
    out = type("Out", (), {"logits": torch.zeros(2, 2), "hidden_states": None, "attentions": None})()
    total, logs = loss(out, {"logits": torch.zeros(2, 2)}, {"attention_mask": torch.ones(2, 3)})
    assert set(logs) == {"loss_logits"}  # hidden states were never asked for
    projected = DistillLoss(LossWeights(logits=0, hidden=1, embedding=1), {1: 2, 2: 4}, 16, 32)
    assert sorted(projected.projections) == ["0", "1", "2"]
    assert projected.teacher_hidden_layers() == [0, 2, 4]
    with pytest.raises(ShrinkbertError, match="every distillation loss weight is 0"):
        DistillLoss(LossWeights(logits=0), {}, 8, 8)(out, {}, {})


def test_layer_map_parsing():
    from shrinkbert.students.losses import format_layer_map, parse_layer_map

    assert parse_layer_map(None, 3, 6) == {1: 2, 2: 4, 3: 6}
    assert parse_layer_map("", 2, 6) == {1: 3, 2: 6}
    assert parse_layer_map(None, 4, 6) == {1: 2, 2: 3, 3: 5, 4: 6}
    assert parse_layer_map("0:0, 1:2,3:6", 3, 6) == {0: 0, 1: 2, 3: 6}
    assert format_layer_map({1: 2, 2: 4}) == "1:2,2:4"
    for bad, message in (("1-2", "not 'student:teacher'"), ("4:1", "student layer 4"),
                         ("1:7", "teacher layer 7"), ("1:2,1:3", "twice")):
        with pytest.raises(ShrinkbertError, match=message):
            parse_layer_map(bad, 3, 6)


# ---------------------------------------------------------------------------------------------
# shapes


def test_parameter_count_formula_matches_real_models():
    from transformers import BertConfig, BertForMaskedLM, BertForSequenceClassification, BertModel

    from shrinkbert.core.models import count_parameters as real
    from shrinkbert.students.shape import count_config_parameters

    config = BertConfig(vocab_size=101, hidden_size=24, num_hidden_layers=3, num_attention_heads=4,
                        intermediate_size=40, max_position_embeddings=64, num_labels=3)
    assert count_config_parameters(config) == real(BertForSequenceClassification(config))
    assert count_config_parameters(config, head="mlm") == real(BertForMaskedLM(config))
    assert count_config_parameters(config, head="none") == real(BertModel(config))
    pruned = BertForSequenceClassification(config)
    pruned.prune_heads({0: [1, 2], 2: [0]})
    assert count_config_parameters(pruned.config) == real(pruned)


def test_parse_target():
    from shrinkbert.students.shape import parse_target

    assert parse_target("25%").kind == "fraction" and parse_target("25%").value == 0.25
    assert parse_target("20MB").value == 20e6 and parse_target("20MiB").value == 20 * 2 ** 20
    assert parse_target("4ms").kind == "ms" and parse_target("4.5 ms").value == 4.5
    for bad in ("25", "fast", "0%", "150%"):
        with pytest.raises(ShrinkbertError):
            parse_target(bad)


def _minilm_config():
    from transformers import BertConfig

    return BertConfig(vocab_size=30522, hidden_size=384, num_hidden_layers=6, num_attention_heads=12,
                      intermediate_size=1536, num_labels=2)


def test_size_targets_give_shapes_within_the_target():
    from shrinkbert.students.shape import choose_shape, count_config_parameters, fp32_bytes, shape_config

    teacher = _minilm_config()
    teacher_params = count_config_parameters(teacher)
    for target, limit in (("25%", 0.25 * teacher_params), ("50%", 0.5 * teacher_params), ("20MB", 20e6 / 4)):
        shape, record = choose_shape(teacher, target=target, log=lambda _: None)
        params = count_config_parameters(shape_config(teacher, shape))
        assert params <= limit and record["num_parameters"] == params
        assert shape.hidden % shape.heads == 0 and shape.hidden // shape.heads == 32  # whole teacher heads
        assert shape.layers <= 6
    # a pinned dimension is respected
    shape, _ = choose_shape(teacher, target="25%", layers=4, log=lambda _: None)
    assert shape.layers == 4 and fp32_bytes(count_config_parameters(shape_config(teacher, shape))) <= 0.25 * 4 * teacher_params
    # explicit shape, no target
    shape, _ = choose_shape(teacher, layers=4, hidden=192, heads=4, intermediate=768, log=lambda _: None)
    assert (shape.layers, shape.hidden, shape.heads, shape.intermediate) == (4, 192, 4, 768)


def test_unmeetable_target_says_the_minimum():
    from shrinkbert.students.shape import choose_shape

    with pytest.raises(ShrinkbertError, match=r"cannot be met: the smallest possible student \(1L/H32.*has 1,00"):
        choose_shape(_minilm_config(), target="1MB", log=lambda _: None)
    with pytest.raises(ShrinkbertError, match="smallest possible student"):
        choose_shape(_minilm_config(), target="2%", log=lambda _: None)
    with pytest.raises(ShrinkbertError, match="at most its 6 layers"):
        choose_shape(_minilm_config(), layers=8, log=lambda _: None)


def test_latency_target_picks_a_fitting_shape(teacher4):
    from transformers import AutoConfig

    from shrinkbert.students.shape import Shape, choose_shape, pick_by_latency, parse_target

    config = AutoConfig.from_pretrained(teacher4)
    lines = []
    shape, record = choose_shape(config, target="10000ms", seq_len=16, threads=1, log=lines.append)
    assert shape == Shape(4, 32, 4, 64)  # generous: the biggest candidate fits
    assert "p50_ms" in lines[0] and all(r["fits"] for r in record["candidates"])
    # with a deterministic timer: cost = layers * hidden; deeper shapes after a miss are skipped
    timer = lambda model, ids: model.config.num_hidden_layers * model.config.hidden_size / 32.0  # noqa: E731
    shape, rows = pick_by_latency(config, parse_target("2.5ms"), seq_len=16, threads=1, timer=timer,
                                  log=lambda _: None)
    # within 2.5: 2L/H32, 3L/H24, 4L/H16; the prior layers x hidden^2 (2048 > 1728 > 1024) takes the widest
    assert shape == Shape(2, 32, 4, 64)
    assert any(r["p50_ms"] is None for r in rows)  # skipped untimed
    with pytest.raises(ShrinkbertError, match="fastest candidate"):
        pick_by_latency(config, parse_target("0.001ms"), seq_len=16, threads=1, timer=timer, log=lambda _: None)
    # half-width FFNs are candidates too: with an FFN that costs time, a third layer with half the FFN
    # fits where a third full one does not, and the prior prefers the deeper shape
    timer = lambda model, ids: (model.config.num_hidden_layers  # noqa: E731
                                * (model.config.hidden_size + model.config.intermediate_size / 2) / 48.0)
    shape, rows = pick_by_latency(config, parse_target("3.0ms"), seq_len=16, threads=1, timer=timer,
                                  log=lambda _: None)
    assert shape == Shape(3, 32, 4, 32)
    assert {"3L/H32/A4/I64", "3L/H32/A4/I32"} <= {r["shape"] for r in rows}


# ---------------------------------------------------------------------------------------------
# init


def test_student_with_teacher_widths_reproduces_chosen_layers_exactly(teacher4):
    from transformers import BertForSequenceClassification

    from shrinkbert.students.init import init_from_teacher, uniform_layer_ids
    from shrinkbert.students.shape import Shape, shape_config

    teacher = _load(teacher4)
    assert uniform_layer_ids(4, 2) == [1, 3] and uniform_layer_ids(6, 3) == [1, 3, 5]
    student = BertForSequenceClassification(shape_config(teacher.config, Shape(2, 32, 4, 64)))
    record = init_from_teacher(student, teacher, layer_ids=[0, 2])
    assert record["layers_from_teacher"] == [1, 3] and "classifier" in record["carried"]
    t_state, s_state = teacher.state_dict(), student.state_dict()
    for name, value in s_state.items():
        source = name
        for s_i, t_i in ((0, 0), (1, 2)):
            source = source.replace(f"encoder.layer.{s_i}.", f"encoder.layer.{t_i}.") if f"layer.{s_i}." in name else source
        assert torch.equal(value, t_state[source]), name
    # a full-depth full-width student is the teacher
    full = BertForSequenceClassification(teacher.config)
    init_from_teacher(full, teacher)
    full.eval()
    batch = _batch(teacher4)
    inputs = {k: batch[k] for k in ("input_ids", "attention_mask", "token_type_ids")}
    with torch.no_grad():
        assert torch.allclose(full(**inputs).logits, teacher(**inputs).logits)


def test_narrow_student_keeps_whole_heads_and_consistent_dims(teacher4):
    from transformers import BertForSequenceClassification

    from shrinkbert.students.init import init_from_teacher
    from shrinkbert.students.shape import Shape, shape_config

    teacher = _load(teacher4)
    student = BertForSequenceClassification(shape_config(teacher.config, Shape(2, 16, 2, 32)))
    init_from_teacher(student, teacher, keep="first")
    t_layer, s_layer = teacher.bert.encoder.layer[3], student.bert.encoder.layer[1]
    # keep=first: hidden dims 0..15 and heads 0, 1 (head size 8 = teacher's)
    assert torch.equal(s_layer.attention.self.query.weight, t_layer.attention.self.query.weight[:16, :16])
    assert torch.equal(s_layer.intermediate.dense.weight, t_layer.intermediate.dense.weight[:32, :16])
    assert torch.equal(student.classifier.weight, teacher.classifier.weight[:, :16])
    by_norm = BertForSequenceClassification(shape_config(teacher.config, Shape(2, 16, 2, 32)))
    init_from_teacher(by_norm, teacher, keep="norm")
    columns = teacher.bert.embeddings.word_embeddings.weight.norm(dim=0)
    kept = torch.sort(torch.topk(columns, 16).indices).values
    assert torch.equal(by_norm.bert.embeddings.word_embeddings.weight,
                       teacher.bert.embeddings.word_embeddings.weight[:, kept])
    q = by_norm.bert.encoder.layer[0].attention.self.query.weight.view(2, 8, 16)
    t_q = teacher.bert.encoder.layer[1].attention.self.query.weight[:, kept].view(4, 8, 16)
    assert all(any(torch.equal(q[h], t_q[k]) for k in range(4)) for h in range(2))  # whole teacher heads
    from shrinkbert.students.init import carry_heads

    fresh = BertForSequenceClassification(teacher.config)
    assert carry_heads(fresh, teacher) == ["pooler", "classifier"]
    assert torch.equal(fresh.classifier.weight, teacher.classifier.weight)
    assert carry_heads(student, teacher) == []  # narrower: nothing to carry
    with pytest.raises(ShrinkbertError, match="wider than the teacher"):
        init_from_teacher(BertForSequenceClassification(shape_config(teacher.config, Shape(1, 64, 4, 64))), teacher)


# ---------------------------------------------------------------------------------------------
# cache and stage


def _cfg(teacher, task, out, **overrides):
    from shrinkbert.core.config import build_config
    from shrinkbert.students.distill import Config

    values = {"teacher": str(teacher), "task": str(task), "output_dir": str(out), "epochs": 1,
              "batch_size": 8, "checkpoint_every": 0, "log_every": 1}
    values.update(overrides)
    return build_config(Config, values)


def test_teacher_outputs_under_bf16_autocast_are_their_own_cache_entry_and_near_fp32(teacher4, tiny_csv, cache_env):
    """--mixed-precision's autocast reaches the teacher's cached pass: computed in bf16 under a key of its own
    (an fp32 cache is never read as a bf16 one, nor the other way), logged as such, and close to fp32."""
    from shrinkbert.core.data.load import load_task, tokenize_task
    from shrinkbert.core.models import load_tokenizer
    from shrinkbert.students.cache import load_or_compute
    from shrinkbert.students.distill_data import make_collate, with_row_index

    tokenizer = load_tokenizer(teacher4)
    task, splits = load_task(str(tiny_csv))
    data = with_row_index(tokenize_task(splits, tokenizer, task, max_length=32)["train"])
    collate, teacher, logged = make_collate(tokenizer), _load(teacher4), []
    fp32, fp32_path, _ = load_or_compute(teacher4, lambda: teacher, data, collate, 32, [2], cache_dir=cache_env,
                                         batch_size=16, log=logged.append)
    bf16, bf16_path, hit = load_or_compute(teacher4, lambda: teacher, data, collate, 32, [2], cache_dir=cache_env,
                                           batch_size=16, log=logged.append, precision="bf16")
    assert not hit and bf16_path != fp32_path and any("bf16 autocast" in line for line in logged), logged
    assert not any("autocast" in line for line in logged[:2])  # the fp32 pass says nothing of autocast
    assert not torch.equal(bf16.logits, fp32.logits)  # really computed in bf16 ...
    assert torch.allclose(bf16.logits, fp32.logits, atol=0.05)  # ... and close to the fp32 outputs
    assert torch.allclose(bf16.hidden[2].float(), fp32.hidden[2].float(), atol=0.1)
    again, _, hit = load_or_compute(teacher4, lambda: teacher, data, collate, 32, [2], cache_dir=cache_env,
                                    log=lambda _: None, precision="bf16")
    assert hit and torch.equal(again.logits, bf16.logits)


def test_auto_runs_the_teachers_cached_pass_in_the_precision_it_picks_for_the_teachers_width(teacher4, tiny_csv,
                                                                                              cache_env, tmp_path,
                                                                                              monkeypatch):
    """Under `auto` the teacher's cached pass follows the width rule (bench/edge_arms.py's bf16-teacher arm
    compares the two): fp32 for the tests' H32 teacher, bf16 once H32 counts as wide on a bf16 CPU."""
    import shrinkbert.core.train as train_module
    import shrinkbert.students.distill as distill
    from shrinkbert.core.artifacts import read_manifest

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(train_module, "cpu_has_bf16", lambda: True)
    narrow = distill.run(_cfg(teacher4, tiny_csv, tmp_path / "narrow", layers=1, max_steps=1))
    monkeypatch.setattr(train_module, "AUTO_BF16_MIN_HIDDEN", 32)
    wide = distill.run(_cfg(teacher4, tiny_csv, tmp_path / "wide", layers=1, max_steps=1))
    outputs = [read_manifest(out)["student"]["teacher_outputs"] for out in (narrow, wide)]
    assert [o["precision"] for o in outputs] == ["no", "bf16"]
    assert outputs[0]["file"] != outputs[1]["file"] and not outputs[1]["hit"]  # its own cache entry


def test_a_grown_dataset_takes_the_rows_an_earlier_cache_holds_and_labels_only_the_new_ones(teacher4, tiny_csv,
                                                                                              cache_env):
    """A transfer set grown past an earlier one: its rows are found by their tokens' digest, the teacher runs on
    the others only, and the result equals a pass over all of them; hidden-state caches are not mixed."""
    from shrinkbert.core.data.load import load_task, tokenize_task
    from shrinkbert.core.models import load_tokenizer
    from shrinkbert.students.cache import TeacherCache, compute_teacher_outputs, load_or_compute
    from shrinkbert.students.distill_data import make_collate, with_row_index

    tokenizer = load_tokenizer(teacher4)
    task, splits = load_task(str(tiny_csv))
    data = with_row_index(tokenize_task(splits, tokenizer, task, max_length=32)["train"])
    collate, teacher, logged = make_collate(tokenizer), _load(teacher4), []
    first = with_row_index(data.select(range(0, len(data), 2)))  # every other row: the grown set interleaves them
    small, small_path, _ = load_or_compute(teacher4, lambda: teacher, first, collate, 32, cache_dir=cache_env,
                                           log=logged.append)
    assert small.reused_rows == 0 and small.row_digest.shape == (len(first), 2)
    seen = []
    grown, grown_path, hit = load_or_compute(teacher4, lambda: seen.append(1) or teacher, data, collate, 32,
                                             cache_dir=cache_env, log=logged.append)
    assert not hit and grown_path != small_path and seen == [1]
    assert grown.reused_rows == len(first) and any(f"{len(first):,} of {len(data):,} rows found" in line
                                                   for line in logged), logged
    full = compute_teacher_outputs(teacher, data, collate, log=lambda _: None)
    assert torch.allclose(grown.logits, full.logits, atol=1e-5)
    assert torch.allclose(grown.logits[::2], small.logits, atol=1e-6)  # the reused rows, where they belong
    assert torch.equal(TeacherCache.load(grown_path).logits, grown.logits)

    # a cache made before row digests gains them on its next hit, and is then found by a grown set
    TeacherCache(small.logits, key=small.key).save(small_path)
    assert TeacherCache.load(small_path).row_digest is None
    load_or_compute(teacher4, lambda: teacher, first, collate, 32, cache_dir=cache_env, log=lambda _: None)
    assert torch.equal(TeacherCache.load(small_path).row_digest, small.row_digest)

    # hidden states ride along only with a whole pass of their own
    with_hidden, _, _ = load_or_compute(teacher4, lambda: teacher, data, collate, 32, [2], cache_dir=cache_env,
                                        log=lambda _: None)
    assert with_hidden.reused_rows == 0 and with_hidden.row_digest is None


def test_cached_and_live_teacher_give_the_same_first_step_losses(teacher4, tiny_csv, cache_env):
    from shrinkbert.core.data.load import load_task, tokenize_task
    from shrinkbert.core.models import load_tokenizer
    from shrinkbert.students.cache import TeacherCache, load_or_compute
    from shrinkbert.students.distill_data import make_collate, with_row_index
    from shrinkbert.students.distill_loss import make_loss_fn
    from shrinkbert.students.losses import DistillLoss, LossWeights

    tokenizer = load_tokenizer(teacher4)
    task, splits = load_task(str(tiny_csv))
    data = with_row_index(tokenize_task(splits, tokenizer, task, max_length=32)["train"])
    collate = make_collate(tokenizer)
    teacher = _load(teacher4)
    calls = []
    cache, path, hit = load_or_compute(teacher4, lambda: calls.append(1) or teacher, data, collate, 32, [0, 2, 4],
                                       cache_dir=cache_env, batch_size=16, log=lambda _: None)
    assert not hit and calls == [1] and path.is_file()
    cache, path2, hit = load_or_compute(teacher4, lambda: calls.append(1) or teacher, data, collate, 32, [0, 2, 4],
                                        cache_dir=cache_env, log=lambda _: None)
    assert hit and path2 == path and calls == [1]  # the teacher is not even loaded on a hit
    assert TeacherCache.load(path).hidden[2].dtype == torch.float16
    _, other, _ = load_or_compute(teacher4, lambda: teacher, data, collate, 64, [0, 2, 4], cache_dir=cache_env,
                                  log=lambda _: None)
    assert other != path  # max_length is part of the key

    batch = collate([data[i] for i in (5, 1, 7, 2)])  # a shuffled batch, different padding than the cache pass
    for weights, tol in ((LossWeights(logits=1, hard=1), 1e-5), (LossWeights(logits=1, hidden=1, embedding=1), 2e-3)):
        torch.manual_seed(0)
        student = _load(teacher4)
        loss = DistillLoss(weights, {1: 2, 2: 4}, 32, 32, temperature=2.0)
        student.eval()
        cached_loss, cached_logs = make_loss_fn(loss, cache=cache)(student, batch)
        live_loss, live_logs = make_loss_fn(loss, teacher=teacher)(student, batch)
        assert cached_logs.keys() == live_logs.keys()
        for key in live_logs:
            assert cached_logs[key] == pytest.approx(live_logs[key], rel=tol, abs=tol), key


def test_end_to_end_distill_writes_a_loadable_student_with_lineage(teacher4, tiny_csv, cache_env, tmp_path):
    from transformers import AutoModelForSequenceClassification

    from shrinkbert.core.artifacts import read_manifest
    from shrinkbert.students.distill import run

    out = run(_cfg(teacher4, tiny_csv, tmp_path / "student", layers=2, hidden=16, attention_weight=1,
                   hidden_weight=1, hard_weight=0.5))
    model = AutoModelForSequenceClassification.from_pretrained(out)  # plain transformers, no custom code
    assert model.config.num_hidden_layers == 2 and model.config.hidden_size == 16
    saved = json.loads((out / "config.json").read_text())
    assert not any("attn_implementation" in key for key in saved)
    assert model.config._attn_implementation != "eager"
    manifest = read_manifest(out)
    assert manifest["stage"] == "distill" and manifest["parents"][0]["path"] == str(teacher4.resolve())
    assert manifest["parents"][0]["hash"]
    student = manifest["student"]
    assert student["layer_map"] == "1:2,2:4" and student["init"]["layers_from_teacher"] == [2, 4]
    assert student["loss_weights"]["attention"] == 1 and "training-only" in student["projections"]
    metrics = manifest["metrics"]
    for key in ("test_accuracy", "teacher_test_accuracy", "retention", "num_parameters"):
        assert key in metrics
    assert manifest["num_parameters"] == sum(p.numel() for p in model.parameters())
    assert not (tmp_path / "student.ckpt").exists()

    # distil INTO the student just made (the prune stage's recovery path); lineage names both
    recovered = run(_cfg(teacher4, tiny_csv, tmp_path / "recovered", student=str(out)))
    parents = [p["path"] for p in read_manifest(recovered)["parents"]]
    assert parents == [str(teacher4.resolve()), str(out.resolve())]


def _forbid_running_the_teacher(monkeypatch) -> None:
    """From here on, a teacher that distill loads fails the test the moment it runs."""
    import shrinkbert.students.distill_models as models

    real_load = models.load_teacher

    def load_teacher_that_cannot_run(cfg, need_attentions, masked_lm=False):
        teacher = real_load(cfg, need_attentions, masked_lm)

        def refuse(*args, **kwargs):
            raise AssertionError("the teacher ran")

        teacher.forward = refuse
        return teacher

    monkeypatch.setattr(models, "load_teacher", load_teacher_that_cannot_run)


def test_logits_only_distillation_with_warm_cache_never_runs_the_teacher(teacher4, tiny_csv, cache_env,
                                                                          tmp_path, monkeypatch):
    import shrinkbert.students.distill as distill

    cfg = _cfg(teacher4, tiny_csv, tmp_path / "a", layers=2, max_steps=2)
    distill.run(cfg)  # warms the cache (train and test logits)
    _forbid_running_the_teacher(monkeypatch)
    out = distill.run(_cfg(teacher4, tiny_csv, tmp_path / "b", layers=2, max_steps=2))
    from shrinkbert.core.artifacts import read_manifest

    assert read_manifest(out)["student"]["teacher_outputs"]["hit"] is True


def test_general_distillation_from_a_sentence_encoder_with_no_mlm_head(teacher4, tmp_path, cache_env, capsys):
    """all-mpnet-base-v2 as it ships is an encoder with no MLM head: --objective masked-lm distils its hidden
    states alone (asking it for logits would fail), and asking for its MLM logits is one line."""
    from transformers import AutoModelForMaskedLM, BertModel

    from fixtures import restamp, tiny_sentences
    from shrinkbert.students.distill import main

    encoder = tmp_path / "encoder"
    shutil.copytree(teacher4, encoder)
    BertModel(_load(teacher4).config).save_pretrained(encoder)
    restamp(encoder)
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(text for text, _ in tiny_sentences(16)))
    common = ["--teacher", str(encoder), "--objective", "masked-lm", "--corpus", str(corpus), "--layers", "1",
              "--epochs", "1", "--batch-size", "8", "--checkpoint-every", "0"]
    assert main([*common, "--output-dir", str(tmp_path / "mlm-logits")]) == 2
    assert "has no MLM head" in capsys.readouterr().err
    assert not (tmp_path / "mlm-logits").exists()
    assert main([*common, "--logits-weight", "0", "--hidden-weight", "1", "--output-dir", str(tmp_path / "general")]) == 0
    assert AutoModelForMaskedLM.from_pretrained(tmp_path / "general").config.num_hidden_layers == 1


def test_target_and_general_distillation_through_the_cli(teacher4, tmp_path, cache_env):
    from transformers import AutoModelForMaskedLM, BertForMaskedLM

    from shrinkbert.core.artifacts import read_manifest
    from fixtures import restamp, tiny_sentences
    from shrinkbert.students.distill import main

    mlm = tmp_path / "mlm"
    shutil.copytree(teacher4, mlm)
    BertForMaskedLM(_load(teacher4).config).save_pretrained(mlm)
    restamp(mlm)  # a new model in the copied folder: its manifest records the new weights
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(text for text, _ in tiny_sentences(24)))
    assert main(["--teacher", str(mlm), "--objective", "masked-lm", "--corpus", str(corpus), "--target", "60%",
                 "--hidden-weight", "1", "--attention-weight", "1", "--epochs", "1", "--batch-size", "8",
                 "--checkpoint-every", "0", "--output-dir", str(tmp_path / "general")]) == 0
    model = AutoModelForMaskedLM.from_pretrained(tmp_path / "general")
    assert model.config.num_hidden_layers <= 4
    assert read_manifest(tmp_path / "general")["metrics"]["parameter_ratio"] <= 0.6
    assert main(["--teacher", str(teacher4), "--task", "x.csv", "--target", "1%",
                 "--output-dir", str(tmp_path / "never")]) == 2
    assert main(["--task", "x.csv"]) == 2  # no teacher: one line, exit 2
    with pytest.raises(SystemExit) as exit_info:  # help texts hold '%' (argparse formats them)
        main(["--help"])
    assert exit_info.value.code == 0


def test_distil_into_a_pruned_student_with_attention_transfer(teacher4, tiny_csv, cache_env, tmp_path):
    from shrinkbert.core.artifacts import read_manifest, write_manifest
    from shrinkbert.students.distill import run

    pruned = _load(teacher4)
    pruned.prune_heads({0: [0, 1], 3: [2]})  # other head counts than the teacher's in two layers
    pruned.save_pretrained(tmp_path / "pruned")
    for name in ("vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        shutil.copy(teacher4 / name, tmp_path / "pruned" / name)
    write_manifest(tmp_path / "pruned", stage="prune", parents=[teacher4])
    out = run(_cfg(teacher4, tiny_csv, tmp_path / "recovered", student=str(tmp_path / "pruned"),
                   attention_weight=1, hidden_weight=1, max_steps=2))
    model = _load(out)
    assert {int(k): v for k, v in model.config.pruned_heads.items()} == {0: [0, 1], 3: [2]}
    assert read_manifest(out)["student"]["layer_map"] == "1:1,2:2,3:3,4:4"


# ---------------------------------------------------------------------------------------------
# transfer set (augmentation)


def test_transfer_rows_are_deterministic_new_and_keep_pairs_whole():
    from shrinkbert.students.augment import transfer_rows

    texts = ["a warm and clever film with a great cast", "dull", "the plot never moves and the jokes fall flat"]
    first = transfer_rows(texts, None, 4, seed=3, mask_token="[MASK]")
    assert first == transfer_rows(texts, None, 4, seed=3, mask_token="[MASK]")
    assert first != transfer_rows(texts, None, 4, seed=4, mask_token="[MASK]")
    made, pairs = first
    assert pairs is None and 0 < len(made) <= 4 * len(texts)
    assert not set(made) & set(texts) and len(set(made)) == len(made)
    source_words = {w for t in texts for w in t.split()} | {"[MASK]"}
    assert all(set(m.split()) <= source_words for m in made)
    assert any("[MASK]" in m for m in made) and any(len(m.split()) <= 5 for m in made)  # both perturbations occur
    made, pairs = transfer_rows(texts, texts[::-1], 3, seed=0, mask_token="[MASK]", p_mask=0.5)
    assert len(pairs) == len(made)
    assert {len(m.split()) for m in made} <= {len(t.split()) for t in texts}  # masked, never cut


def test_distill_with_a_transfer_set_trains_on_teacher_labelled_copies(teacher4, tiny_csv, cache_env, tmp_path):
    from shrinkbert.core.artifacts import read_manifest
    from shrinkbert.students.distill import run

    plain = read_manifest(run(_cfg(teacher4, tiny_csv, tmp_path / "plain", layers=2, max_steps=1)))
    augmented = read_manifest(run(_cfg(teacher4, tiny_csv, tmp_path / "aug", layers=2, max_steps=1, augment=2,
                                       hard_weight=1.0)))
    assert plain["metrics"]["train_rows"] < augmented["metrics"]["train_rows"] <= 3 * plain["metrics"]["train_rows"]
    with pytest.raises(ShrinkbertError, match="no gold label"):
        run(_cfg(teacher4, tiny_csv, tmp_path / "x", augment=2, logits_weight=0, hard_weight=1.0))


def test_cached_hidden_states_and_attentions_match_live_within_fp16(teacher4, tiny_csv, cache_env):
    """Attention maps are cached compactly (mapped layers, real tokens, fp16) and read back padded."""
    from shrinkbert.core.data.load import load_task, tokenize_task
    from shrinkbert.core.models import load_tokenizer
    from shrinkbert.students.cache import TeacherCache, load_or_compute
    from shrinkbert.students.distill_data import make_collate, with_row_index
    from shrinkbert.students.distill_loss import make_loss_fn
    from shrinkbert.students.losses import DistillLoss, LossWeights

    tokenizer = load_tokenizer(teacher4)
    task, splits = load_task(str(tiny_csv))
    data = with_row_index(tokenize_task(splits, tokenizer, task, max_length=32)["train"])
    collate = make_collate(tokenizer)
    teacher = _load(teacher4, attn_implementation="eager")
    weights = LossWeights(logits=1, hidden=1, attention=1)
    loss = DistillLoss(weights, {1: 2, 2: 4}, 32, 32, temperature=2.0)
    assert loss.teacher_attention_layers() == [1, 3]
    cache, path, hit = load_or_compute(teacher4, lambda: teacher, data, collate, 32, loss.teacher_hidden_layers(),
                                       cache_dir=cache_env, batch_size=16, log=lambda _: None,
                                       attention_layers=loss.teacher_attention_layers())
    logits_only, other, _ = load_or_compute(teacher4, lambda: teacher, data, collate, 32, loss.teacher_hidden_layers(),
                                            cache_dir=cache_env, log=lambda _: None)
    assert other != path and not logits_only.attentions  # the attention layers are part of the key
    stored = TeacherCache.load(path)
    assert stored.attention_layers == [1, 3] and stored.attentions[1].dtype == torch.float16
    real = sum(len(r) for r in data["input_ids"])
    squares = sum(len(r) ** 2 for r in data["input_ids"])
    assert stored.attentions[1].numel() == 4 * squares and stored.hidden[2].shape == (real, 32)  # unpadded

    batch = collate([data[i] for i in (5, 1, 7, 2)])  # other rows, other padding than the cache pass
    mask = batch["attention_mask"].bool()
    with torch.no_grad():
        live = teacher(**{k: batch[k] for k in ("input_ids", "attention_mask", "token_type_ids")},
                       output_hidden_states=True, output_attentions=True)
    got = stored.lookup(batch["row_idx"], batch["input_ids"].shape[1])
    for layer in (2, 4):
        want = live.hidden_states[layer][mask]
        assert torch.allclose(got["hidden_states"][layer][mask], want, rtol=2e-3, atol=2e-3)
    for index in (1, 3):
        want, have = live.attentions[index], got["attentions"][index]
        assert have.shape == want.shape
        keys = mask[:, None, None, :].expand_as(want)
        queries = mask[:, None, :, None].expand_as(want)
        assert torch.allclose(have[keys & queries], want[keys & queries], rtol=2e-3, atol=1e-3)
        assert not have[~keys].any() and not want[~keys].any()  # padded keys get no probability, live or cached
    torch.manual_seed(0)
    student = _load(teacher4, attn_implementation="eager")
    cached_loss, cached_logs = make_loss_fn(loss, cache=stored)(student, batch)
    live_loss, live_logs = make_loss_fn(loss, teacher=teacher)(student, batch)
    assert cached_logs.keys() == live_logs.keys() == {"loss_logits", "loss_hidden", "loss_attention"}
    for key in live_logs:
        assert cached_logs[key] == pytest.approx(live_logs[key], rel=2e-3, abs=2e-3), key


def test_hidden_and_attention_distillation_with_warm_cache_never_runs_the_teacher(teacher4, tiny_csv, cache_env,
                                                                                  tmp_path, monkeypatch):
    import shrinkbert.students.distill as distill
    from shrinkbert.core.artifacts import read_manifest

    weights = {"hidden_weight": 1, "attention_weight": 1, "layers": 2, "max_steps": 2}
    first = distill.run(_cfg(teacher4, tiny_csv, tmp_path / "a", **weights))  # warms the cache
    record = read_manifest(first)["student"]["teacher_outputs"]
    assert record["used"] and record["attention_layers"] == [2, 4] and record["hidden_layers"] == [2, 4]
    _forbid_running_the_teacher(monkeypatch)
    out = distill.run(_cfg(teacher4, tiny_csv, tmp_path / "b", **weights))
    assert read_manifest(out)["student"]["teacher_outputs"]["hit"] is True


def test_a_pruned_models_shape_counts_the_heads_it_kept():
    """A structured prune leaves num_attention_heads as it was and lists the removed heads: the shape a
    manifest records (and the frontier prints) counts what is left, per layer where layers differ."""
    from transformers import BertConfig

    from shrinkbert.frontier import _shape_text
    from shrinkbert.students.shape import model_shape

    config = BertConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=8, intermediate_size=32,
                        pruned_heads={"0": [1, 2, 3, 4], "1": [0, 5, 6, 7]})
    assert model_shape(config) == {"layers": 2, "hidden": 64, "heads": 4, "intermediate": 32}
    config.pruned_heads = {"0": [1, 2, 3, 4, 5], "1": [0]}
    uneven = model_shape(config)
    assert uneven["heads_per_layer"] == [3, 7] and _shape_text(uneven) == "2L/H64/A3-7/F32"
    assert model_shape(BertConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=8))["heads"] == 8


def test_few_training_rows_switch_on_a_transfer_set_and_the_hidden_loss_unless_set_or_off(monkeypatch):
    from shrinkbert.students.configs import DistillConfig
    from shrinkbert.students.objectives.logits import small_data_line
    from shrinkbert.students.distill_data import SMALL_DATA_AUGMENT, small_data_defaults

    monkeypatch.delenv("SHRINKBERT_SMALL_DATA")  # the suite's switch (conftest.py): here the default is tested
    cfg = DistillConfig(small_data="auto")
    record = small_data_defaults(cfg, 1380, supports_transfer=True)
    assert record == {"train_rows": 1380, "switched_on": {"augment": SMALL_DATA_AUGMENT, "hidden_weight": 1.0}}
    assert cfg.augment == SMALL_DATA_AUGMENT and cfg.hidden_weight == 1.0  # the manifest's config is what ran
    assert small_data_line(record).startswith("1,380 training rows is few to distil on: switched on --augment 8")
    chosen = DistillConfig(small_data="auto", transfer_corpus="imdb", hidden_weight=0.5)
    assert small_data_defaults(chosen, 1380, True) == {}  # what the user set stays
    assert chosen.augment == 0 and chosen.hidden_weight == 0.5
    no_transfer = DistillConfig(small_data="auto")  # token and QA tasks: no transfer set, nothing measured
    assert small_data_defaults(no_transfer, 900, supports_transfer=False) == {} and no_transfer.hidden_weight == 0
    off = DistillConfig(small_data="off")
    record = small_data_defaults(off, 1380, True)
    assert record["switched_on"] == {} and record["left_off"] == {"augment": SMALL_DATA_AUGMENT, "hidden_weight": 1.0}
    assert "--small-data off left --augment 8, --hidden-weight 1 off" in small_data_line(record)
    monkeypatch.setenv("SHRINKBERT_SMALL_DATA", "off")  # the same for every run
    assert small_data_defaults(DistillConfig(small_data="auto"), 1380, True)["switched_on"] == {}
    enough = DistillConfig(small_data="auto")
    assert small_data_defaults(enough, 8056, True) == {} and enough.augment == 0 and enough.hidden_weight == 0
    assert off.augment == 0 and off.hidden_weight == 0
