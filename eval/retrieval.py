"""Retrieval on SQuAD articles: paragraphs are the documents, each question's gold document is its
paragraph: a measure of whether a student holds in a teacher's index on text it was not distilled on.

Three settings, each with recall@1, recall@10 and MRR@10 and a bootstrap interval over questions:

    teacher    the baseline's query vectors in the baseline's index (what the student is held to)
    drop-in    the variant's query vectors in the baseline's index (a student swapped in for the
               query side of a deployed search, the index left as the teacher built it)
    own        the variant's query vectors in its own index (the whole search re-built with it)

The questions are a seeded sample across the articles; every paragraph of the file is indexed (with
--retrieval-articles held-out, every paragraph of the half of the articles whose questions a
distillation corpus never takes: core/qa_data.article_half). A
drop-in variant is also compared with the teacher question by question (`paired_difference`): its
recall minus the teacher's, in points, with the report's paired bootstrap interval (eval/stats.py),
tighter than the two settings' own intervals suggest.
"""
from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from shrinkbert.core.kinds.embedding import gold_ranks  # noqa: F401  (the measure's ranks, one home)
from shrinkbert.core.qa_data import HELD_OUT_HALF, article_half
from shrinkbert.core.errors import ShrinkbertError
from shrinkbert.eval.stats import paired_bootstrap

K = 10
BOOTSTRAP_RESAMPLES = 1000


@dataclass(frozen=True)
class Retrieval:
    paragraphs: list[str]
    questions: list[str]
    gold: np.ndarray  # each question's paragraph row


ARTICLES = ("all", HELD_OUT_HALF)


def read_squad_retrieval(path: str | Path, max_questions: int, seed: int = 0, max_articles: int = 0,
                         articles: str = "all") -> Retrieval:
    """Every paragraph of a SQuAD JSON file (of its first `max_articles`, 0: all; with articles
    "held-out", only the articles whose questions a distillation corpus never takes,
    qa_data.article_half), and up to `max_questions` of their questions (seeded)."""
    if articles not in ARTICLES:
        raise ShrinkbertError(f"--retrieval-articles {articles}: choose {' or '.join(ARTICLES)}")
    file = Path(path)
    try:
        found = json.loads(file.read_text(encoding="utf-8"))["data"]
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise ShrinkbertError(f"--retrieval {path}: not a readable SQuAD JSON file ({str(err).splitlines()[0][:200]})") from None
    if articles == HELD_OUT_HALF:
        found = [article for article in found if article_half(str(article.get("title") or "")) == HELD_OUT_HALF]
    paragraphs, questions = [], []
    for article in found[:max_articles or None]:
        for paragraph in article.get("paragraphs", []):
            row = len(paragraphs)
            paragraphs.append(paragraph["context"])
            questions += [(qa["question"], row) for qa in paragraph.get("qas", []) if qa.get("question", "").strip()]
    if len(paragraphs) < K or not questions:
        raise ShrinkbertError(f"--retrieval {path}: {len(paragraphs)} paragraphs and {len(questions)} questions "
                              f"(a search needs at least {K} paragraphs and one question)")
    random.Random(seed).shuffle(questions)
    questions = questions[:max_questions]
    return Retrieval(paragraphs, [q for q, _ in questions], np.asarray([row for _, row in questions]))


def held_out_documents(sources: str, max_documents: int, held_out: int, seed: int = 0) -> Retrieval:
    """A drop-in corpus's held-out documents (the distill stage's split, students/documents.py) as the
    documents, and queries made from them (their own first) with each one's document as its gold."""
    from shrinkbert.students.documents import corpus_split, held_out_queries

    _, held = corpus_split(sources, max_documents, held_out)
    asked = held_out_queries(held, 2, seed)
    if len(held) < K or not asked.queries:
        raise ShrinkbertError(f"--documents {sources}: {len(held)} held-out documents and {len(asked.queries)} queries "
                              f"(a search needs at least {K} documents and one query)")
    return Retrieval(held.texts, asked.queries, np.asarray(asked.documents))


def scores_of(ranks: np.ndarray, seed: int = 0) -> dict[str, dict[str, float]]:
    """{recall_at_1, recall_at_10, mrr_at_10: {value, low, high}}: the mean over questions and its 95%
    percentile bootstrap interval (questions resampled)."""
    per_question = {"recall_at_1": (ranks <= 1).astype(float), f"recall_at_{K}": (ranks <= K).astype(float),
                    f"mrr_at_{K}": np.where(ranks <= K, 1.0 / ranks, 0.0)}
    rng = np.random.default_rng(seed)
    resamples = rng.integers(0, len(ranks), (BOOTSTRAP_RESAMPLES, len(ranks)))
    out = {}
    for name, values in per_question.items():
        means = values[resamples].mean(axis=1)
        out[name] = {"value": float(values.mean()), "low": float(np.percentile(means, 2.5)),
                     "high": float(np.percentile(means, 97.5))}
    return out


def paired_difference(ranks: np.ndarray, base_ranks: np.ndarray) -> dict[str, dict[str, float]]:
    """{recall_at_1, recall_at_10: {value, low, high}}: the variant's recall minus the baseline's on the
    same questions, in points, with the report's paired 95% bootstrap interval (eval/stats.py)."""
    out = {}
    for name, k in (("recall_at_1", 1), (f"recall_at_{K}", K)):
        value, low, high = paired_bootstrap((ranks <= k).astype(float), (base_ranks <= k).astype(float))
        out[name] = {"value": 100.0 * value, "low": 100.0 * low, "high": 100.0 * high}
    return out


def retrieval_scores(data: Retrieval, queries: np.ndarray, index: np.ndarray) -> dict[str, dict[str, float]]:
    return scores_of(gold_ranks(queries, index, data.gold))
