"""The stage catalogue: CLI/recipe names -> the module that runs each stage.

Every stage module exposes `main(argv) -> int` and runs as `python -m MODULE --config FILE`,
so the CLI, the recipe runner and `accelerate launch -m MODULE` all reach the same code.
"""
from __future__ import annotations

STAGES: dict[str, tuple[str, str]] = {
    # name: (module, one-line summary)
    "tokenizer": ("shrinkbert.teachers.tokenizer", "train a WordPiece tokenizer on text"),
    "pretrain": ("shrinkbert.teachers.pretrain", "MLM (+NSP) pretraining, from scratch or continued"),
    "finetune": ("shrinkbert.teachers.finetune", "fine-tune a teacher for classification"),
    "distill": ("shrinkbert.students.distill", "distil a teacher into a student of a target size"),
    "prune": ("shrinkbert.compress.prune", "structured pruning: remove heads and FFN neurons"),
    "sparsify": ("shrinkbert.compress.sparsify", "unstructured magnitude pruning, baked in"),
    "trim-vocab": ("shrinkbert.compress.trim_vocab", "keep only the tokens a corpus uses"),
    "export": ("shrinkbert.compress.export", "ONNX export through Optimum, with a parity check"),
    "quantize": ("shrinkbert.compress.quantize", "int8 through ONNX Runtime (dynamic, static, accuracy-aware)"),
    "bundle": ("shrinkbert.compress.bundle", "edge bundle: int8 ONNX + tokenizer + torch-free predictor"),
    "eval": ("shrinkbert.eval.harness", "measure variants: accuracy, latency, size; the report"),
    "frontier": ("shrinkbert.frontier", "students at a ladder of speed-ups over seeds: one table, one plot"),
}

# Stages that train, and so may run on several processes under `accelerate launch`.
TRAINING_STAGES = {"pretrain", "finetune", "distill"}


def module_for(name: str) -> str:
    """A catalogue name, or a dotted module path (for user-defined stages)."""
    if name in STAGES:
        return STAGES[name][0]
    return name
