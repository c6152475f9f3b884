"""`--target 10x`: a student whose batch-1 latency is at most the teacher's own divided by 10, on the
runtime and length a latency target is timed at. The teacher is timed once with the candidates' timer,
the target becomes a latency target, and the manifest's shape record holds the resolved milliseconds.
No real timing here: the timing functions are replaced."""
from __future__ import annotations

import pytest
from transformers import BertConfig

from shrinkbert.core.errors import ShrinkbertError
from shrinkbert.students import shape as shapes
from shrinkbert.students.shape import Shape, choose_shape, parse_target


def test_parse_target_reads_a_speed_up():
    assert parse_target("10x").kind == "speedup" and parse_target("10x").value == 10
    assert parse_target(" 2.5X ").value == 2.5
    for bad, says in (("0x", "must be positive"), ("1x", "above 1x"), ("x10", "not understood"),
                      ("10xx", "not understood")):
        with pytest.raises(ShrinkbertError, match=says) as caught:
            parse_target(bad)
        assert "\n" not in str(caught.value)
    with pytest.raises(ShrinkbertError, match=r"a speed-up over the teacher \('10x'\)"):  # the help names the form
        parse_target("x10")


def test_a_speed_up_target_is_the_teachers_own_latency_divided(monkeypatch):
    config = BertConfig(hidden_size=64, num_hidden_layers=4, num_attention_heads=4, intermediate_size=128,
                        vocab_size=1000, max_position_embeddings=128)
    timed, asked = [], []

    def teacher_ms(teacher_config, *, seq_len, threads, runtime, **_):
        timed.append((teacher_config.num_hidden_layers, seq_len, threads, runtime))
        return 40.0

    def pick(teacher_config, target, *, seq_len, threads, log, runtime, **fixed):
        asked.append((target, seq_len, runtime))
        return Shape(layers=1, hidden=64, heads=4, intermediate=128), [{"shape": "1L/H64", "p50_ms": 3.5, "fits": True}]

    monkeypatch.setattr(shapes, "teacher_latency_ms", teacher_ms)
    monkeypatch.setattr(shapes, "pick_by_latency", pick)
    shape, record = choose_shape(config, target="10x", seq_len=64, threads=2, runtime="onnx-int8", log=lambda _: None)
    assert timed == [(4, 64, 2, "onnx-int8")]  # the teacher timed once, where the candidates are
    (target, seq_len, runtime), = asked
    assert (target.kind, target.value, seq_len, runtime) == ("ms", 4.0, 64, "onnx-int8")
    assert shape.layers == 1
    assert record["target"] == "4.0000ms" and record["speedup"] == "10x" and record["teacher_ms"] == 40.0
    assert record["how"] == "target 10x" and record["latency_runtime"] == "onnx-int8"


def test_the_teacher_is_timed_with_the_candidates_timer(monkeypatch):
    config = BertConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                        vocab_size=1000, max_position_embeddings=64)
    seen = []

    def timer_for(teacher_config, runtime, threads, warmup, runs):
        def timer(model, ids):
            seen.append((model.config.num_hidden_layers, model.config.hidden_size, tuple(ids.shape), runtime))
            return 12.5
        return timer

    monkeypatch.setattr(shapes, "latency_timer", timer_for)
    assert shapes.teacher_latency_ms(config, seq_len=128, threads=1, runtime="torch") == 12.5
    assert seen == [(2, 32, (1, 64), "torch")]  # the teacher's shape, at most its positions
    with pytest.raises(ShrinkbertError, match="latency runtime"):
        shapes.teacher_latency_ms(config, runtime="tensorrt")
