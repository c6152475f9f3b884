"""A linear query adapter: a square map on an embedding student's vectors, fitted after training.

For drop-in use (the student's queries searched in an index its teacher built) the student must land
where the teacher would for the texts it will actually encode. Least squares from the student's
vectors of query-like texts (a query log) to the teacher's finds the linear part of what it still gets
wrong there; ridge towards the identity (weight `lam`) keeps it from moving what those texts do not
show. It needs no relevance labels: `lam` is the one whose map, fitted on four fifths of the texts,
agrees best (mean cosine) with the teacher on the last fifth. The map then folds into the student's
projection (sentence-transformers' Dense), so export, int8 and the bundle carry it as they are.
bench/query_adapter.py measures it on SQuAD questions (docs/embeddings.md).
"""
from __future__ import annotations

import zlib

import numpy as np
import torch

LAMBDAS = (1.0, 3.0, 10.0, 30.0, 100.0, 300.0)  # in units of one text's weight (the rows are unit vectors)
VALIDATION_EVERY = 5  # a text whose checksum is 0 mod this chooses lam
MIN_TEXTS = 50  # fewer leave about ten to choose lam on


def unit(vectors: np.ndarray) -> np.ndarray:
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def fit_adapter(student: np.ndarray, teacher: np.ndarray, lam: float) -> np.ndarray:
    """W minimising |S W - T|^2 + lam |W - I|^2 over unit rows S (student) and T (teacher). No bias: W then
    commutes with a vector's length, so it can sit before the normalisation, where a Dense layer is."""
    identity = np.eye(student.shape[1])
    return np.linalg.solve(student.T @ student + lam * identity, student.T @ teacher + lam * identity)


def validation_rows(texts: list[str]) -> np.ndarray:
    """The fifth of the texts that chooses lam, by a checksum of each text (the same texts, the same fifth)."""
    return np.asarray([zlib.crc32(text.encode("utf-8")) % VALIDATION_EVERY == 0 for text in texts])


def choose_adapter(student: np.ndarray, teacher: np.ndarray, validation: np.ndarray) -> tuple[np.ndarray, dict]:
    """(W fitted on every row with the chosen lam, the record of the choice): lam is the one of LAMBDAS whose
    W, fitted off the validation rows, agrees best with the teacher on them."""
    student, teacher = unit(student.astype(np.float64)), unit(teacher.astype(np.float64))
    agreement = {}
    for lam in LAMBDAS:
        mapped = unit(student[validation] @ fit_adapter(student[~validation], teacher[~validation], lam))
        agreement[lam] = float(np.mean(np.sum(mapped * teacher[validation], axis=1)))
    chosen = max(agreement, key=agreement.get)
    before = float(np.mean(np.sum(student[validation] * teacher[validation], axis=1)))
    return fit_adapter(student, teacher, chosen), {
        "texts": int(len(student)), "validation_texts": int(validation.sum()), "lambda": chosen,
        "validation_agreement": {"before": round(before, 5), "after": round(agreement[chosen], 5)},
        "agreement_by_lambda": {str(lam): round(value, 5) for lam, value in agreement.items()}}


def fold_into_dense(dense: torch.nn.Linear | None, adapter: np.ndarray, hidden: int) -> torch.nn.Linear:
    """The projection that applies `dense` (None: none, `hidden` wide) and then the adapter (row vectors
    times W): weight W^T D and bias b W, or W^T alone."""
    out = torch.from_numpy(adapter.astype(np.float32))
    folded = torch.nn.Linear(dense.in_features if dense is not None else hidden, out.shape[1], bias=True)
    with torch.no_grad():
        if dense is None:
            folded.weight.copy_(out.T)
            folded.bias.zero_()
        else:
            weight = dense.weight.detach().float().cpu()
            bias = dense.bias.detach().float().cpu() if dense.bias is not None else torch.zeros(weight.shape[0])
            folded.weight.copy_(out.T @ weight)
            folded.bias.copy_(bias @ out)
    return folded
