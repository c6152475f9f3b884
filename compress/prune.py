"""Structured pruning: physically remove attention heads and FFN neurons, ranked by importance.

Only removed structure makes a dense model faster, so nothing here is masked: heads go through
`model.prune_heads` (recorded in config.pruned_heads, re-applied by from_pretrained) and FFN
neurons through `prune_linear_layer` on the FFN's input projection (rows) and output projection
(columns), found through the model family's Layout (core/families): BERT, RoBERTa/XLM-R, ELECTRA,
DistilBERT and MPNet (FFN neurons only: its relative-position bias is shared by every layer's heads);
DeBERTa and ModernBERT are refused in one line. transformers 4.57 (the pinned version) still has
`prune_heads`; it goes in transformers 5.

FFN neurons are removed in the SAME number from every layer, so the pruned model keeps one
intermediate size and reloads with the family's own Auto class and exports through Optimum (no
config holds a per-layer size). Which neurons go is still chosen per layer by score.
Heads may be ranked globally (per-layer L2-normalised scores, Michel et al.) or per layer; a layer
always keeps at least `min_heads_per_layer` heads.

Recovery (distillation from the unpruned model) is a separate stage: `students.distill`.
"""
from __future__ import annotations

import sys
from pathlib import Path

import torch

from shrinkbert.compress.common import accuracy, align_labels, load_rows, parity, judged_scores, torch_logits
from shrinkbert.compress.configs import PruneConfig as Config
from shrinkbert.compress.importance import heads_in, module_at, score, slicing_layout
from shrinkbert.core.artifacts import save_model_artifact
from shrinkbert.core.config import stage_main
from shrinkbert.core.builtin import resolve_model
from shrinkbert.core.compact import is_compact_folder
from shrinkbert.core.data.dataspec import resolve_spec, length_records, resolve_max_length
from shrinkbert.core.errors import ShrinkbertError, require
from shrinkbert.core.families import family_of
from shrinkbert.core.kinds import kind_for_stage
from shrinkbert.core.models import count_parameters


def magnitude_scores(model) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """Data-free fallback: L2 norm of each head's output-projection columns and each neuron's weights."""
    layers, layout, head_size = slicing_layout(model)
    heads, neurons = [], []
    for layer in layers:
        w = module_at(layer, layout.attention_out).weight.detach()  # [hidden, heads * head_size]
        heads.append(w.view(w.shape[0], -1, head_size).norm(dim=(0, 2)))
        neurons.append(module_at(layer, layout.ffn_in).weight.detach().norm(dim=1) *
                       module_at(layer, layout.ffn_out).weight.detach().norm(dim=0))
    return heads, neurons


def choose_heads(head_scores: list[torch.Tensor], fraction: float, scope: str, min_keep: int) -> dict[int, list[int]]:
    """{layer: [positions among the layer's current heads to remove]}."""
    total = sum(len(s) for s in head_scores)
    n_remove = int(round(fraction * total))
    if n_remove == 0:
        return {}
    if scope == "per_layer":
        plan = {}
        for i, s in enumerate(head_scores):
            k = min(int(round(fraction * len(s))), max(len(s) - min_keep, 0))
            if k:
                plan[i] = sorted(torch.argsort(s)[:k].tolist())
        return plan
    require(scope == "global", f"head_scope must be 'global' or 'per_layer', got '{scope}'")
    ranked = sorted(((float(v), i, h) for i, s in enumerate(head_scores) for h, v in enumerate(s)))
    plan: dict[int, list[int]] = {}
    for _, i, h in ranked:
        if n_remove == 0:
            break
        if len(head_scores[i]) - len(plan.get(i, [])) <= min_keep:
            continue  # the layer is at its floor: the next least important head elsewhere goes instead
        plan.setdefault(i, []).append(h)
        n_remove -= 1
    return {i: sorted(hs) for i, hs in plan.items()}


def original_head_ids(model, layer: int, positions: list[int]) -> list[int]:
    """prune_heads takes the original head numbers; map positions among the remaining heads to them."""
    pruned = set(int(h) for h in model.config.pruned_heads.get(layer, model.config.pruned_heads.get(str(layer), [])))
    remaining = [h for h in range(model.config.num_attention_heads) if h not in pruned]
    return [remaining[p] for p in positions]


def prune_neurons(model, neuron_scores: list[torch.Tensor], fraction: float) -> int:
    """Remove the same number of least important neurons from every layer; returns the new size."""
    from transformers.pytorch_utils import prune_linear_layer

    layers, layout, _ = slicing_layout(model)
    size = module_at(layers[0], layout.ffn_in).out_features
    keep = size - int(round(fraction * size))
    require(keep >= 1, f"neuron_fraction {fraction} would remove every FFN neuron")
    if keep == size:
        return size
    for layer, s in zip(layers, neuron_scores):
        index = torch.sort(torch.argsort(s, descending=True)[:keep]).values
        for path, dim in ((layout.ffn_in, 0), (layout.ffn_out, 1)):
            parent, _, name = path.rpartition(".")
            owner = module_at(layer, parent) if parent else layer
            setattr(owner, name, prune_linear_layer(getattr(owner, name), index, dim=dim))
    setattr(model.config, family_of(model.config).config_fields["intermediate"], keep)  # one size: it reloads
    return keep


def check_fractions(cfg: Config) -> None:
    """One error line for settings that cannot prune (the config's own bounds hold on the command line;
    these hold for the Python API too)."""
    require(0.0 <= cfg.head_fraction < 1.0, f"head_fraction must be in [0, 1), got {cfg.head_fraction}")
    require(0.0 <= cfg.neuron_fraction < 1.0, f"neuron_fraction must be in [0, 1), got {cfg.neuron_fraction}")
    require(cfg.min_heads_per_layer >= 1, "min_heads_per_layer must be at least 1 (a layer with no heads cannot run)")
    require(cfg.importance in ("taylor", "magnitude"), f"importance must be 'taylor' or 'magnitude', got '{cfg.importance}'")


def structure(model) -> dict[str, int | list[int]]:
    layers, layout, head_size = slicing_layout(model)
    heads = [heads_in(layer, layout, head_size) for layer in layers]
    return {"heads": sum(heads), "heads_per_layer": heads,
            "ffn_neurons": sum(module_at(layer, layout.ffn_in).out_features for layer in layers),
            "intermediate_size": module_at(layers[0], layout.ffn_in).out_features,
            "num_parameters": count_parameters(model)}


def run(cfg: Config) -> Path:
    require(bool(cfg.model) and bool(cfg.output_dir), "prune needs --model and --output-dir")
    check_fractions(cfg)
    folder = str(resolve_model(cfg.model))  # "minilm": the installed folder, recorded as the parent
    kind = kind_for_stage(folder, "prune")  # a sentence-transformers folder as it ships: an embedder
    if is_compact_folder(folder):
        raise ShrinkbertError(f"{folder} is a compact student (not a transformer), which has no attention heads or "
                              "FFN neurons to prune: distil a narrower one (--hidden, --token-dim)")
    spec = resolve_spec(cfg, [folder], required=False)
    if cfg.importance == "taylor" and spec is None:
        raise ShrinkbertError("taylor importance needs task rows: pass --task TASK (or --importance magnitude)")
    model, tokenizer = kind.load_torch(folder)
    cfg.model = folder
    cfg, asked = resolve_max_length(cfg, kind, [folder])
    before = structure(model)  # a family pruning cannot slice is refused here, in one line
    family = family_of(model.config)
    require(family.prunes_heads or not cfg.head_fraction,
            f"{family.name} models share one relative-position bias across every layer's heads, so pruning "
            "removes their FFN neurons only: set --head-fraction 0")

    eval_rows, eval_labels, task = [], [], None
    if spec is not None and cfg.max_eval_rows:
        eval_rows, task = load_rows(spec, "validation", cfg.max_eval_rows, cfg.cache_dir)
        eval_labels = align_labels(eval_rows, task, model.config.id2label, tokenizer, cfg.max_length)
    unpruned = torch_logits(model, tokenizer, eval_rows, cfg.max_length) if eval_rows else None

    if cfg.importance == "taylor":  # gradients of the kind's importance_loss (an embedder: its neighbour loss)
        rows, task = load_rows(spec, "train", cfg.importance_rows, cfg.cache_dir)
        labels = align_labels(rows, task, model.config.id2label, tokenizer, cfg.max_length)
        head_scores, neuron_scores = score(model, tokenizer, rows, labels, cfg.max_length, cfg.batch_size)
    else:
        head_scores, neuron_scores = magnitude_scores(model)

    plan = choose_heads(head_scores, cfg.head_fraction, cfg.head_scope, cfg.min_heads_per_layer)
    to_prune = {i: original_head_ids(model, i, pos) for i, pos in plan.items()}
    if to_prune:
        model.prune_heads(to_prune)
    prune_neurons(model, neuron_scores, cfg.neuron_fraction)
    model.eval()
    after = structure(model)

    metrics = {"before": before, "after": after,
               "params_ratio": round(after["num_parameters"] / before["num_parameters"], 4),
               "heads_removed": {str(k): v for k, v in to_prune.items()},
               "head_scores": [[round(float(x), 5) for x in s] for s in head_scores],
               "importance": cfg.importance, "eval_rows": len(eval_rows),
               "note": "scores are before recovery; distil from the unpruned model into this one "
                       "(distill --teacher UNPRUNED --student THIS)"}
    if eval_rows:
        pruned = torch_logits(model, tokenizer, eval_rows, cfg.max_length)
        metrics.update({"val_accuracy_before": accuracy(unpruned, eval_labels),
                        "val_accuracy_after_no_recovery": accuracy(pruned, eval_labels),
                        "vs_unpruned": parity(unpruned, pruned)})
        metrics.update(judged_scores(task, eval_labels, before=unpruned, after_no_recovery=pruned))
    save_model_artifact(cfg.output_dir, model, tokenizer, stage="prune", parents=[folder], **length_records(cfg, asked),
                        metrics=metrics, num_parameters=after["num_parameters"],
                        data=spec.record(task, max_length=cfg.max_length) if spec else None, extra={"kind": kind.name})
    return Path(cfg.output_dir)


def main(argv: list[str] | None = None, prog: str | None = None, description: str | None = None) -> int:
    """The stage's command line (`shrinkbert NAME` passes its prog and one-line summary)."""
    return stage_main(Config, run, description or __doc__, argv, prog)


if __name__ == "__main__":
    sys.exit(main())
