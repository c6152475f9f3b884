"""Unstructured magnitude pruning: zero the smallest weights of the Linear layers, baked in.

Honest scope: zeros shrink a *compressed* file (gzip/zip of the weights, a download), not the
latency of a dense runtime — PyTorch and ONNX Runtime still multiply every zero. The manifest
records the gzip size before and after; for speed, prune structure (compress.prune).
"""
from __future__ import annotations

import sys
from pathlib import Path

import torch

from shrinkbert.compress.common import accuracy, align_labels, gzip_size, load_pt, load_rows, torch_logits
from shrinkbert.compress.configs import SparsifyConfig as Config
from shrinkbert.core.artifacts import atomic_artifact, write_manifest
from shrinkbert.core.config import stage_main
from shrinkbert.core.data.dataspec import resolve_spec, length_records, resolve_max_length
from shrinkbert.core.errors import require
from shrinkbert.core.kinds import kind_for_stage, kind_of, require_stage
from shrinkbert.core.models import count_parameters


def targets(model, cfg: Config) -> list[tuple[torch.nn.Module, str]]:
    chosen = []
    for name, module in model.named_modules():
        if isinstance(module, torch.nn.Linear):
            if name.startswith("classifier") and not cfg.include_classifier:
                continue
            chosen.append((module, "weight"))
        elif isinstance(module, torch.nn.Embedding) and cfg.include_embeddings:
            chosen.append((module, "weight"))
    return chosen


def sparsify(model, cfg: Config) -> dict[str, float]:
    from torch.nn.utils import prune

    params = targets(model, cfg)
    require(bool(params), "no layers selected to sparsify")
    if cfg.scope == "global":
        prune.global_unstructured(params, pruning_method=prune.L1Unstructured, amount=cfg.sparsity)
    else:
        require(cfg.scope == "per_layer", f"scope must be 'global' or 'per_layer', got '{cfg.scope}'")
        for module, name in params:
            prune.l1_unstructured(module, name, amount=cfg.sparsity)
    for module, name in params:
        prune.remove(module, name)  # bake the mask into the weight; no forward hooks left behind
    zeros = sum(int((m.weight == 0).sum()) for m, _ in params)
    total = sum(m.weight.numel() for m, _ in params)
    all_zeros = sum(int((p == 0).sum()) for p in model.parameters())
    return {"sparsity_selected": zeros / total, "selected_weights": total,
            "sparsity_all_parameters": all_zeros / count_parameters(model)}


def run(cfg: Config) -> Path:
    require(bool(cfg.model) and bool(cfg.output_dir), "sparsify needs --model and --output-dir")
    require_stage(kind_for_stage(cfg.model, "sparsify"), "sparsify")
    require(0.0 <= cfg.sparsity < 1.0, f"sparsity must be in [0, 1), got {cfg.sparsity}")
    model, tokenizer = load_pt(cfg.model)
    cfg, asked = resolve_max_length(cfg, kind_of(model.config), [cfg.model])
    rows, labels, task = [], [], None
    spec = resolve_spec(cfg, [cfg.model], required=False)
    if spec is not None and cfg.max_eval_rows:
        rows, task = load_rows(spec, "validation", cfg.max_eval_rows, cfg.cache_dir)
        labels = align_labels(rows, task, model.config.id2label, tokenizer, cfg.max_length)
    acc_before = accuracy(torch_logits(model, tokenizer, rows, cfg.max_length), labels) if rows else None
    weights = next(Path(cfg.model).glob("*.safetensors"))
    size_before, gz_before = weights.stat().st_size, gzip_size(weights)
    metrics = sparsify(model, cfg)
    acc_after = accuracy(torch_logits(model, tokenizer, rows, cfg.max_length), labels) if rows else None
    with atomic_artifact(cfg.output_dir) as tmp:
        model.save_pretrained(tmp, safe_serialization=True)
        tokenizer.save_pretrained(tmp)
        out_weights = next(Path(tmp).glob("*.safetensors"))
        gz_after = gzip_size(out_weights)
        metrics.update({
            "file_bytes_before": size_before, "file_bytes_after": out_weights.stat().st_size,
            "gzip_bytes_before": gz_before, "gzip_bytes_after": gz_after,
            "gzip_ratio": round(gz_before / gz_after, 3),
            "val_accuracy_before": acc_before, "val_accuracy_after": acc_after, "eval_rows": len(rows),
            "note": ("unstructured zeros shrink the compressed (gzip/zip) file only; the dense file size and "
                     "dense-runtime latency are unchanged. Use compress.prune for speed."),
        })
        write_manifest(tmp, stage="sparsify", parents=[cfg.model], **length_records(cfg, asked), metrics=metrics,
                       num_parameters=count_parameters(model), data=spec.record(task) if spec else None)
    return Path(cfg.output_dir)


def main(argv: list[str] | None = None, prog: str | None = None, description: str | None = None) -> int:
    """The stage's command line (`shrinkbert NAME` passes its prog and one-line summary)."""
    return stage_main(Config, run, description or __doc__, argv, prog)


if __name__ == "__main__":
    sys.exit(main())
