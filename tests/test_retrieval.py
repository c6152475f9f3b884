"""Retrieval on SQuAD articles (eval/retrieval.py): the gold paragraph's rank, recall@k and MRR@10
with their bootstrap intervals, and the file's questions mapped to their own paragraphs."""
from __future__ import annotations

import json

import numpy as np
import pytest

from shrinkbert.core.errors import ShrinkbertError
from shrinkbert.eval.retrieval import gold_ranks, paired_difference, read_squad_retrieval, retrieval_scores, scores_of


def _unit(rows: np.ndarray) -> np.ndarray:
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def test_ranks_recall_and_mrr_by_hand():
    index = np.eye(12, dtype=np.float32)
    queries = _unit(np.eye(12, dtype=np.float32)[[0, 1, 2]] + 0.1 * np.eye(12, dtype=np.float32)[[5, 5, 5]])
    ranks = gold_ranks(queries, index, np.array([0, 5, 7]))
    assert ranks.tolist() == [1, 2, 3]  # row 0 first; row 5 behind row 1; row 7 behind rows 2 and 5 (ties count for it)
    scores = scores_of(ranks)
    assert scores["recall_at_1"]["value"] == pytest.approx(1 / 3)
    assert scores["recall_at_10"]["value"] == 1.0
    assert scores["mrr_at_10"]["value"] == pytest.approx((1 + 1 / 2 + 1 / 3) / 3)
    assert all(s["low"] <= s["value"] <= s["high"] for s in scores.values())


def test_a_squad_file_gives_every_paragraph_and_questions_pointing_at_their_own(tmp_path):
    paragraphs = [f"paragraph number {i} about topic {i}" for i in range(12)]
    data = {"data": [{"title": "a", "paragraphs": [{"context": text, "qas": [{"question": f"what is topic {i}?", "id": str(i),
                                                                              "answers": []}]}
                                                   for i, text in enumerate(paragraphs)]}]}
    (tmp_path / "squad.json").write_text(json.dumps(data))
    found = read_squad_retrieval(tmp_path / "squad.json", max_questions=5, seed=1)
    assert found.paragraphs == paragraphs and len(found.questions) == 5
    assert all(found.questions[i] == f"what is topic {found.gold[i]}?" for i in range(5))
    # a search that embeds a question as its paragraph finds every one at rank 1; a shuffled index does not
    vectors = _unit(np.random.default_rng(0).normal(size=(12, 16)))
    perfect = retrieval_scores(found, vectors[found.gold], vectors)
    assert perfect["recall_at_1"]["value"] == 1.0 and perfect["mrr_at_10"]["value"] == 1.0
    shuffled = retrieval_scores(found, vectors[found.gold], vectors[::-1])
    assert shuffled["recall_at_1"]["value"] < 1.0
    with pytest.raises(ShrinkbertError, match="not a readable SQuAD JSON"):
        read_squad_retrieval(tmp_path / "missing.json", 5)


def test_the_drop_in_difference_is_paired_over_the_same_questions():
    base = np.array([1] * 200 + [5] * 50 + [20] * 50)
    assert paired_difference(base, base)["recall_at_1"] == {"value": 0.0, "low": 0.0, "high": 0.0}
    worse = base.copy()
    worse[:50] = 2  # 50 of 300 questions fall from rank 1 to rank 2: recall@1 -16.7 points, recall@10 unchanged
    diff = paired_difference(worse, base)
    assert abs(diff["recall_at_1"]["value"] + 100 * 50 / 300) < 1e-9 and diff["recall_at_1"]["high"] < 0
    assert diff["recall_at_10"] == {"value": 0.0, "low": 0.0, "high": 0.0}


def test_nli_pairs_are_ranked_by_cosine_entailed_above_contradicted(tmp_path):
    from shrinkbert.eval.embedding_eval import nli_auc, read_nli_pairs

    rows = ["premise,hypothesis,label", "a,a1,entailment", "b,b1,contradiction", "c,c1,neutral", "d,d1,entailment",
            "e,e1,contradiction"]
    (tmp_path / "nli.csv").write_text("\n".join(rows) + "\n")
    premises, hypotheses, entailed = read_nli_pairs(tmp_path / "nli.csv", 0)
    assert premises == ["a", "d", "b", "e"] and entailed.tolist() == [1, 1, 0, 0]  # neutral left out
    assert read_nli_pairs(tmp_path / "nli.csv", 1)[0] == ["a", "b"]
    close = {"a": [1, 0], "a1": [1, 0.1], "d": [0, 1], "d1": [0.1, 1], "b": [1, 0], "b1": [0, 1], "e": [0, 1], "e1": [1, 0.2]}

    def encode(texts):
        return np.asarray([close[t] for t in texts], np.float32)
    assert nli_auc(encode, premises, hypotheses, entailed) == pytest.approx(100.0)
    assert nli_auc(lambda texts: np.ones((len(texts), 2), np.float32), premises, hypotheses, entailed) == 50.0  # all tied
    (tmp_path / "bad.csv").write_text("sentence1,sentence2,score\nx,y,1\n")
    with pytest.raises(ShrinkbertError, match="needs premise, hypothesis and label columns"):
        read_nli_pairs(tmp_path / "bad.csv", 0)
