"""The family interface: what a stage needs to know about the network itself, whatever it predicts.

A kind (core/kinds) says what a model predicts; a family says how it is built: where its layers are,
how a student's shape is written into its config, whether a narrower student can be sliced from it,
and which ONNX Runtime fusions apply. Stages ask `family_of(config)` and never branch on
`model_type`, so kind x family compose: a ModernBERT tagger needs no code that names both.
"""
from __future__ import annotations

import dataclasses
from typing import ClassVar

from shrinkbert.core.errors import ShrinkbertError


@dataclasses.dataclass(frozen=True)
class Widths:
    """A shape in the family's own terms (layers, hidden, heads, FFN), whatever its config calls them."""
    layers: int
    hidden: int
    heads: int
    intermediate: int


@dataclasses.dataclass(frozen=True)
class Layout:
    """Where a layer keeps the modules a narrower student is sliced from (paths relative to one layer,
    and to the base model's embeddings module), for the families whose layer is BERT's under other
    names: separate query/key/value and output projections, a two-matrix FFN, post-norms."""
    query: str = "attention.self.query"
    key: str = "attention.self.key"
    value: str = "attention.self.value"
    attention_out: str = "attention.output.dense"
    attention_norm: str = "attention.output.LayerNorm"
    ffn_in: str = "intermediate.dense"
    ffn_out: str = "output.dense"
    ffn_norm: str = "output.LayerNorm"
    embeddings: str = "embeddings"
    word: str = "word_embeddings"
    position: str = "position_embeddings"
    token_type: str | None = "token_type_embeddings"
    embedding_norm: str = "LayerNorm"
    head_tables: tuple[str, ...] = ()
    """Tables under the base model with one column per attention head, shared by all layers
    (MPNet's relative-position bias): a student keeps the columns of its first layer's heads."""


class Family:
    name: ClassVar[str]
    """How docs, manifests and error lines name the family, e.g. "RoBERTa/XLM-R"."""

    model_types: ClassVar[tuple[str, ...]]
    """The transformers `model_type`s of this family's configs."""

    base_prefix: ClassVar[str]
    """The attribute a task model keeps its base model under (transformers' `base_model_prefix`), which
    also opens the names of its traced graph's nodes: "/mpnet/encoder/layer.0/..."."""

    layers_path: ClassVar[str] = "encoder.layer"
    """Where the transformer layers sit under the base model (`model.base_model`), dotted."""

    sublayer_groups: ClassVar[dict[str, str]] = {"attention": "attention", "intermediate": "intermediate",
                                                 "output": "output"}
    """A layer's modules (dotted, relative to one layer) under the group names users give for every
    family (quantize --exclude, accuracy-aware quantization): attention, intermediate (the FFN's input
    projection) and output (its output projection)."""

    config_fields: ClassVar[dict[str, str]] = {"layers": "num_hidden_layers", "hidden": "hidden_size",
                                               "heads": "num_attention_heads", "intermediate": "intermediate_size"}
    """The config attribute holding each shape field."""

    layout: ClassVar[Layout | None] = None
    """Where a layer's projections sit, for families a narrower student (hidden, heads or FFN) can be
    sliced from (students/init.py); None: a student from the teacher keeps its widths and takes a
    subset of its layers."""

    prunes_heads: ClassVar[bool] = True
    """Whether structured pruning may remove attention heads (compress/prune.py, through the model's
    `prune_heads`, which config.pruned_heads re-applies on load); the FFN neurons of any family with a
    `layout` can go."""

    counts_like_bert: ClassVar[bool] = False
    """Whether students/shape.py's closed-form parameter count holds (BERT's embeddings, token types,
    pooler or a two-layer head); else a model is built on the meta device and counted."""

    ffn_matrices: ClassVar[int] = 2
    """Weight matrices in a layer's FFN, each hidden x intermediate (3 for a gated FFN: its input
    projection holds two halves); eval/floor.py counts a layer's multiply-adds with it."""

    @property
    def slices_width(self) -> bool:
        return self.layout is not None

    pretraining_class: ClassVar[str | None] = None
    """The transformers class of the family's masked-LM + next-sentence pre-training head (BERT's
    BertForPreTraining); None where next-sentence prediction is not the family's objective."""

    ort_fusion: ClassVar[str | None] = None
    """The model_type ONNX Runtime's transformer optimizer fuses this family as (None: no fusions)."""

    def widths(self, config) -> Widths:
        return Widths(*(int(getattr(config, self.config_fields[name])) for name in ("layers", "hidden", "heads",
                                                                                     "intermediate")))

    def student_config(self, teacher_config, widths: Widths):
        """A config of the teacher's class (vocabulary, positions, labels, ...) with the student's shape."""
        values = teacher_config.to_dict()
        for key in ("architectures", "pruned_heads", "_name_or_path", "transformers_version", "model_type",
                    "torch_dtype", "dtype"):
            values.pop(key, None)
        values.update({self.config_fields[name]: value for name, value in dataclasses.asdict(widths).items()})
        values.update(self.extra_student_fields(teacher_config, widths))
        return type(teacher_config)(**values)

    def extra_student_fields(self, teacher_config, widths: Widths) -> dict:
        """Config fields besides the shape that a student of `widths` must change (none by default)."""
        return {}

    def layers(self, model):
        """The model's transformer layers (a ModuleList), whatever head it carries."""
        module = model.base_model
        for part in self.layers_path.split("."):
            module = getattr(module, part)
        return module

    def layer_group(self, parts: list[str]) -> str | None:
        """The user-facing group ("encoder.layer.N.attention", ...) of a module path (split on dots, the
        base prefix removed) inside one of this family's layers; "" for a part of a layer outside every
        group (a norm); None when the path is not inside this family's layers."""
        head = self.layers_path.split(".")
        if len(parts) <= len(head) + 1 or parts[:len(head)] != head or not parts[len(head)].isdigit():
            return None
        index, rest = parts[len(head)], ".".join(parts[len(head) + 1:])
        for path, group in self.sublayer_groups.items():
            if rest == path or rest.startswith(path + "."):
                return f"encoder.layer.{index}.{group}"
        return ""

    def check_student(self, teacher_config, widths: Widths) -> None:
        """Refuse, in one line, a student this family cannot initialise from its teacher."""
        teacher = self.widths(teacher_config)
        narrower = (widths.hidden, widths.heads, widths.intermediate) != (teacher.hidden, teacher.heads,
                                                                          teacher.intermediate)
        if narrower and not self.slices_width:
            raise ShrinkbertError(
                f"a {self.name} student initialised from its teacher keeps the teacher's widths (hidden "
                f"{teacher.hidden}, {teacher.heads} heads, FFN {teacher.intermediate}) and takes fewer layers; "
                f"asked for hidden {widths.hidden}, {widths.heads} heads, FFN {widths.intermediate}. Give --layers "
                "only, or --init random for a narrower student (docs/teachers.md)")
