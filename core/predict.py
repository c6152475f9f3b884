"""One home for running a classifier over a tokenized split and scoring it.

Every stage that reports accuracy (fine-tuning, distillation, pruning, export checks) goes through
`predict` and `accuracy`, so "accuracy" means the same computation everywhere. A kind whose
predictions are not one per row (a token classifier: one per scored word) passes `predict` its
`scored` hook, so the same functions give word accuracy and cross-entropy; each kind's
`score_split` (core/kinds) adds the task's own metrics.
"""
from __future__ import annotations

import functools
import inspect
from typing import Callable

import numpy as np
import torch

MODEL_INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def _accepts(model, name: str) -> bool:
    accepted, any_keyword = _forward_parameters(type(getattr(model, "module", model)))  # unwrapped from DDP
    return any_keyword or name in accepted


@functools.cache
def _forward_parameters(model_class) -> tuple[frozenset[str], bool]:
    """(the names a class's forward takes, whether it takes **kwargs): read once per class, not per batch."""
    parameters = inspect.signature(model_class.forward).parameters
    return frozenset(parameters), any(p.kind is p.VAR_KEYWORD for p in parameters.values())


def model_inputs(model, batch: dict) -> dict:
    """The batch's entries the model's forward accepts (DistilBERT-like models take no token_type_ids)."""
    return {k: v for k, v in batch.items() if _accepts(model, k)}


def encoder_inputs(model, batch: dict) -> dict:
    """The batch's encoder inputs (MODEL_INPUTS) that the model takes: DistilBERT, MPNet and ModernBERT
    take no token_type_ids, which a BERT tokenizer saved beside them still writes."""
    return {k: v for k, v in batch.items() if k in MODEL_INPUTS and _accepts(model, k)}


@torch.no_grad()
def predict(model, dataset, collate, batch_size: int = 64,
            scored: Callable | None = None) -> tuple[np.ndarray, np.ndarray | None]:
    """(logits, gold labels or None) over a tokenized split, in row order; the model's train/eval
    mode is restored afterwards. `scored(logits, labels) -> (logits, labels, ...)` turns each
    batch's arrays into the rows that are scored (a token classifier: one row per labelled word,
    core/tagging.flat_labelled); by default they are kept as they are."""
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    logits, labels = [], []
    for start in range(0, len(dataset), batch_size):
        batch = collate([dataset[i] for i in range(start, min(start + batch_size, len(dataset)))])
        inputs = {k: v.to(device) for k, v in encoder_inputs(model, batch).items()}
        out = model(**inputs).logits.float().cpu().numpy()
        gold = batch["labels"].numpy() if "labels" in batch else None
        if scored is not None:
            if gold is None:
                raise ValueError("scoring per word needs the split's aligned labels to find the words")
            out, gold = scored(out, gold)[:2]
        logits.append(out)
        if gold is not None:
            labels.append(gold)
    model.train(was_training)
    num_labels = getattr(model.config, "num_labels", 0)
    out = np.concatenate(logits) if logits else np.zeros((0, num_labels), np.float32)
    return out, (np.concatenate(labels) if labels else None)


def accuracy(logits: np.ndarray, labels) -> float | None:
    """Share of rows whose arg-max matches the label; None when there are no (or unlabelled) rows."""
    if labels is None or len(labels) == 0 or any(label is None for label in labels):
        return None
    return float((np.asarray(logits).argmax(-1) == np.asarray(labels)).mean())


def cross_entropy(logits: np.ndarray, labels) -> float:
    """Mean cross-entropy of the rows (nan with no rows)."""
    if labels is None or len(labels) == 0:
        return float("nan")
    return float(torch.nn.functional.cross_entropy(torch.from_numpy(np.asarray(logits, np.float32)),
                                                   torch.as_tensor(np.asarray(labels), dtype=torch.long)))
