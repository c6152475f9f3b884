"""Offline metrics: local `evaluate` modules for accuracy, F1 and Matthews correlation.

The evaluate wheel ships no metric scripts and `evaluate.load("accuracy")` goes to the hub
(offline it fails with a misleading FileNotFoundError). The modules in this package's
sub-directories are loaded by absolute path, so nothing touches the network.

    >>> from core.metrics import compute_metrics
    >>> compute_metrics(["accuracy", "f1"], predictions=[0, 1, 1], references=[0, 1, 0])
    {'accuracy': 0.666..., 'f1': 0.666...}
"""
from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any, Sequence

from shrinkbert.core.errors import ShrinkbertError

METRICS_DIR = Path(__file__).resolve().parent
ALIASES = {"acc": "accuracy", "mcc": "matthews_correlation", "matthews": "matthews_correlation",
           "f1_score": "f1"}


def available() -> list[str]:
    """Names of the bundled metric modules (a directory holding NAME/NAME.py)."""
    return sorted(p.name for p in METRICS_DIR.iterdir() if (p / f"{p.name}.py").is_file())


def metric_path(name: str) -> Path:
    canonical = ALIASES.get(name.lower(), name.lower())
    path = METRICS_DIR / canonical
    if not (path / f"{canonical}.py").is_file():
        raise ShrinkbertError(f"unknown metric '{name}'; available offline: {', '.join(available())}")
    return path


@functools.lru_cache(maxsize=None)
def _load(canonical: str):
    # Set before evaluate is imported (it reads these once); a local path never needs the hub anyway.
    os.environ.setdefault("HF_EVALUATE_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import evaluate

    # keep_in_memory: no arrow cache files, so parallel processes do not share lock files.
    return evaluate.load(str(METRICS_DIR / canonical), keep_in_memory=True)


def load_metric(name: str):
    """An `evaluate.EvaluationModule` for a bundled metric, loaded from its local script."""
    return _load(metric_path(name).name)


def compute_metrics(names: Sequence[str], predictions: Sequence[int], references: Sequence[int],
                    num_labels: int | None = None) -> dict[str, Any]:
    """Compute each named metric; one flat dict {name: value}.

    F1 is binary (positive class 1) for two labels and macro-averaged otherwise; the number of
    labels comes from `num_labels`, or from the labels present when it is not given.
    """
    predictions = [int(p) for p in predictions]
    references = [int(r) for r in references]
    if len(predictions) != len(references):
        raise ShrinkbertError(f"{len(predictions)} predictions for {len(references)} references")
    if not references:
        raise ShrinkbertError("no rows to compute metrics on")
    if num_labels is None:
        num_labels = max(max(predictions), max(references)) + 1
    results: dict[str, Any] = {}
    for name in names:
        metric = load_metric(name)
        kwargs = {}
        if metric_path(name).name == "f1":
            kwargs = {"average": "binary"} if num_labels <= 2 else {"average": "macro"}
        results.update(metric.compute(predictions=predictions, references=references, **kwargs))
    return results


def f1_average(num_labels: int) -> str:
    """How `compute_metrics` averages F1 for a task with this many labels (for reports)."""
    return "binary" if num_labels <= 2 else "macro"
