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
from shrinkbert.core.errors import ShrinkbertError
from shrinkbert.core.families import FAMILIES, family_of
from shrinkbert.core.kinds import kind_of_rows
from shrinkbert.core.predict import encoder_inputs


def module_at(root, path: str):
    """The submodule at a dotted path (a family Layout's names)."""
    for part in path.split("."):
        root = getattr(root, part)
    return root


def slicing_layout(model):
    """(the model's transformer layers, its family's Layout, the size of one head): what structured
    pruning slices (core/families); one ShrinkbertError line for a family it cannot slice."""
    family = family_of(model.config)
    if family.layout is None:
        sliced = ", ".join(f.name for f in FAMILIES if f.layout is not None)
        raise ShrinkbertError(f"structured pruning slices the heads and FFN neurons of {sliced} models; "
                              f"{family.name} keeps its attention and FFN in other shapes: sparsify it, or distil a "
                              "student with fewer layers")
    widths = family.widths(model.config)  # the config keeps the unpruned head count, so its head size holds
    return family.layers(model), family.layout, widths.hidden // widths.heads


def heads_in(layer, layout, head_size: int) -> int:
    """The heads a layer has left: its query projection's rows over the head size."""
    return module_at(layer, layout.query).out_features // head_size


def score(model, tokenizer, rows: list[dict[str, Any]], labels: list[int | None], max_length: int = 128,
          batch_size: int = 16, loss_of=None) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """([head scores per layer, for its remaining heads], [neuron scores per layer]) — higher means more important.

    loss_of(model_output, batch, labels) is the loss the scores are gradients of; default: the rows'
    task kind's `importance_loss` (a sentence-embedding model passes one that pools as it declares)."""
    layers, layout, head_size = slicing_layout(model)
    # One gate of ones per remaining head, multiplied into the heads' context where it enters the
    # attention's output projection (a head mask that works with any attention implementation, any
    # family's layout and heads already pruned per layer); the FFN's activations are read where they
    # enter its output projection.
    gates = [torch.ones(heads_in(layer, layout, head_size), requires_grad=True) for layer in layers]
    head_scores = [torch.zeros_like(g) for g in gates]
    neuron_scores = [torch.zeros(module_at(layer, layout.ffn_in).out_features) for layer in layers]
    acts: dict[int, torch.Tensor] = {}

    def keep(idx):
        def hook(_module, inputs):
            inputs[0].retain_grad()
            acts[idx] = inputs[0]
        return hook

    def gate(idx):
        def hook(_module, inputs):
            return (inputs[0] * gates[idx].repeat_interleave(head_size),) + tuple(inputs[1:])
        return hook

    hooks = [module_at(layer, layout.ffn_out).register_forward_pre_hook(keep(i)) for i, layer in enumerate(layers)]
    hooks += [module_at(layer, layout.attention_out).register_forward_pre_hook(gate(i))
              for i, layer in enumerate(layers)]
    model.eval()  # no dropout: the scores are about the model as it will run
    try:
        for start in range(0, len(rows), batch_size):
            chunk = rows[start:start + batch_size]
            batch = encode(tokenizer, chunk, max_length, return_tensors="pt")
            loss = (loss_of or kind_of_rows(chunk).importance_loss)(model(**encoder_inputs(model, batch)), batch,
                                                                    labels[start:start + batch_size])
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
