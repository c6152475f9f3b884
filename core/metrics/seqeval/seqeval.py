"""Entity-level precision, recall and F1 of BIO tag sequences, as a local `evaluate` metric module.

Written like the hub's `seqeval` script (computed with the seqeval package, CoNLL-2000 style
span matching) so `evaluate.load("/abs/path/to/this/dir")` loads it offline.
Keep one import per line: evaluate scans this file's imports before loading it.
"""
import datasets
import evaluate
from seqeval.metrics import accuracy_score
from seqeval.metrics import classification_report

_DESCRIPTION = """
An entity counts as found only when its type and its exact span match the reference (CoNLL
evaluation). Precision, recall and F1 are micro-averaged over entities of every type.
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions (`list` of `list` of `str`): predicted tags per sentence (B-X, I-X, O).
    references (`list` of `list` of `str`): reference tags per sentence.
Returns:
    overall_precision, overall_recall, overall_f1, overall_accuracy (`float`), and per entity
    type a dict with precision, recall, f1 and number (its count in the references).
Examples:
    >>> metric = evaluate.load("core/metrics/seqeval")
    >>> metric.compute(predictions=[["B-PER", "I-PER", "O"]], references=[["B-PER", "I-PER", "O"]])["overall_f1"]
    1.0
"""

_CITATION = """
@misc{seqeval, title={{seqeval}: A Python framework for sequence labeling evaluation}, author={Hiroki Nakayama},
year={2018}, url={https://github.com/chakki-works/seqeval}}
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class Seqeval(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features({
                "predictions": datasets.Sequence(datasets.Value("string", id="label"), id="sequence"),
                "references": datasets.Sequence(datasets.Value("string", id="label"), id="sequence"),
            }),
            reference_urls=["https://github.com/chakki-works/seqeval"],
        )

    def _compute(self, predictions, references):
        report = classification_report(y_true=references, y_pred=predictions, output_dict=True, zero_division=0)
        report.pop("macro avg", None)
        report.pop("weighted avg", None)
        overall = report.pop("micro avg", {"precision": 0.0, "recall": 0.0, "f1-score": 0.0})
        scores = {kind: {"precision": float(s["precision"]), "recall": float(s["recall"]),
                         "f1": float(s["f1-score"]), "number": int(s["support"])} for kind, s in report.items()}
        scores.update(overall_precision=float(overall["precision"]), overall_recall=float(overall["recall"]),
                      overall_f1=float(overall["f1-score"]),
                      overall_accuracy=float(accuracy_score(y_true=references, y_pred=predictions)))
        return scores
