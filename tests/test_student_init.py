"""A student initialised from its teacher, checked tensor by tensor for every family in the registry.

Each tensor of a narrower, shallower student must be the teacher's tensor of the same name (its layer
index through the init's layer map) sliced on each axis by one of the init's own choices
(students/init.select: the kept stream dims, that layer's kept attention dims and FFN neurons, the
heads of the shared tables) or taken whole, or be listed in NEW with the reason it has no source.
The teachers are tiny random models of each family (tests/fixtures.make_tiny_family) whose every
tensor is then refilled with random values, so no zero bias or unit norm matches by chance."""
from __future__ import annotations

import dataclasses
import itertools

import pytest
import torch

from fixtures import FAMILY_MODELS, make_tiny_family

TEACHER_LAYERS = 3
STUDENT_CLASSES = ("AutoModelForSequenceClassification", "AutoModelForMaskedLM")
# The masked-LM head of each family, which a student of a classifier teacher starts without.
MLM_HEADS = {"bert": ("cls",), "roberta": ("lm_head",), "distilbert": ("vocab_transform", "vocab_layer_norm",
             "vocab_projector"), "deberta-v2": ("cls",), "electra": ("generator_predictions", "generator_lm_head"),
             "mpnet": ("lm_head",), "modernbert": ("decoder",)}
# What a student holds that no teacher tensor is the source of, by family and student class, with why.
NEW: dict[tuple[str, str], dict[str, str]] = {
    (family, "AutoModelForMaskedLM"): {head: "the teacher is a classifier: it has no masked-LM head (the "
                                             "decoder's weight is the student's word embeddings, checked there)"
                                       for head in heads}
    for family, heads in MLM_HEADS.items()}


@pytest.fixture(scope="module")
def teachers(tmp_path_factory) -> dict:
    """{model_type: a tiny random sequence classifier of that family, every tensor refilled}."""
    from transformers import AutoModelForSequenceClassification

    root = tmp_path_factory.mktemp("init-teachers")
    made = {}
    for family in FAMILY_MODELS:
        model = AutoModelForSequenceClassification.from_pretrained(
            make_tiny_family(root / family, family, layers=TEACHER_LAYERS)).eval()
        generator = torch.Generator().manual_seed(5)
        with torch.no_grad():
            for tensor in model.state_dict().values():
                if tensor.is_floating_point():
                    tensor.copy_(torch.randn(tensor.shape, generator=generator))
        made[family] = model
    return made


def student_of(teacher, student_class):
    """A randomly initialised student two layers deep, narrower where the family slices widths."""
    from shrinkbert.core.families import Widths, family_of

    family = family_of(teacher)
    widths = family.widths(teacher.config)
    if family.slices_width:
        widths = Widths(layers=2, hidden=widths.hidden // 2, heads=widths.heads // 2,
                        intermediate=widths.intermediate // 2)
    else:
        widths = dataclasses.replace(widths, layers=2)
    torch.manual_seed(9)
    return student_class.from_config(family.student_config(teacher.config, widths))


def layer_prefix(model) -> str:
    """The dotted name of the model's layer list ("bert.encoder.layer")."""
    from shrinkbert.core.families import family_of

    layers = family_of(model).layers(model)
    return next(name for name, module in model.named_modules() if module is layers)


def unsliced(student, teacher, chosen) -> dict[str, str]:
    """{student tensor name: why it is no slice of the teacher's} for every tensor that is none."""
    prefix = layer_prefix(student)
    theirs = teacher.state_dict()
    shared = [chosen.stream, chosen.table_heads]
    found = {}
    for name, tensor in student.state_dict().items():
        choices, source = shared, name
        if name.startswith(prefix + "."):
            index, rest = name[len(prefix) + 1:].split(".", 1)
            layer = int(index)
            source = f"{prefix}.{chosen.layers[layer]}.{rest}"
            choices = shared + [c for c in (chosen.attention[layer], chosen.ffn[layer]) if c is not None]
        if source not in theirs:
            found[name] = "the teacher has no such tensor"
        elif not is_slice(tensor, theirs[source], choices):
            found[name] = f"not a slice of the teacher's {source}"
    return found


def is_slice(tensor: torch.Tensor, source: torch.Tensor, choices: list[torch.Tensor]) -> bool:
    """Whether `tensor` is `source` with each axis whole or indexed by one of `choices` (1-D kept indices)."""
    if tensor.dim() != source.dim():
        return False
    axes = []
    for size, whole in zip(tensor.shape, source.shape):
        options = [torch.arange(whole)] if size == whole else []
        options += [c for c in choices if c.dim() == 1 and len(c) == size and size != whole]
        if not options:
            return False
        axes.append(options)
    return any(torch.equal(source[torch.meshgrid(*combo, indexing="ij")] if combo else source, tensor)
               for combo in itertools.product(*axes))


def check_family(family, teacher, student_class: str) -> tuple[dict, dict]:
    """(the init's record of a student of that transformers class, {tensor: why} for every student tensor neither a slice nor listed in NEW)."""
    from shrinkbert.students.init import init_from_teacher, select

    import transformers

    student = student_of(teacher, getattr(transformers, student_class))
    record = init_from_teacher(student, teacher)
    chosen = select(student.config, teacher)
    listed = NEW.get((family, student_class), {})
    wrong = {name: why for name, why in unsliced(student, teacher, chosen).items()
             if not any(name == new or name.startswith(new + ".") for new in listed)}
    return record, wrong


@pytest.mark.parametrize("student_class", STUDENT_CLASSES)
@pytest.mark.parametrize("family", FAMILY_MODELS)
def test_every_tensor_of_a_student_is_a_slice_of_its_teacher(family, student_class, teachers):
    from shrinkbert.core.families import family_of

    teacher = teachers[family]
    record, wrong = check_family(family, teacher, student_class)
    assert not wrong, f"{family}: " + "; ".join(f"{name}: {why}" for name, why in wrong.items())
    assert record["layers_from_teacher"] == [2, 3] and record["random_attention_layers"] == []
    assert record["hidden_dims_kept"] == family_of(teacher).widths(teacher.config).hidden // (
        2 if family_of(teacher).slices_width else 1)


def test_the_check_finds_a_shared_table_left_random(teachers, monkeypatch):
    """MPNet's relative-position bias has a column per head shared by every layer: left out of the
    family's layout, a narrower student keeps its own random table, and the check says so."""
    from shrinkbert.core.families.mpnet import MPNetFamily

    monkeypatch.setattr(MPNetFamily, "layout", dataclasses.replace(MPNetFamily.layout, head_tables=()))
    _, wrong = check_family("mpnet", teachers["mpnet"], "AutoModelForSequenceClassification")
    assert list(wrong) == ["mpnet.encoder.relative_attention_bias.weight"]


def test_every_family_names_its_base_model_as_transformers_does(teachers):
    """`Family.base_prefix` opens module paths and traced node names (compress/common.module_group)."""
    from shrinkbert.core.families import family_of

    for teacher in teachers.values():
        assert family_of(teacher).base_prefix == teacher.base_model_prefix
