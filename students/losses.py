"""Distillation losses, a layer map you can write down, and the loss module that combines them.

Losses (each has a weight; weight 0 means off and not computed, and then the student and teacher
are not even asked for the outputs it needs):
  logits     KL(teacher || student) on softmax(logits / T), scaled by T^2 (Hinton et al.)
  hidden     MSE between student layer i's output and teacher layer map[i]'s output, over real
             (non-padding) tokens, through a learned linear projection when widths differ
  attention  KL (or MSE) between attention probabilities of mapped layers, per query row over real
             tokens; needs attn_implementation="eager" and output_attentions=True; when head counts
             differ, both sides are averaged over heads first
  embedding  MSE between the embedding outputs (hidden_states[0]), projected when widths differ
  hard       cross-entropy with the gold labels

The layer map names, for each student layer (1-based), the teacher layer (1-based) it learns
from: "1:2,2:4,3:6". Layer 0 is the embedding output. The default is uniform: student layer i
<- teacher layer round(i * T / S), so the last student layer always learns from the last
teacher layer. Unmapped student layers get no hidden/attention loss.

Projections are training-only: they map the student's hidden states into the teacher's width
so the two can be compared, and are thrown away when the student is saved (the student never
needs them at inference; its own classifier reads its own hidden states). The manifest says so.
"""
from __future__ import annotations

import dataclasses
import re

import torch
from torch import nn

from shrinkbert.core.errors import ShrinkbertError
from shrinkbert.core.kinds import get_kind
from shrinkbert.core.kinds.losses import hard_loss, kd_logits_loss

EPS = 1e-12


@dataclasses.dataclass
class LossWeights:
    logits: float = 1.0
    hidden: float = 0.0
    attention: float = 0.0
    embedding: float = 0.0
    hard: float = 0.0

    def active(self) -> dict[str, float]:
        return {k: v for k, v in dataclasses.asdict(self).items() if v}


def parse_layer_map(text: str | dict | None, student_layers: int, teacher_layers: int) -> dict[int, int]:
    """'1:2,2:4' -> {1: 2, 2: 4} (student -> teacher, 1-based; 0 = embeddings); None -> uniform."""
    if text in (None, "", "uniform"):
        return {i: int(i * teacher_layers / student_layers + 0.5) for i in range(1, student_layers + 1)}
    if isinstance(text, dict):
        pairs = [(int(k), int(v)) for k, v in text.items()]
    else:
        pairs = []
        for item in str(text).replace(" ", "").split(","):
            match = re.fullmatch(r"(\d+):(\d+)", item)
            if not match:
                raise ShrinkbertError(f"layer map item {item!r} is not 'student:teacher' (e.g. '1:2,2:4,3:6'; "
                                      "layers count from 1, 0 is the embedding output)")
            pairs.append((int(match.group(1)), int(match.group(2))))
    mapping = {}
    for s, t in pairs:
        if not 0 <= s <= student_layers:
            raise ShrinkbertError(f"layer map names student layer {s}; the student has layers 1..{student_layers}")
        if not 0 <= t <= teacher_layers:
            raise ShrinkbertError(f"layer map names teacher layer {t}; the teacher has layers 1..{teacher_layers}")
        if s in mapping:
            raise ShrinkbertError(f"layer map names student layer {s} twice")
        mapping[s] = t
    return dict(sorted(mapping.items()))


def format_layer_map(mapping: dict[int, int]) -> str:
    return ",".join(f"{s}:{t}" for s, t in mapping.items())


def masked_mse(student, teacher, mask=None) -> torch.Tensor:
    """MSE over the last dim, averaged over real tokens (mask 1) only."""
    err = (student.float() - teacher.float()).pow(2).mean(-1)
    if mask is None:
        return err.mean()
    mask = mask.to(err.dtype)
    return (err * mask).sum() / mask.sum().clamp_min(1.0)


def attention_loss(student_attn, teacher_attn, mask=None, divergence: str = "kl") -> torch.Tensor:
    """Between attention probabilities [B, H, L, L]; rows of padding queries ignored.

    If head counts differ, both sides are averaged over heads (a mean distribution is still a
    distribution); otherwise heads are matched one to one.
    """
    s, t = student_attn.float(), teacher_attn.float()
    if s.shape[1] != t.shape[1]:
        s, t = s.mean(1, keepdim=True), t.mean(1, keepdim=True)
    if divergence == "kl":
        per_row = (t * (torch.log(t + EPS) - torch.log(s + EPS))).sum(-1)  # [B, H, L]
    elif divergence == "mse":
        per_row = (s - t).pow(2).sum(-1)
    else:
        raise ShrinkbertError(f"attention loss must be 'kl' or 'mse', got {divergence!r}")
    if mask is None:
        return per_row.mean()
    row_mask = mask.to(per_row.dtype)[:, None, :].expand_as(per_row)
    return (per_row * row_mask).sum() / row_mask.sum().clamp_min(1.0)


class DistillLoss(nn.Module):
    """Combines the losses; owns the (training-only) projections from student to teacher widths.

    forward(student_out, teacher, batch) where student_out is a transformers output (logits,
    hidden_states, attentions as asked) and teacher a dict with any of "logits",
    "hidden_states" ({teacher layer: [B, L, H]} or the full tuple), "attentions" (tuple).
    """

    def __init__(self, weights: LossWeights, layer_map: dict[int, int], student_hidden: int,
                 teacher_hidden: int, temperature: float = 1.0, attention_kind: str = "kl"):
        super().__init__()
        self.weights = weights
        self.layer_map = dict(layer_map)
        self.temperature = temperature
        self.attention_kind = attention_kind
        self.projections = nn.ModuleDict()
        if student_hidden != teacher_hidden:
            if weights.hidden:
                for s in self.layer_map:
                    if s > 0:
                        self.projections[str(s)] = nn.Linear(student_hidden, teacher_hidden)
            if weights.embedding or (weights.hidden and 0 in self.layer_map):
                self.projections["0"] = nn.Linear(student_hidden, teacher_hidden)

    # What each side must produce, so that a switched-off loss costs nothing.
    @property
    def needs_hidden(self) -> bool:
        return bool(self.weights.hidden or self.weights.embedding)

    @property
    def needs_attentions(self) -> bool:
        return bool(self.weights.attention)

    @property
    def needs_teacher_logits(self) -> bool:
        return bool(self.weights.logits)

    def teacher_hidden_layers(self) -> list[int]:
        """Teacher hidden-state indices (0 = embeddings) the losses read."""
        layers = set()
        if self.weights.hidden:
            layers.update(self.layer_map.values())
        if self.weights.embedding:
            layers.add(0)
        return sorted(layers)

    def teacher_attention_layers(self) -> list[int]:
        """Indices into the teacher's attentions tuple (0-based: teacher layer - 1) the losses read."""
        if not self.weights.attention:
            return []
        return sorted({t - 1 for s, t in self.layer_map.items() if s > 0 and t > 0})

    def _project(self, s_layer: int, hidden):
        proj = self.projections[str(s_layer)] if str(s_layer) in self.projections else None
        return proj(hidden) if proj is not None else hidden

    def forward(self, student_out, teacher: dict, batch: dict, labels=None, mask=None, positions=None, kind=None):
        """Task distillation: the task kind (core/kinds; default sequence) compares its outputs, KD and
        gold labels in batch["labels"]. General distillation: positions (bool [B, L]): the MLM logits
        are compared only there, and `labels` are token ids."""
        w = self.weights
        mask = batch.get("attention_mask") if mask is None else mask
        terms = {}
        if positions is None:
            kind = get_kind(None) if kind is None else kind
            outputs = kind.outputs(student_out, batch) if w.logits or w.hard else None
            if w.logits:
                terms["logits"] = kind.kd_loss(outputs, teacher, batch, self.temperature)
            if w.hard:
                terms["hard"] = kind.hard_loss(outputs, batch)
        else:
            labels = batch.get("labels") if labels is None else labels
            if w.logits:
                terms["logits"] = kd_logits_loss(student_out.logits[positions], teacher["logits"][positions],
                                                 self.temperature)
            if w.hard:
                terms["hard"] = hard_loss(student_out.logits[positions], labels[positions])
        if w.hidden or w.embedding:
            t_hidden = teacher["hidden_states"]
            s_hidden = student_out.hidden_states
            if w.hidden:
                pairs = [(s, t) for s, t in self.layer_map.items()]
                terms["hidden"] = sum(masked_mse(self._project(s, s_hidden[s]), t_hidden[t], mask)
                                      for s, t in pairs) / max(1, len(pairs))
            if w.embedding:
                terms["embedding"] = masked_mse(self._project(0, s_hidden[0]), t_hidden[0], mask)
        if w.attention:
            pairs = [(s, t) for s, t in self.layer_map.items() if s > 0 and t > 0]
            s_attn, t_attn = student_out.attentions, teacher["attentions"]
            terms["attention"] = sum(attention_loss(s_attn[s - 1], t_attn[t - 1], mask, self.attention_kind)
                                     for s, t in pairs) / max(1, len(pairs))
        if not terms:
            raise ShrinkbertError("every distillation loss weight is 0: switch at least one on")
        total = sum(getattr(w, name) * value for name, value in terms.items())
        logs = {f"loss_{name}": float(value.detach()) for name, value in terms.items()}
        return total, logs
