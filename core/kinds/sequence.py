"""Sequence classification (one label per text or text pair): sentiment, topics, next sentence.

Rows are {"text", "text_pair" (or None), "label" (or None)}; the model is a
ForSequenceClassification; the teacher-output cache keeps one logits row per example; KD is the
KL of softened logits; the metrics are the task's (accuracy, F1, Matthews correlation); the
bundle returns a label and its class probabilities (edge/sequence_edge.py).
"""
from __future__ import annotations

from typing import Any, Sequence

import datasets
import numpy as np

from shrinkbert.core.errors import ShrinkbertError
from shrinkbert.core.kinds import register
from shrinkbert.core.kinds.base import TaskKind
from shrinkbert.core.kinds.losses import hard_loss, kd_logits_loss
from shrinkbert.core.metrics import compute_metrics
from shrinkbert.core.parity_texts import PARITY_SENTENCES
from shrinkbert.core.predict import accuracy, cross_entropy, predict
from shrinkbert.core.userdata import encode_labels, quiet_datasets, standardize


@register
class SequenceKind(TaskKind):
    name = "sequence"
    architecture_suffix = "ForSequenceClassification"
    auto_model_class = "AutoModelForSequenceClassification"
    ort_model_class = "ORTModelForSequenceClassification"
    export_task = "text-classification"
    columns = ("text", "text_pair", "label")
    supports_pairs = True
    supports_transfer_set = True
    known_metrics = ("accuracy", "f1", "matthews_correlation")
    read_priority = 100  # the catch-all: a table of texts and labels
    bundle_module = "sequence_edge.py"

    # -- the task declaration ---------------------------------------------------------------------
    def primary_metric(self, task) -> tuple[str, str]:
        return "accuracy", "accuracy"

    def report_metric(self, task) -> tuple[str, str]:
        """The report judges a sequence task by the first metric it declares."""
        return (task.metrics[0],) * 2

    # -- reading and checking rows ----------------------------------------------------------------
    def read_user_splits(self, read, where, options):
        raw = {split: table for split, (table, _, _) in read.items()}
        splits = {split: standardize(table, f"{where}" + (f" ({split})" if len(raw) > 1 else ""),
                                     options["text_column"], options["text_pair_column"], options["label_column"])
                  for split, table in raw.items()}
        label_names, splits = encode_labels(splits, where, options["label_names"])
        fields = {"label_names": label_names, "pair": bool(options["text_pair_column"]),
                  "metrics": tuple(options["metrics"] or ("accuracy",))}
        return fields, splits

    def label_features(self, features, task):
        features["label"] = datasets.ClassLabel(names=list(task.label_names))
        return features

    def rows(self, split, task) -> list[dict[str, Any]]:
        pairs = split["text_pair"] if "text_pair" in split.column_names else [None] * len(split)
        labels = split["label"] if "label" in split.column_names else [None] * len(split)
        return [{"text": t, "text_pair": p, "label": l} for t, p, l in zip(split["text"], pairs, labels)]

    def example_rows(self, sentences: Sequence[str]) -> list[dict[str, Any]]:
        return [{"text": t, "text_pair": None, "label": None} for t in sentences]

    def long_parity_rows(self, max_length: int, task) -> list[dict[str, Any]]:
        """A text of exactly max_length tokens, one about 2.5 times as long, and for a pair task a short first
        text with a long second one (truncation must cut the pair as the model was trained on it)."""
        rows = super().long_parity_rows(max_length, task)
        past_limit = rows[-1]["text"]
        if task is not None and task.pair:
            rows += [{"text": PARITY_SENTENCES[0], "text_pair": past_limit, "label": None},
                     {"text": past_limit, "text_pair": PARITY_SENTENCES[1], "label": None}]
        return rows

    def test_rows(self, split, task) -> dict[str, Any]:
        pairs = [str(p) for p in split["text_pair"]] if task.pair and "text_pair" in split.column_names else None
        return {"texts": [str(t) for t in split["text"]], "labels": [int(x) for x in split["label"]], "pairs": pairs}

    def texts(self, split) -> list:
        pairs = split["text_pair"] if "text_pair" in split.column_names else None
        return list(zip(split["text"], pairs)) if pairs else list(split["text"])

    def check_test_rows(self, task, texts, labels, pairs, words) -> None:
        if words is not None:
            raise ShrinkbertError(f"task '{task.name}' is a sequence task: its test rows have no words")

    # -- encoding and collating -------------------------------------------------------------------
    def tokenize(self, dataset, tokenizer, task, max_length: int = 128, label_all_subtokens: bool = False):
        columns = (dataset.column_names if isinstance(dataset, datasets.Dataset)
                   else next(iter(dataset.values())).column_names)
        if task.pair and "text_pair" not in columns:
            raise ShrinkbertError(f"task '{task.name}' is a pair task but its rows have no text_pair column")

        def encode(batch):
            pair = batch["text_pair"] if task.pair else None
            return tokenizer(batch["text"], pair, truncation=True, max_length=max_length,
                             return_token_type_ids=True, return_attention_mask=True)

        with quiet_datasets():
            tokenized = dataset.map(encode, batched=True, remove_columns=[c for c in columns if c != "label"])
        return tokenized.rename_column("label", "labels")

    def encode(self, tokenizer, rows, max_length: int = 128, padding: Any = True, return_tensors: str | None = "np"):
        texts = [r["text"] for r in rows]
        pairs = [r["text_pair"] for r in rows]
        pairs = pairs if all(p is not None for p in pairs) else None
        return tokenizer(texts, pairs, truncation=True, max_length=max_length, padding=padding,
                         return_tensors=return_tensors)

    # -- models and outputs -----------------------------------------------------------------------
    def kd_loss(self, student, teacher, batch, temperature):
        return kd_logits_loss(student["logits"], teacher["logits"], temperature)

    def hard_loss(self, student, batch):
        return hard_loss(student["logits"], batch["labels"])

    def scored_logits(self, logits, batch, rows=None) -> np.ndarray:
        logits = np.asarray(logits)
        if logits.ndim != 2:
            raise ShrinkbertError("a token classifier needs word rows (a token task, or --task naming one)")
        return logits

    def gold_labels(self, rows, task, id2label, tokenizer=None, max_length: int = 128) -> list:
        labels = [r["label"] for r in rows]
        if task is None or any(label is None for label in labels):
            return [None] * len(rows)
        to_model = _to_model_ids(task, id2label)
        return [to_model[label] for label in labels]

    # -- metrics ----------------------------------------------------------------------------------
    def score(self, task, scored, labels) -> dict[str, float | None]:
        return {"accuracy": accuracy(scored, labels)}

    def score_split(self, model, dataset, collate, task, batch_size: int = 64) -> dict[str, float]:
        logits, labels = predict(model, dataset, collate, batch_size)
        return {"accuracy": accuracy(logits, labels), "loss": cross_entropy(logits, labels)}

    def score_cached(self, task, logits, dataset) -> dict[str, float] | None:
        return {"accuracy": accuracy(np.asarray(logits), dataset["labels"])}

    def metric_columns(self, task) -> list[tuple[str, str, str]]:
        return [(m, m, m) for m in task.metrics]

    def score_runner(self, runner, rows, columns, batch_size: int, max_length: int) -> dict[str, Any]:
        predictions: list[int] = []
        for start in range(0, len(rows), batch_size):
            texts = rows.texts[start:start + batch_size]
            pairs = rows.pairs[start:start + batch_size] if rows.pairs is not None else None
            logits = np.asarray(runner.predict(texts, pairs, max_length))
            if logits.ndim == 3:
                raise ShrinkbertError(f"the model tags words (a token classifier) but task '{rows.task.name}' "
                                      "is a sequence task")
            if logits.ndim != 2 or logits.shape[0] != len(texts):
                raise ShrinkbertError(f"the model returned logits of shape {logits.shape} for {len(texts)} rows")
            predictions.extend(self.task_predictions(logits, columns, rows.task))
        metrics = compute_metrics(rows.task.metrics, predictions, rows.labels, num_labels=rows.task.num_labels)
        return {"metrics": metrics, "n": len(rows), "predictions": predictions}


def _to_model_ids(task, id2label) -> list[int]:
    """Task label index -> the model's label id: by name when task and model both name them."""
    model_names = {str(v): int(k) for k, v in (id2label or {}).items()}
    if model_names and set(task.label_names) <= set(model_names):
        return [model_names[name] for name in task.label_names]
    return list(range(task.num_labels))
