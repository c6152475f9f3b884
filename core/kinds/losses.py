"""The losses at a model's outputs that more than one kind uses: softened-logit KD and gold labels.

One home for them: the kinds call them from `kd_loss`/`hard_loss`, and students/losses.py
(the hidden, attention and MLM losses) reuses `kd_logits_loss` for general distillation.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from shrinkbert.core.tagging import IGNORE

NO_LABEL = IGNORE  # a row (or sub-token) without a gold label: cross_entropy's default ignore_index


def kd_logits_loss(student_logits, teacher_logits, temperature: float = 1.0) -> torch.Tensor:
    """KL(softmax(t/T) || softmax(s/T)) * T^2, averaged over rows (any leading dims)."""
    s = student_logits.reshape(-1, student_logits.shape[-1]).float() / temperature
    t = teacher_logits.reshape(-1, teacher_logits.shape[-1]).float() / temperature
    return F.kl_div(F.log_softmax(s, -1), F.log_softmax(t, -1), reduction="batchmean",
                    log_target=True) * temperature ** 2


def hard_loss(logits, labels) -> torch.Tensor:
    """Cross-entropy with the gold labels; rows labelled NO_LABEL (teacher-labelled transfer rows)
    are skipped, and a batch of nothing but them gives 0 (with a gradient path, so the step runs)."""
    known = labels != NO_LABEL
    return F.cross_entropy(logits.float(), labels) if known.any() else logits.float().sum() * 0.0
