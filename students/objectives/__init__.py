"""How a student is taught: one module per objective, each with its options, what it reads from the
teacher, its loss terms and what it hands the trainer (core/train.py).

    logits.py     task distillation: soft logits (+ hidden states, attentions, embeddings, gold labels)
    masked_lm.py  general distillation: MLM logits at masked positions of raw text
    vectors.py    a sentence-embedding student learns the teacher's sentence vectors
    static.py     model2vec's static token-vector table, tuned to the teacher's sentence vectors
    drop_in.py    a query encoder for the teacher's index: its ranking of the index's documents

Each module has `NAME` (its --objective value), `Options` (the dataclass of the options it declares)
and `run(config)`. `objective_for(kind, options)` picks one; an option its Options does not declare is
refused (`refuse_undeclared`), so none is accepted and silently ignored.
"""
from __future__ import annotations

import dataclasses
from types import ModuleType

from shrinkbert.core.config import refuse_unread
from shrinkbert.core.errors import ShrinkbertError
from shrinkbert.students.objectives import drop_in, logits, masked_lm, static, vectors

OBJECTIVES: dict[str, ModuleType] = {module.NAME: module for module in (logits, masked_lm, vectors, static, drop_in)}


def objective_for(kind, options) -> ModuleType:
    """The objective that teaches the student: --objective where given; else --student static's, else
    the one the teacher's kind is taught by (`TaskKind.objective`)."""
    chosen = options.objective
    if options.student == static.STATIC and chosen not in ("auto", static.NAME):
        raise ShrinkbertError(f"--student static is the static objective's student, not --objective {chosen}'s: "
                              "drop one of them")
    if chosen == "auto":
        chosen = static.NAME if options.student == static.STATIC else kind.objective
    return OBJECTIVES[chosen]


def refuse_undeclared(options, objective: ModuleType) -> None:
    """Refuse, in one line, every option set away from its default that the objective's Options do not
    declare."""
    refuse_unread(options, {f.name for f in dataclasses.fields(objective.Options)},
                  f"by the {objective.NAME} objective")
