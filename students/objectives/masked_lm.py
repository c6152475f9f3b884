"""The masked-LM objective (general distillation): a masked-LM student learns its MLM teacher on raw text.

    shrinkbert distill --objective masked-lm --teacher runs/mlm --corpus sotu,wordnet --target 25%

- Reads from the teacher: its MLM logits at the masked positions, and the hidden states and attention
  maps of the mapped layers when their losses are on. Both models see the same randomly masked tokens,
  masked afresh each step, so the teacher always runs live (no cache).
- Loss terms: those of the logits objective (students/objectives/logits.py), the soft-logit KD taken at
  the masked positions of the MLM logits.
- Hands the trainer (core/train.py): a masked-LM student of the teacher's family (AutoModelForMaskedLM)
  and the tokenized --corpus lines, less any that repeat the task's validation or test rows; the result
  is the start of a later task distillation (`--student`).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from shrinkbert.core.config import field
from shrinkbert.students.objectives.common import CorpusOptions, StudentOptions
from shrinkbert.students.objectives.logits import LayerOptions, teach


@dataclass
class MaskedLMOptions(LayerOptions, CorpusOptions, StudentOptions):
    """--objective masked-lm: raw --corpus text, masked."""
    mlm_probability: float = field(0.15, "objective masked-lm: share of tokens masked", above=0, max=1, group="data")


NAME = "masked-lm"  # --objective masked-lm
Options = MaskedLMOptions


def run(cfg) -> Path:
    """Distil with --objective masked-lm: write the masked-LM student to cfg.output_dir and return its path."""
    return teach(cfg, masked_lm=True)
