"""How well a student embedder stands in for its teacher, beyond STS (core/kinds/sts.py):

- agreement (core/kinds/embedding.py, which the student's epoch pick uses too): mean cosine between
  the student's and the teacher's vectors of the same sentences;
- drop-in recall@k: held-out corpus sentences embedded by the *teacher* (the index a user already
  has), queries embedded by the *student*; the share of the teacher's own k nearest neighbours
  (its queries against its index) the student's query finds among its k;
- frozen-embedding classification (MTEB's protocol): a logistic regression (scikit-learn,
  max_iter 100) on the frozen vectors of a labelled task's train rows, accuracy on its test rows,
  averaged over a few seeded, label-balanced subsamples of the train rows;
- NLI ranking: SNLI-style pairs (premise, hypothesis, label) scored by cosine; the area under the
  ROC curve of entailment against contradiction (the chance that a random entailed pair is closer
  than a random contradicted one): similarity on another style of text than STS-B's;
- throughput: sentences/s embedding a list at batch 32 (indexing speed), one pass after a warm-up.

Every function takes `encode(texts) -> float32 [n, dim]`, so PyTorch, ONNX, static and bundle
embedders are measured alike.
"""
from __future__ import annotations

import time
from typing import Callable, Sequence

import numpy as np

from shrinkbert.core.errors import ShrinkbertError
from shrinkbert.core.kinds.embedding import CONTRADICTION, ENTAILMENT, normalize_rows

Encode = Callable[[list[str]], np.ndarray]




def top_k(queries: np.ndarray, index: np.ndarray, k: int) -> np.ndarray:
    """[n_queries, k] rows of `index` with the highest cosine to each query, best first."""
    if k > len(index):
        raise ShrinkbertError(f"recall@{k} needs at least {k} index rows, got {len(index)}")
    scores = normalize_rows(queries) @ normalize_rows(index).T
    best = np.argpartition(-scores, k - 1, axis=1)[:, :k]
    order = np.take_along_axis(scores, best, axis=1).argsort(axis=1)[:, ::-1]
    return np.take_along_axis(best, order, axis=1)


def drop_in_recall(teacher_index: np.ndarray, teacher_queries: np.ndarray, student_queries: np.ndarray,
                   k: int = 10) -> float:
    """Share of the teacher's k nearest index rows (teacher queries) that the student's queries find
    among theirs in the same teacher-built index."""
    if student_queries.shape[1] != teacher_index.shape[1]:
        raise ShrinkbertError(f"the student's vectors have {student_queries.shape[1]} dimensions, the teacher's "
                              f"index {teacher_index.shape[1]}: a drop-in replacement keeps the teacher's space")
    truth, found = top_k(teacher_queries, teacher_index, k), top_k(student_queries, teacher_index, k)
    return float(np.mean([len(set(a) & set(b)) / k for a, b in zip(truth.tolist(), found.tolist())]))


def _balanced_sample(labels: np.ndarray, per_label: int, rng: np.random.Generator) -> np.ndarray:
    rows = [rng.permutation(np.flatnonzero(labels == label))[:per_label] for label in np.unique(labels)]
    return np.sort(np.concatenate(rows))


def classification_accuracy(train_vectors: np.ndarray, train_labels: Sequence[int], test_vectors: np.ndarray,
                            test_labels: Sequence[int], per_label: int = 256, experiments: int = 3,
                            seed: int = 42) -> float:
    """MTEB's classification protocol on frozen vectors: logistic regression (max_iter 100) on
    `experiments` label-balanced subsamples of `per_label` train rows each; mean test accuracy x100."""
    from sklearn.linear_model import LogisticRegression  # deferred: only this measure needs it

    train_labels, test_labels = np.asarray(train_labels), np.asarray(test_labels)
    rng = np.random.default_rng(seed)
    scores = []
    for _ in range(experiments):
        rows = _balanced_sample(train_labels, per_label, rng)
        model = LogisticRegression(max_iter=100).fit(train_vectors[rows], train_labels[rows])
        scores.append(float((model.predict(test_vectors) == test_labels).mean()) * 100)
    return float(np.mean(scores))


def task_classification(encode: Encode, task_name: str, max_train: int = 2000, max_test: int = 1000,
                        **options) -> float:
    """`classification_accuracy` of an embedder on a built-in (or user) labelled task's train/test rows
    (the first max_train / max_test of each)."""
    from shrinkbert.core.data.load import load_task  # deferred: datasets is heavy

    _, splits = load_task(task_name)
    train, test = splits["train"].select(range(min(max_train, len(splits["train"])))), \
        splits["test"].select(range(min(max_test, len(splits["test"]))))
    return classification_accuracy(encode(list(train["text"])), train["label"], encode(list(test["text"])),
                                   test["label"], **options)


NLI_POSITIVE, NLI_NEGATIVE = ENTAILMENT, CONTRADICTION  # the NLI label names, core/kinds/embedding.py's


def read_nli_pairs(path, max_pairs: int) -> tuple[list[str], list[str], np.ndarray]:
    """(premises, hypotheses, 1 for entailment / 0 for contradiction) of a premise,hypothesis,label CSV
    (SNLI's layout), neutral pairs left out; the first `max_pairs` of each label (0: all)."""
    import csv
    from pathlib import Path

    file = Path(path)
    try:
        with open(file, encoding="utf-8-sig", newline="") as handle:
            rows = list(csv.DictReader(handle))
    except OSError as err:
        raise ShrinkbertError(f"--nli {path}: {err.strerror or err}") from None
    if not rows or not {"premise", "hypothesis", "label"} <= set(rows[0]):
        raise ShrinkbertError(f"--nli {path}: needs premise, hypothesis and label columns (SNLI's layout)")
    kept = {NLI_POSITIVE: [], NLI_NEGATIVE: []}
    for row in rows:
        label = str(row["label"]).strip().lower()
        if label in kept and (not max_pairs or len(kept[label]) < max_pairs):
            kept[label].append(row)
    if not kept[NLI_POSITIVE] or not kept[NLI_NEGATIVE]:
        raise ShrinkbertError(f"--nli {path}: needs both {NLI_POSITIVE} and {NLI_NEGATIVE} pairs")
    chosen = kept[NLI_POSITIVE] + kept[NLI_NEGATIVE]
    return ([r["premise"] for r in chosen], [r["hypothesis"] for r in chosen],
            np.asarray([1] * len(kept[NLI_POSITIVE]) + [0] * len(kept[NLI_NEGATIVE])))


def nli_auc(encode: Encode, premises: list[str], hypotheses: list[str], entailed: np.ndarray) -> float:
    """The ROC AUC x100 of the pairs' cosines for telling entailment (1) from contradiction (0)."""
    from sklearn.metrics import roc_auc_score  # deferred: only this measure needs it

    cosines = np.sum(normalize_rows(encode(premises)) * normalize_rows(encode(hypotheses)), axis=1)
    return float(roc_auc_score(entailed, cosines)) * 100


def throughput(encode: Callable[..., np.ndarray], texts: Sequence[str], batch_size: int = 32) -> float:
    """Sentences per second embedding `texts` in batches of `batch_size` (after one warm-up batch)."""
    texts = list(texts)
    if not texts:
        raise ShrinkbertError("throughput needs texts")
    encode(texts[:batch_size])
    started = time.perf_counter()
    for start in range(0, len(texts), batch_size):
        encode(texts[start:start + batch_size])
    return len(texts) / (time.perf_counter() - started)
