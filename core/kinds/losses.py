"""The losses at a model's outputs, one home each: softened-logit KD, MSE + cosine to a teacher's
vectors, the in-batch similarity structure of a teacher's vectors, in-batch negatives over sentence
vectors, and gold labels.

The kinds call them from `kd_loss`/`hard_loss`; students/losses.py (hidden and attention losses)
and teachers/pretrain.py reuse `kd_logits_loss` at masked positions; students/embedding_distill.py
reuses `mse_cosine_loss` and `similarity_matrix_loss`.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from shrinkbert.core.kinds.tagging import IGNORE

NO_LABEL = IGNORE  # a row (or sub-token) without a gold label: cross_entropy's default ignore_index


def kd_logits_loss(student_logits, teacher_logits, temperature: float = 1.0) -> torch.Tensor:
    """KL(softmax(t/T) || softmax(s/T)) * T^2, averaged over rows (any leading dims). No rows (a
    batch with no masked token) gives 0 with a gradient path, so the step still runs."""
    if not student_logits.numel():
        return student_logits.float().sum() * 0.0
    s = student_logits.reshape(-1, student_logits.shape[-1]).float() / temperature
    t = teacher_logits.reshape(-1, teacher_logits.shape[-1]).float() / temperature
    return F.kl_div(F.log_softmax(s, -1), F.log_softmax(t, -1), reduction="batchmean",
                    log_target=True) * temperature ** 2


def mse_cosine_loss(student_vectors, teacher_vectors, mse_weight: float = 1.0,
                    cosine_weight: float = 1.0) -> torch.Tensor:
    """Sentence-vector KD: MSE to the teacher's vectors (sentence-transformers' distillation loss)
    plus (1 - cosine), since only directions matter once vectors are normalised."""
    s, t = student_vectors.float(), teacher_vectors.float()
    return mse_weight * F.mse_loss(s, t) + cosine_weight * (1 - F.cosine_similarity(s, t, dim=-1)).mean()


def similarity_matrix_loss(student_vectors, teacher_vectors) -> torch.Tensor:
    """MSE between the batch's cosine-similarity matrices, student against teacher, off the diagonal:
    relational KD (Park et al., 2019) on what a similarity task ranks. Matching each vector (MSE +
    cosine) leaves errors that scramble the order of near pairs; this term weighs those pairs directly.
    A batch of one row gives 0 with a gradient path."""
    s = F.normalize(student_vectors.float(), p=2, dim=-1)
    t = F.normalize(teacher_vectors.float(), p=2, dim=-1)
    rows = len(s)
    if rows < 2:
        return s.sum() * 0.0
    off_diagonal = ~torch.eye(rows, dtype=torch.bool, device=s.device)
    return F.mse_loss((s @ s.T)[off_diagonal], (t @ t.T)[off_diagonal])


def index_ranking_loss(student_vectors, teacher_vectors, index, temperature: float = 0.05) -> torch.Tensor:
    """KL from the teacher's to the student's softmax over cosine similarities with `index`, a fixed
    bank of the teacher's own (normalised) vectors: each student vector ranks a teacher-built index
    as the teacher's vector of the same text does, which is what a drop-in student's query is used
    for. Matching each vector alone (MSE + cosine) spends its effort equally in every direction; this
    term weighs the directions that move a text among its nearest neighbours in the teacher's space.
    The temperature is sentence-transformers' in-batch-negatives scale (20 = 1 / 0.05)."""
    s = F.normalize(student_vectors.float(), p=2, dim=-1)
    t = F.normalize(teacher_vectors.float(), p=2, dim=-1)
    bank = F.normalize(index.to(device=s.device, dtype=s.dtype), p=2, dim=-1)  # an index holds unit vectors
    return F.kl_div(F.log_softmax(s @ bank.T / temperature, dim=-1), F.log_softmax(t @ bank.T / temperature, dim=-1),
                    reduction="batchmean", log_target=True)


def in_batch_negatives_loss(anchors, candidates, scale: float = 20.0) -> torch.Tensor:
    """Each anchor's own candidate (row i) against every other candidate of the batch: cross-entropy
    over `scale` x cosine (sentence-transformers' MultipleNegativesRankingLoss; scale 20 is its
    temperature 0.05). `candidates` may hold more rows than `anchors` (hard negatives after the
    positives): they are further wrong answers for every anchor."""
    a = F.normalize(anchors.float(), p=2, dim=-1)
    c = F.normalize(candidates.float(), p=2, dim=-1)
    return F.cross_entropy(scale * a @ c.T, torch.arange(len(a), device=a.device))


def hard_loss(logits, labels) -> torch.Tensor:
    """Cross-entropy with the gold labels; rows labelled NO_LABEL (teacher-labelled transfer rows)
    are skipped, and a batch of nothing but them gives 0 (with a gradient path, so the step runs)."""
    known = labels != NO_LABEL
    return F.cross_entropy(logits.float(), labels) if known.any() else logits.float().sum() * 0.0
