"""Importance of attention heads and FFN neurons, measured on task rows.

Heads: Michel et al. (2019) — a gate of ones multiplies each head's output and a head's importance is
|d loss / d mask| summed over the rows (the first-order Taylor estimate of the loss change when
the head is removed); scores are L2-normalised per layer, as in the paper.
Neurons: first-order Taylor on the FFN activations, |a * d loss / d a| summed over real tokens.
The loss is cross-entropy on the task labels, or on the model's own predictions when rows carry
no labels.
"""
from __future__ import annotations

from typing import Any

import torch

from shrinkbert.compress.common import encode
from shrinkbert.core.kinds import kind_of_rows


def bert_layers(model):
    base = getattr(model, model.base_model_prefix, model)
    return base.encoder.layer


def score(model, tokenizer, rows: list[dict[str, Any]], labels: list[int | None], max_length: int = 128,
          batch_size: int = 16, loss_of=None) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """([head scores per layer, for its remaining heads], [neuron scores per layer]) — higher means more important.

    loss_of(model_output, batch, labels) is the loss the scores are gradients of; default: the rows'
    task kind's `importance_loss` (a sentence-embedding model passes one that pools as it declares)."""
    layers = bert_layers(model)
    # One gate of ones per remaining head, multiplied into the head's output (a head mask that
    # works with any attention implementation and with heads already pruned per layer).
    gates = [torch.ones(layer.attention.self.num_attention_heads, requires_grad=True) for layer in layers]
    head_scores = [torch.zeros_like(g) for g in gates]
    neuron_scores = [torch.zeros(layer.intermediate.dense.out_features) for layer in layers]
    acts: dict[int, torch.Tensor] = {}

    def keep(idx):
        def hook(_module, _inputs, output):
            output.retain_grad()
            acts[idx] = output
        return hook

    def gate(idx, head_size):
        def hook(_module, _inputs, output):
            context = output[0] if isinstance(output, tuple) else output
            scale = gates[idx].repeat_interleave(head_size)
            context = context * scale
            return (context,) + tuple(output[1:]) if isinstance(output, tuple) else context
        return hook

    hooks = [layer.intermediate.register_forward_hook(keep(i)) for i, layer in enumerate(layers)]
    hooks += [layer.attention.self.register_forward_hook(gate(i, layer.attention.self.attention_head_size))
              for i, layer in enumerate(layers)]
    model.eval()  # no dropout: the scores are about the model as it will run
    try:
        for start in range(0, len(rows), batch_size):
            chunk = rows[start:start + batch_size]
            batch = encode(tokenizer, chunk, max_length, return_tensors="pt")
            loss = (loss_of or kind_of_rows(chunk).importance_loss)(model(**batch), batch, labels[start:start + batch_size])
            model.zero_grad()
            for g in gates:
                g.grad = None
            loss.backward()
            for i, g in enumerate(gates):
                head_scores[i] += g.grad.abs().detach()
            mask = batch["attention_mask"].unsqueeze(-1).float()
            for i, act in acts.items():
                neuron_scores[i] += ((act * act.grad).abs() * mask).sum(dim=(0, 1)).detach()
            acts.clear()
    finally:
        for hook in hooks:
            hook.remove()
        model.zero_grad()
    return [s / s.norm().clamp_min(1e-12) for s in head_scores], neuron_scores
