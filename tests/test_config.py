"""Every numeric option of every stage is range-checked where configs are parsed: out of range
gives ShrinkbertError (one `error:` line, exit 2, nothing written), never a traceback."""
from __future__ import annotations

import dataclasses
import importlib
import math
import subprocess
import sys
import typing
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shrinkbert.core.config import _strip_optional, build_config
from shrinkbert.core.errors import ShrinkbertError

ROOT = Path(__file__).resolve().parents[1]
STAGES = ["teachers.finetune", "teachers.pretrain", "teachers.tokenizer", "students.distill", "compress.prune",
          "compress.sparsify", "compress.trim_vocab", "compress.export", "compress.quantize", "compress.bundle",
          "eval.harness"]
# Data fields owned by core.data.dataspec, validated when the data spec is resolved.
UNBOUNDED = {"split_seed"}


def config_class(stage: str):
    module = importlib.import_module(f"shrinkbert.{stage}")
    return getattr(module, "Config", None) or module.EvalConfig


def numeric_fields(cls) -> list[tuple[str, type, dict]]:
    hints = typing.get_type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        base, _ = _strip_optional(hints[f.name])
        if typing.get_origin(base) is list:
            base = (typing.get_args(base) or (None,))[0]
        if base in (int, float) and f.name not in UNBOUNDED:
            out.append((f.name, base, f.metadata.get("bounds", {})))
    return out


def out_of_range(kind: type, bounds: dict) -> st.SearchStrategy:
    """Values that violate `bounds` (ints for int fields, any float incl. nan/inf for float fields)."""
    options = []
    if "min" in bounds:
        options.append(st.integers(max_value=math.ceil(bounds["min"]) - 1) if kind is int
                       else st.floats(max_value=bounds["min"], exclude_max=True, allow_nan=False))
    if "above" in bounds:
        options.append(st.integers(max_value=math.floor(bounds["above"])) if kind is int
                       else st.floats(max_value=bounds["above"], allow_nan=False))
    if "max" in bounds:
        options.append(st.integers(min_value=math.floor(bounds["max"]) + 1) if kind is int
                       else st.floats(min_value=bounds["max"], exclude_min=True, allow_nan=False))
    if "below" in bounds:
        options.append(st.integers(min_value=math.ceil(bounds["below"])) if kind is int
                       else st.floats(min_value=bounds["below"], allow_nan=False))
    if "choices" in bounds:
        options.append(st.integers().filter(lambda v: v not in bounds["choices"]))
    if kind is float:
        options.append(st.sampled_from([math.nan]))
    assert options, bounds
    return st.one_of(options)


def test_every_numeric_option_of_every_stage_has_a_range():
    missing = [f"{stage}.{name}" for stage in STAGES for name, _, bounds in numeric_fields(config_class(stage))
               if not bounds]
    assert not missing, f"numeric options with no declared range: {missing}"


def test_defaults_are_in_range():
    for stage in STAGES:
        cls = config_class(stage)
        defaults = {f.name: getattr(cls(), f.name) for f in dataclasses.fields(cls)}
        build_config(cls, {k: v for k, v in defaults.items() if v is not None})


@pytest.mark.parametrize("stage", STAGES)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_out_of_range_values_are_one_error_never_a_traceback(stage, data):
    cls = config_class(stage)
    name, kind, bounds = data.draw(st.sampled_from(numeric_fields(cls)))
    value = data.draw(out_of_range(kind, bounds))
    as_text = data.draw(st.booleans())  # the command line hands over strings
    with pytest.raises(ShrinkbertError, match=f"'{name}'"):
        build_config(cls, {name: str(value) if as_text else value})


@pytest.mark.parametrize("stage", STAGES)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_any_value_parses_or_is_one_error(stage, data):
    cls = config_class(stage)
    name, kind, _ = data.draw(st.sampled_from(numeric_fields(cls)))
    value = data.draw(st.one_of(st.integers(), st.floats(), st.text(max_size=8), st.none(), st.booleans()))
    try:
        config = build_config(cls, {name: value})
    except ShrinkbertError as err:
        assert "\n" not in str(err)
    else:
        got = getattr(config, name)
        assert got is None or isinstance(got, (int, float, list))


@pytest.mark.parametrize("flag, value, message", [
    ("--epochs", "-1", "--epochs must be >= 0"),  # the command line names flags
    ("--max-steps", "-5", "--max-steps must be >= 0"),
    ("--max-length", "0", "--max-length must be >= 8"),
    ("--batch-size", "0", "--batch-size must be >= 1"),
    ("--learning-rate", "-1", "--learning-rate must be > 0"),
    ("--warmup-ratio", "1.5", "--warmup-ratio must be >= 0 and < 1"),
    ("--keep", "worst", "--keep must be one of best, final"),
])
def test_finetune_refuses_out_of_range_options(flag, value, message, tiny_bert, tiny_csv, tmp_path):
    out = tmp_path / "out"
    result = subprocess.run([sys.executable, "-m", "shrinkbert.teachers.finetune", "--model", str(tiny_bert),
                             "--task", str(tiny_csv), "--cache-dir", str(tmp_path / "cache"),
                             "--output-dir", str(out), flag, value],
                            cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 2, result.stderr[-2000:]
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], result.stderr
    assert not out.exists() and not list(tmp_path.glob(".partial-*"))


def test_nothing_to_train_is_refused():
    from shrinkbert.teachers import finetune

    with pytest.raises(ShrinkbertError, match="nothing to train"):
        build_config(finetune.Config, {"epochs": 0, "max_steps": 0})
    assert build_config(finetune.Config, {"epochs": 0, "max_steps": 3}).max_steps == 3


def test_a_bare_yaml_off_reads_as_the_word_for_a_choice_field():
    # YAML 1.1 turns `memory: off` in a recipe into False; the eval stage must still get "off".
    import yaml

    from shrinkbert.eval.harness import Config as EvalConfig

    values = yaml.safe_load("memory: off")
    assert values == {"memory": False}
    assert build_config(EvalConfig, values).memory == "off"
    with pytest.raises(ShrinkbertError, match="must be one of"):
        build_config(EvalConfig, yaml.safe_load("memory: on"))
