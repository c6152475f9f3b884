"""Training an embedding student for drop-in retrieval: questions of the training
half of SQuAD's articles as distillation text, the held-out half as the retrieval measure, a question's
target pulled towards its paragraph's teacher vector, and an equal share from each corpus."""
from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest

from shrinkbert.core.data.load import load_corpus
from shrinkbert.core.qa_data import HELD_OUT_HALF, TRAINING_HALF, article_half, training_questions
from shrinkbert.core.errors import ShrinkbertError
from shrinkbert.eval.retrieval import read_squad_retrieval
from shrinkbert.students.embedding_distill import pull_towards
from shrinkbert.students.corpus_lines import corpus_sentences, query_goals

TITLES = [f"Article_{i}" for i in range(16)]


@pytest.fixture(scope="module")
def squad_file(tmp_path_factory):
    """16 articles of 12 paragraphs, one answerable question each: both halves are populated."""
    data = {"version": "1.1", "data": [
        {"title": title, "paragraphs": [
            {"context": f"{title} paragraph {p} tells of thing {p}.",
             "qas": [{"id": f"{title}-{p}", "question": f"What does {title} paragraph {p} tell of?",
                      "answers": [{"text": f"thing {p}", "answer_start": len(f"{title} paragraph {p} tells of ")}]}]}
            for p in range(12)]} for title in TITLES]}
    path = tmp_path_factory.mktemp("squad") / "squad.json"
    path.write_text(json.dumps(data))
    return path


def test_the_halves_are_fixed_by_title_and_both_are_used():
    halves = {title: article_half(title) for title in TITLES}
    assert set(halves.values()) == {TRAINING_HALF, HELD_OUT_HALF}
    assert halves == {title: article_half(title) for title in TITLES}  # no seed: the same every call


def test_a_squad_corpus_gives_training_questions_and_retrieval_searches_the_other_half(squad_file):
    training = {title for title in TITLES if article_half(title) == TRAINING_HALF}
    questions = load_corpus(str(squad_file))
    assert questions and all(any(f"{title} " in q for title in training) for q in questions)
    assert len(questions) == 12 * len(training)
    pairs = dict(training_questions(squad_file))
    assert all(pairs[q].startswith(q.split()[2]) for q in questions)  # each question keeps its own paragraph
    held_out = read_squad_retrieval(squad_file, max_questions=1000, articles="held-out")
    assert len(held_out.paragraphs) == 12 * (len(TITLES) - len(training))
    assert not any(p.split()[0] in training for p in held_out.paragraphs)
    assert len(read_squad_retrieval(squad_file, max_questions=1000).paragraphs) == 12 * len(TITLES)
    with pytest.raises(ShrinkbertError, match="--retrieval-articles some: choose all or held-out"):
        read_squad_retrieval(squad_file, 5, articles="some")


def test_a_pulled_target_moves_towards_its_goal_and_keeps_its_length():
    rng = np.random.default_rng(0)
    vectors, goals = rng.normal(size=(4, 8)).astype(np.float32) * 3, rng.normal(size=(4, 8)).astype(np.float32)

    def cosines(a, b):
        return np.sum(a * b, axis=1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
    assert np.allclose(pull_towards(vectors, goals, 0.0), vectors, atol=1e-5)
    assert np.allclose(cosines(pull_towards(vectors, goals, 1.0), goals), 1, atol=1e-5)
    half = pull_towards(vectors, goals, 0.5)
    assert np.allclose(np.linalg.norm(half, axis=1), np.linalg.norm(vectors, axis=1), rtol=1e-5)
    assert np.all(cosines(half, goals) > cosines(vectors, goals))


def test_query_goals_pair_questions_with_paragraphs_and_need_a_squad_corpus(squad_file, tmp_path):
    cfg = SimpleNamespace(corpus=f"wordnet,{squad_file}", query_pull=0.5)
    questions = load_corpus(str(squad_file))
    goals = query_goals(cfg, [questions[0], "a line of another corpus"])
    assert goals[0] == dict(training_questions(squad_file))[questions[0]] and goals[1] is None
    assert query_goals(SimpleNamespace(corpus=str(squad_file), query_pull=0.0), questions) is None
    with pytest.raises(ShrinkbertError, match="--query-pull pulls questions towards their paragraphs"):
        query_goals(SimpleNamespace(corpus="wordnet", query_pull=0.5), ["x"])


def test_an_equal_mix_takes_a_share_from_each_corpus(squad_file, tmp_path):
    big = tmp_path / "big.txt"
    big.write_text("\n".join(f"line {i} of the big corpus" for i in range(2000)))
    questions = set(load_corpus(str(squad_file)))
    for mix, low, high in (("pooled", 0, 20), ("equal", 45, 50)):
        cfg = SimpleNamespace(corpus=f"{big},{squad_file}", corpus_mix=mix, max_train_rows=100, seed=0)
        drawn = corpus_sentences(cfg)
        assert len(drawn) == 100 and len(set(drawn)) == 100
        assert low <= sum(line in questions for line in drawn) <= high, mix


def test_classifier_distillation_refuses_the_embedding_levers(tmp_path):
    from shrinkbert.students.distill import Config
    from shrinkbert.students.objectives import OBJECTIVES, refuse_undeclared

    cfg = Config(teacher=str(tmp_path), query_pull=0.5)
    with pytest.raises(ShrinkbertError, match="query.pull'? is not read by the logits objective"):
        refuse_undeclared(cfg, OBJECTIVES["logits"])
