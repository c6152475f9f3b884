"""The distill stage's objectives (students/objectives/): `objective_for` picks each one from the teacher's
kind and the options, every objective refuses in one line an option its options dataclass does not declare,
and the stage's Config is the union of the objectives' options."""
from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import pytest

from shrinkbert.core.errors import ShrinkbertError
from shrinkbert.core.kinds import all_kinds, get_kind
from shrinkbert.students.configs import DistillConfig
from shrinkbert.students.objectives import OBJECTIVES, objective_for, refuse_undeclared
from shrinkbert.students.objectives.common import OBJECTIVE_NAMES

# an option each objective does not declare, with a value away from its default
UNDECLARED = {"logits": ("--similarity-weight", "1"), "masked-lm": ("--augment", "2"),
              "vectors": ("--temperature", "4"), "static": ("--layers", "2"), "drop-in": ("--dim", "8")}


def options(**values) -> SimpleNamespace:
    return SimpleNamespace(**{"objective": "auto", "student": "", **values})


def test_the_objectives_are_the_ones_objective_takes():
    assert tuple(OBJECTIVES) == OBJECTIVE_NAMES
    assert set(UNDECLARED) == set(OBJECTIVES)
    for name, module in OBJECTIVES.items():
        assert module.NAME == name and dataclasses.is_dataclass(module.Options) and callable(module.run)


def test_the_stage_config_is_the_union_of_the_objectives_options():
    declared = set().union(*({f.name for f in dataclasses.fields(m.Options)} for m in OBJECTIVES.values()))
    assert {f.name for f in dataclasses.fields(DistillConfig)} == declared


def test_objective_for_picks_each_objective():
    assert objective_for(get_kind("embedding"), options()).NAME == "vectors"
    for kind in ("sequence", "token", "qa"):
        assert objective_for(get_kind(kind), options()).NAME == "logits"
    assert objective_for(get_kind("embedding"), options(student="static")).NAME == "static"
    assert objective_for(get_kind("sequence"), options(student="static")).NAME == "static"
    for name in OBJECTIVE_NAMES:  # named: whatever the teacher's kind
        assert objective_for(get_kind("sequence"), options(objective=name)).NAME == name
    assert {kind.objective for kind in all_kinds().values()} <= set(OBJECTIVE_NAMES)
    with pytest.raises(ShrinkbertError, match="--student static is the static objective's student"):
        objective_for(get_kind("sequence"), options(objective="vectors", student="static"))


@pytest.mark.parametrize("name", OBJECTIVE_NAMES)
def test_an_option_the_objective_does_not_declare_is_one_line_and_writes_nothing(name, tmp_path, capsys):
    from shrinkbert.students.distill import main

    option, value = UNDECLARED[name]
    out = tmp_path / "out"
    assert main(["--objective", name, "--teacher", str(tmp_path / "teacher"), option, value,
                 "--output-dir", str(out)]) == 2
    assert capsys.readouterr().err == f"error: {option} is not read by the {name} objective: drop it\n"
    assert not out.exists()


@pytest.mark.parametrize("name", OBJECTIVE_NAMES)
def test_every_declared_option_passes_the_refusal(name):
    module = OBJECTIVES[name]
    defaults = DistillConfig()
    for field in dataclasses.fields(module.Options):
        if field.name in ("objective", "teacher"):
            continue
        value = getattr(defaults, field.name)
        changed = dataclasses.replace(defaults, **{field.name: _other(value)})
        refuse_undeclared(changed, module)  # declared: never refused here


def _other(value):
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value + 1
    if value is None:
        return 1
    return f"{value}x"
