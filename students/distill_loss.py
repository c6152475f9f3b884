"""The distill stage's loss mix: the loss weights from the config and the function the training loop calls.

loss_fn(student, batch) runs the student, takes the teacher's outputs from the cache (or runs the
teacher), and hands both to students.losses.DistillLoss, where the task kind compares the outputs
and the weights mix the terms.
"""
from __future__ import annotations

import torch

from shrinkbert.core.kinds import kind_of
from shrinkbert.core.masking import Masker
from shrinkbert.core.predict import MODEL_INPUTS, encoder_inputs
from shrinkbert.students.losses import DistillLoss, LossWeights


def loss_weights(cfg) -> LossWeights:
    return LossWeights(logits=cfg.logits_weight, hidden=cfg.hidden_weight, attention=cfg.attention_weight,
                       embedding=cfg.embedding_weight, hard=cfg.hard_weight)


def make_loss_fn(distill_loss: DistillLoss, teacher=None, cache=None, tokenizer=None,
                 masked_lm: bool = False, mlm_probability: float = 0.15, kind=None):
    """loss_fn(student, batch) -> (loss, logs). Uses the cache when given, else runs the teacher.
    kind: the task's kind (core/kinds), which compares the outputs (a tagger: at its labelled
    words' first sub-tokens only); None: sequence classification."""
    need_hidden, need_attn = distill_loss.needs_hidden, distill_loss.needs_attentions
    teacher_hidden_layers = distill_loss.teacher_hidden_layers()
    masker = Masker(tokenizer, mlm_probability) if masked_lm else None
    teacher_attention_layers = distill_loss.teacher_attention_layers()
    outputs_kind = kind_of(kind)  # None: sequence (an MLM teacher's logits, --objective masked-lm)

    def loss_fn(student, batch):
        inputs = {k: batch[k] for k in MODEL_INPUTS if k in batch}
        positions = labels = None
        if masked_lm:
            labels = inputs["input_ids"]
            masked_ids, mlm_labels = masker(inputs["input_ids"])
            positions = mlm_labels != -100
            if not positions.any():  # keep the MLM terms defined on tiny batches
                positions = inputs["attention_mask"].bool().clone()
            inputs = {**inputs, "input_ids": masked_ids}
        out = student(**encoder_inputs(student, inputs), output_hidden_states=need_hidden, output_attentions=need_attn)
        if cache is not None:
            target = cache.lookup(batch["row_idx"], inputs["input_ids"].shape[1], inputs["input_ids"].device)
            target.update(outputs_kind.unpack_outputs(target.pop("logits")))
            if need_hidden and any(layer not in target.get("hidden_states", {}) for layer in teacher_hidden_layers):
                raise RuntimeError("the teacher-output cache lacks hidden layers the losses need")
            if any(layer not in target.get("attentions", {}) for layer in teacher_attention_layers):
                raise RuntimeError("the teacher-output cache lacks attention layers the losses need")
        else:
            with torch.no_grad():
                t_out = teacher(**encoder_inputs(teacher, inputs), output_hidden_states=need_hidden, output_attentions=need_attn)
            if not masked_lm:
                outputs = outputs_kind.outputs(t_out, batch)
            else:  # a teacher with no MLM head (a sentence encoder) gives hidden states alone
                outputs = {"logits": t_out.logits} if getattr(t_out, "logits", None) is not None else {}
            target = {**outputs, "hidden_states": t_out.hidden_states, "attentions": t_out.attentions}
        return distill_loss(out, target, batch, labels=labels, positions=positions, kind=kind)

    return loss_fn
