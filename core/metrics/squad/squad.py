"""SQuAD exact match and F1 (v1.1 and v2.0), as a local `evaluate` metric module (works offline).

Written like the hub's `squad` script (same inputs) so `evaluate.load("/abs/path/to/this/dir")`
loads it; the scoring rules live in compute_score.py beside it. A reference with no answer texts
is an unanswerable SQuAD v2.0 question: the HasAns/NoAns breakdown is then reported too.
Keep one import per line: evaluate scans this file's imports before loading it.
"""
import datasets
import evaluate

from .compute_score import compute_score

_DESCRIPTION = """
Exact match: the share of questions whose normalised prediction equals a normalised gold answer.
F1: token overlap between the normalised prediction and the best-matching gold answer, averaged
over questions. Normalisation (the official script's): lower case, punctuation and the articles
a/an/the removed, whitespace collapsed. An unanswerable question (no gold answer) scores 1 when
the prediction is the empty string.
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions: list of {"id": str, "prediction_text": str} ("" for no answer).
    references: list of {"id": str, "answers": {"text": [str], "answer_start": [int]}}.
Returns:
    exact_match, f1 (percentages), total; with unanswerable references also HasAns_exact,
    HasAns_f1, HasAns_total, NoAns_exact, NoAns_f1, NoAns_total.
Examples:
    >>> metric = evaluate.load("core/metrics/squad")
    >>> metric.compute(predictions=[{"id": "1", "prediction_text": "the Normans"}],
    ...                references=[{"id": "1", "answers": {"text": ["Normans"], "answer_start": [4]}}])
    {'exact_match': 100.0, 'f1': 100.0, 'total': 1}
"""

_CITATION = """
@inproceedings{Rajpurkar2016SQuAD10, title={SQuAD: 100,000+ Questions for Machine Comprehension of Text},
author={Pranav Rajpurkar and Jian Zhang and Konstantin Lopyrev and Percy Liang}, booktitle={EMNLP}, year={2016}}
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class Squad(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features({
                "predictions": {"id": datasets.Value("string"), "prediction_text": datasets.Value("string")},
                "references": {"id": datasets.Value("string"),
                               "answers": datasets.features.Sequence({"text": datasets.Value("string"),
                                                                      "answer_start": datasets.Value("int32")})},
            }),
            reference_urls=["https://rajpurkar.github.io/SQuAD-explorer/"],
        )

    def _compute(self, predictions, references):
        predicted = {p["id"]: p["prediction_text"] for p in predictions}
        gold = {r["id"]: list(r["answers"]["text"]) for r in references}
        return compute_score(predicted, gold)
