"""The distill stage's options: the union of every objective's (students/objectives/), each option
declared once where its objectives share it.

Only the options live here: no heavy import, so `shrinkbert STAGE --help` and the Python API's help
answer at once. The stage module (students/distill.py) imports its Config from here.
"""
from __future__ import annotations

from dataclasses import dataclass

from shrinkbert.students.objectives.drop_in import DropInOptions
from shrinkbert.students.objectives.logits import LogitsOptions
from shrinkbert.students.objectives.masked_lm import MaskedLMOptions
from shrinkbert.students.objectives.static import StaticOptions
from shrinkbert.students.objectives.vectors import VectorsOptions


@dataclass
class DistillConfig(LogitsOptions, MaskedLMOptions, VectorsOptions, StaticOptions, DropInOptions):
    """Every objective's options; the objective that runs refuses those it does not declare."""
