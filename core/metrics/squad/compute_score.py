"""SQuAD exact match and F1, the official evaluation scripts' rules (v1.1 and v2.0) in one home.

Answers are normalised as the official scripts do (lower case, no punctuation, no articles
a/an/the, whitespace collapsed); a prediction scores the best over its question's gold answers.
A question with no gold answer (SQuAD v2.0) scores 1 exactly when the prediction is "".
Scores are percentages, as the official scripts and the hub's `squad`/`squad_v2` metrics give them.
Imported by the evaluate module beside it and by the harness (per-question F1 for the v2 threshold).
"""
import collections
import re
import string

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCTUATION = set(string.punctuation)


def normalize_answer(text):
    """Lower text and remove punctuation, articles and extra whitespace (the official rule)."""
    text = "".join(ch for ch in text.lower() if ch not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def exact_match(prediction, gold):
    return float(normalize_answer(prediction) == normalize_answer(gold))


def f1(prediction, gold):
    """Token-overlap F1 of normalised answers; two empty answers agree (v2.0's rule)."""
    predicted, reference = normalize_answer(prediction).split(), normalize_answer(gold).split()
    if not predicted or not reference:
        return float(predicted == reference)
    common = collections.Counter(predicted) & collections.Counter(reference)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision, recall = same / len(predicted), same / len(reference)
    return 2 * precision * recall / (precision + recall)


def question_scores(prediction, gold_answers):
    """(exact match, F1) of one prediction, each the best over the gold answers (none: [""])."""
    golds = [g for g in gold_answers if normalize_answer(g)] or [""]
    return max(exact_match(prediction, g) for g in golds), max(f1(prediction, g) for g in golds)


def compute_score(predictions, references):
    """predictions: {id: text}; references: {id: [gold texts]} -> percentages.

    Always exact_match and f1 over all questions; when any question has no gold answer (v2.0),
    also HasAns_/NoAns_ exact and f1 and their totals, as the official v2.0 script reports them.
    """
    missing = [qid for qid in references if qid not in predictions]
    if missing:
        raise ValueError(f"no prediction for question {missing[0]!r} ({len(missing)} missing)")
    has_answer, no_answer, exact, overlap = [], [], {}, {}
    for qid, golds in references.items():
        exact[qid], overlap[qid] = question_scores(predictions[qid], golds)
        (has_answer if any(normalize_answer(g) for g in golds) else no_answer).append(qid)

    def mean(scores, ids):
        return 100.0 * sum(scores[i] for i in ids) / len(ids) if ids else 0.0

    ids = list(references)
    result = {"exact_match": mean(exact, ids), "f1": mean(overlap, ids), "total": len(ids)}
    if no_answer:
        result.update(HasAns_exact=mean(exact, has_answer), HasAns_f1=mean(overlap, has_answer),
                      HasAns_total=len(has_answer), NoAns_exact=mean(exact, no_answer),
                      NoAns_f1=mean(overlap, no_answer), NoAns_total=len(no_answer))
    return result
