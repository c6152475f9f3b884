"""Several teachers as one (`--teacher a,b,c`), and what a teacher was (`--teacher` may be a student).

- An ensemble's soft labels are the average of its teachers' softened distributions at the KD
  temperature T: the ensemble returns T * log(mean_k softmax(z_k / T)) as its logits, so
  softmax(logits / T) is exactly that average and the KD loss, the teacher-output cache and the
  test scoring take it as they take one teacher's logits. Hidden states and attention maps (for
  those losses) are the first teacher's: averaging representations of different models means nothing.
- A teacher that a distill stage wrote is a teacher assistant (Mirzadeh et al. 2020): the student
  learns from a larger student rather than from the teacher itself. The lineage records each
  teacher with its stage and role.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import torch
from torch import nn

from shrinkbert.core.artifacts import is_artifact, read_manifest
from shrinkbert.core.errors import ShrinkbertError


def split_teachers(teacher: str) -> list[str]:
    """'a,b' -> ['a', 'b']; a single path (even one with a comma, if it exists) -> [path]."""
    teacher = str(teacher or "")
    if not teacher or "," not in teacher or Path(teacher).exists():
        return [teacher] if teacher else []
    teachers = [t.strip() for t in teacher.split(",") if t.strip()]
    if len(set(teachers)) != len(teachers):
        raise ShrinkbertError(f"--teacher names the same teacher twice: {teacher}")
    return teachers


def primary_teacher(teacher: str) -> str:
    """The teacher whose tokenizer, config, hidden states and weights (for the student's init) count."""
    teachers = split_teachers(teacher)
    return teachers[0] if teachers else ""


@dataclass(frozen=True)
class TeacherSet:
    """Several teachers mixed at a temperature: what the teacher-output cache is keyed on."""

    paths: tuple[str, ...]
    temperature: float

    def cache_identity(self, identity_of) -> str:
        """The cache key's teacher part: each teacher's own identity and the mixing temperature."""
        return "ensemble:" + ",".join(identity_of(p) for p in self.paths) + f"@T={self.temperature:g}"

    def __str__(self) -> str:
        return ",".join(self.paths)


def teacher_source(teacher: str, temperature: float) -> str | TeacherSet:
    """What the teacher-output cache is asked about: the one teacher's path, or the set."""
    teachers = split_teachers(teacher)
    return teachers[0] if len(teachers) == 1 else TeacherSet(tuple(teachers), float(temperature))


class TeacherEnsemble(nn.Module):
    """Teachers run side by side; logits = T * log(mean softmax(z / T)); the rest from the first."""

    def __init__(self, teachers: list[nn.Module], temperature: float):
        super().__init__()
        if len(teachers) < 2:
            raise ShrinkbertError("an ensemble needs at least two teachers")
        labels = {tuple(sorted((t.config.id2label or {}).items())) for t in teachers}
        if len({t.config.num_labels for t in teachers}) != 1 or len(labels) != 1:
            raise ShrinkbertError("the ensemble's teachers must predict the same labels in the same order")
        self.teachers = nn.ModuleList(teachers)
        self.temperature = float(temperature)
        self.config = teachers[0].config

    def forward(self, output_hidden_states: bool = False, output_attentions: bool = False, **inputs):
        first = self.teachers[0](**inputs, output_hidden_states=output_hidden_states,
                                 output_attentions=output_attentions)
        logits = [first.logits] + [t(**inputs).logits for t in self.teachers[1:]]
        log_probs = torch.log_softmax(torch.stack(logits).float() / self.temperature, dim=-1)
        mixed = self.temperature * (torch.logsumexp(log_probs, dim=0) - math.log(len(logits)))
        return SimpleNamespace(logits=mixed.to(first.logits.dtype), hidden_states=first.hidden_states,
                               attentions=first.attentions)


def describe_teachers(teacher: str) -> list[dict]:
    """Each teacher with its stage and role, for the student's manifest: 'teacher', or 'assistant'
    when a distill stage made it (a student teaching a smaller student)."""
    described = []
    for path in split_teachers(teacher):
        stage = read_manifest(path).get("stage") if is_artifact(path) else None
        described.append({"path": str(path), "stage": stage,
                          "role": "assistant" if stage == "distill" else "teacher"})
    return described
