"""Token classification (one tag per word): named entities, parts of speech.

Rows are {"tokens": [word, ...], "tags": [label index per word] (or None)}, the shape of the
hub's conll2003/wnut_17. The model is a ForTokenClassification; each word is labelled and scored
on its first sub-token (core/kinds/tagging.py holds the alignment rules), so the kit's flat arrays have
one row per scored word. The teacher-output cache keeps each row's per-token logits; KD compares
softened logits at the labelled words; the metrics are word accuracy and, for BIO tags, seqeval's
entity precision/recall/F1; the bundle returns word tags and entity spans (edge/token_edge.py).
"""
from __future__ import annotations

from typing import Any, Sequence

import datasets
import numpy as np

from shrinkbert.core.errors import ShrinkbertError
from shrinkbert.core.kinds import register
from shrinkbert.core.kinds.base import TaskKind
from shrinkbert.core.kinds.losses import hard_loss, kd_logits_loss
from shrinkbert.core.metrics import compute_metrics, load_metric
from shrinkbert.core.predict import accuracy, cross_entropy, predict
from shrinkbert.core.kinds.tagging import (IGNORE, align_labels, encode_words, encoded_word_ids, flat_labelled, gather_words,
                                     gold_words, split_rows, word_counts)
from shrinkbert.core.userdata import encode_tags, quiet_datasets, standardize_tokens, tag_metrics, token_columns


class WordLabels(list):
    """A token task's gold labels, one per scored word, with the words per row (for entity F1)."""

    def __init__(self, labels, counts):
        super().__init__(labels)
        self.counts = list(counts)


@register
class TokenKind(TaskKind):
    name = "token"
    architecture_suffix = "ForTokenClassification"
    auto_model_class = "AutoModelForTokenClassification"
    ort_model_class = "ORTModelForTokenClassification"
    export_task = "token-classification"
    columns = ("tokens", "tags")
    per_token_outputs = True
    known_metrics = ("accuracy", "seqeval")
    read_priority = 10  # before the catch-all table of texts: CoNLL files and word-list columns
    bundle_module = "token_edge.py"
    description = "token classification"
    cache_identity = ("token-classifier",)
    scores_words = True
    scored_unit = "words"

    # -- the task declaration ---------------------------------------------------------------------
    def check_task(self, task) -> None:
        if task.pair:
            raise ShrinkbertError(f"task '{task.name}': a token task cannot be a pair task")
        super().check_task(task)

    def default_metrics(self, label_names):
        return tag_metrics(label_names)

    def primary_metric(self, task) -> tuple[str, str]:
        return ("entity_f1", "entity F1") if "seqeval" in task.metrics else ("accuracy", "word accuracy")

    def metric_columns(self, task) -> list[tuple[str, str, str]]:
        columns = []
        for metric in task.metrics:
            if metric == "seqeval":
                columns += [("entity_f1", "entity_f1", "entity F1"),
                            ("entity_precision", "entity_precision", "entity precision"),
                            ("entity_recall", "entity_recall", "entity recall")]
            elif metric == "accuracy":
                columns.append(("word_accuracy", "accuracy", "word accuracy"))
            else:
                columns.append((metric, metric, metric))
        return columns

    def metrics_note(self, report, columns, max_length: int) -> str | None:
        dropped = [r.get("words_dropped") for r in report["variants"] if r.get("words_dropped")]
        return (f"- Metrics: {', '.join(name for _, _, name in columns)} over the words of the test rows, "
                "each word scored on its first sub-token (words past the truncation length are not "
                f"scored{f', up to {max(dropped)} per variant' if dropped else ''})"
                + ("; entity scores by seqeval over the BIO tags" if "seqeval" in report["task"]["metrics"] else "")
                + f", through `evaluate` (local modules in core/metrics); inputs truncated at {max_length} "
                "tokens (edge bundles use their own Predictor and truncation). Latency inputs are each "
                "row's words joined by spaces.")

    # -- reading and checking rows ----------------------------------------------------------------
    def read_user_splits(self, read, where, options):
        tokens = {}
        for split, (table, file, conll) in read.items():
            if conll:
                tokens[split] = table
            elif columns := token_columns(table, options["text_column"], options["label_column"]):
                tokens[split] = standardize_tokens(table, file, *columns)
        if not tokens:
            return None
        if len(tokens) != len(read):
            texts = [split for split in read if split not in tokens]
            raise ShrinkbertError(f"{where}: {', '.join(tokens)} hold tagged words but {', '.join(texts)} hold texts; "
                                  "give every split in one format")
        if options["text_pair_column"]:
            raise ShrinkbertError(f"{where} holds tagged words: a token task has no text_pair_column")
        label_names, tokens = encode_tags(tokens, where, options["label_names"])
        return {"label_names": label_names, "metrics": tuple(options["metrics"] or tag_metrics(label_names))}, tokens

    def label_features(self, features, task):
        features["tokens"] = datasets.Sequence(datasets.Value("string"))
        features["tags"] = datasets.Sequence(datasets.ClassLabel(names=list(task.label_names)))
        return features

    def rows(self, split, task) -> list[dict[str, Any]]:
        return [{"tokens": list(t), "tags": list(g)} for t, g in zip(split["tokens"], split["tags"])]

    def example_rows(self, sentences: Sequence[str]) -> list[dict[str, Any]]:
        return [{"tokens": t.split(), "tags": None} for t in sentences]

    def test_rows(self, split, task) -> dict[str, Any]:
        words = [[str(w) for w in row] for row in split["tokens"]]
        labels = [[int(t) for t in row] for row in split["tags"]]
        bad = [i for i, row in enumerate(labels) for t in row if not 0 <= t < task.num_labels]
        if bad:
            raise ShrinkbertError(f"test row {bad[0]}: a tag outside 0..{task.num_labels - 1}")
        return {"texts": [" ".join(row) for row in words], "labels": labels, "pairs": None, "words": words}

    def check_test_rows(self, task, texts, labels, pairs, words) -> None:
        if words is None or len(words) != len(texts):
            raise ShrinkbertError(f"token task '{task.name}': test rows need their words (one list per row)")
        for i, (row_words, tags) in enumerate(zip(words, labels)):
            if len(row_words) != len(tags):
                raise ShrinkbertError(f"test row {i}: {len(row_words)} words but {len(tags)} tags")

    def texts(self, split) -> list:
        return [" ".join(words) for words in split["tokens"]]  # the pre-tokenizer splits them back the same way

    # -- encoding and collating -------------------------------------------------------------------
    def tokenize(self, dataset, tokenizer, task, max_length: int = 128, label_all_subtokens: bool = False):
        """Sub-token inputs and one label per sub-token (core/kinds/tagging.py's rule). Only the train split
        may label every sub-token (label_all_subtokens): validation and test always score first
        sub-tokens, so every stage reports the same word-level numbers."""
        columns = (dataset.column_names if isinstance(dataset, datasets.Dataset)
                   else next(iter(dataset.values())).column_names)
        if "tokens" not in columns or "tags" not in columns:
            raise ShrinkbertError("a token task's rows need 'tokens' and 'tags' columns")

        def encode(batch, all_subtokens):
            encoded = encode_words(tokenizer, batch["tokens"], max_length)
            encoded["labels"] = [align_labels(encoded.word_ids(i), tags, all_subtokens)
                                 for i, tags in enumerate(batch["tags"])]
            return dict(encoded)

        def one(split, name):
            with quiet_datasets():
                return split.map(encode, batched=True, remove_columns=columns,
                                 fn_kwargs={"all_subtokens": label_all_subtokens and name == "train"})

        if isinstance(dataset, datasets.Dataset):
            return one(dataset, "test")
        return datasets.DatasetDict({name: one(split, name) for name, split in dataset.items()})

    def encode(self, tokenizer, rows, max_length: int = 128, padding: Any = True, return_tensors: str | None = "np"):
        return encode_words(tokenizer, [r["tokens"] for r in rows], max_length, padding=padding,
                            return_tensors=return_tensors)

    def collate_labels(self, values: list, width: int) -> list:
        return [list(v) + [IGNORE] * (width - len(v)) for v in values]  # padded to the inputs, ignored

    # -- models and outputs -----------------------------------------------------------------------
    def kd_loss(self, student, teacher, batch, temperature):
        labelled = batch["labels"] != IGNORE  # the labelled words' first sub-tokens
        return kd_logits_loss(student["logits"][labelled], teacher["logits"][labelled], temperature)

    def hard_loss(self, student, batch):
        labelled = batch["labels"] != IGNORE
        return hard_loss(student["logits"][labelled], batch["labels"][labelled])

    def scored_logits(self, logits, batch, rows=None) -> np.ndarray:
        logits = np.asarray(logits)
        if logits.ndim != 3:
            raise ShrinkbertError(f"the model returned logits of shape {logits.shape}: a sequence classifier "
                                  "cannot tag words (a token task needs a token classifier)")
        if rows is None:  # a collated batch: its aligned labels mark the scored sub-tokens
            return flat_labelled(logits, np.asarray(batch["labels"]))[0]
        return gather_words(logits, encoded_word_ids(batch, len(rows)))

    def gold_labels(self, rows, task, id2label, tokenizer=None, max_length: int = 128) -> list:
        tags = [r["tags"] for r in rows]
        if task is None or any(t is None for t in tags):
            return [None] * len(rows)
        model_names = {str(v): int(k) for k, v in (id2label or {}).items()}
        if model_names and set(task.label_names) <= set(model_names):
            to_model = [model_names[name] for name in task.label_names]
        else:
            to_model = list(range(task.num_labels))
        if tokenizer is None:
            raise ShrinkbertError("token rows need the tokenizer to find which words fit")
        encoded = encode_words(tokenizer, [r["tokens"] for r in rows], max_length)
        flat, counts = gold_words([[to_model[t] for t in row] for row in tags], encoded_word_ids(encoded, len(rows)))
        return WordLabels(flat, counts)

    # -- metrics ----------------------------------------------------------------------------------
    def score(self, task, scored, labels) -> dict[str, float | None]:
        if task is not None and isinstance(labels, WordLabels):
            return tag_scores(task, np.asarray(scored).argmax(-1), labels, labels.counts)
        return {"accuracy": accuracy(scored, labels)}

    def score_split(self, model, dataset, collate, task, batch_size: int = 64) -> dict[str, float]:
        logits, labels = predict(model, dataset, collate, batch_size, scored=flat_labelled)
        scores = tag_scores(task, logits.argmax(-1), labels, word_counts(dataset["labels"]))
        scores["loss"] = cross_entropy(logits, labels)
        return scores

    def score_runner(self, runner, rows, columns, batch_size: int, max_length: int) -> dict[str, Any]:
        """Each word scored on its first sub-token, words past the variant's truncation (or that its
        tokenizer turns into nothing) dropped with their gold tags; word accuracy, and for a seqeval
        task entity precision/recall/F1 (tag_scores)."""
        predictions: list[int] = []
        golds: list[int] = []
        counts: list[int] = []
        for start in range(0, len(rows), batch_size):
            words = rows.words[start:start + batch_size]
            tags = rows.labels[start:start + batch_size]
            logits, scored = runner.predict_words(words, max_length)
            logits = np.asarray(logits)
            if len(scored) != len(words) or any(not all(0 <= i < len(w) for i in s) for s, w in zip(scored, words)):
                raise ShrinkbertError(f"the model scored words {scored} of rows of {[len(w) for w in words]} words")
            total = sum(len(s) for s in scored)
            if logits.ndim != 2 or logits.shape[0] != total:
                raise ShrinkbertError(f"the model returned word logits of shape {logits.shape} for {total} words")
            predictions.extend(self.task_predictions(logits, columns, rows.task))
            for row_tags, indices in zip(tags, scored):
                golds.extend(int(row_tags[i]) for i in indices)  # the gold tags of the words scored
                counts.append(len(indices))
        if not golds:
            raise ShrinkbertError(f"no word of the {len(rows)} test rows could be scored")
        metrics = tag_scores(rows.task, predictions, golds, counts)
        return {"metrics": metrics, "n": len(rows), "words": len(golds), "words_dropped": rows.num_words - len(golds),
                "predictions": predictions, "word_counts": counts,
                # right/wrong per scored word: the report's paired differences (eval/stats.py)
                "correct": [int(p == g) for p, g in zip(predictions, golds)]}


def tag_scores(task, predictions: Sequence[int], references: Sequence[int], counts: Sequence[int]) -> dict[str, float]:
    """Word accuracy, and for a task scored with seqeval entity precision/recall/F1 over its BIO tags."""
    predictions, references = [int(p) for p in predictions], [int(r) for r in references]
    if not references:
        raise ShrinkbertError("no words to score")
    scores = {"accuracy": compute_metrics(["accuracy"], predictions, references)["accuracy"]}
    if "seqeval" in task.metrics:
        names = task.label_names
        result = load_metric("seqeval").compute(
            predictions=[[names[p] for p in row] for row in split_rows(predictions, counts)],
            references=[[names[r] for r in row] for row in split_rows(references, counts)])
        scores.update(entity_precision=result["overall_precision"], entity_recall=result["overall_recall"],
                      entity_f1=result["overall_f1"])
    return scores
