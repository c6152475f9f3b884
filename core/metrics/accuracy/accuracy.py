"""Accuracy, as a local `evaluate` metric module (works offline; computed with scikit-learn).

Written like the hub's `accuracy` script so `evaluate.load("/abs/path/to/this/dir")` loads it.
Keep one import per line: evaluate scans this file's imports before loading it.
"""
import datasets
import evaluate
from sklearn.metrics import accuracy_score

_DESCRIPTION = """
Accuracy is the proportion of correct predictions among all cases processed:
Accuracy = (TP + TN) / (TP + TN + FP + FN).
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions (`list` of `int`): predicted labels.
    references (`list` of `int`): ground-truth labels.
    normalize (`bool`): if False, return the number of correct predictions. Defaults to True.
    sample_weight (`list` of `float`): sample weights. Defaults to None.
Returns:
    accuracy (`float` or `int`): in [0, 1], or a count when normalize=False.
Examples:
    >>> metric = evaluate.load("core/metrics/accuracy")
    >>> metric.compute(references=[0, 1, 2, 0, 1, 2], predictions=[0, 1, 1, 2, 1, 0])
    {'accuracy': 0.5}
"""

_CITATION = """
@article{scikit-learn, title={Scikit-learn: Machine Learning in {P}ython}, author={Pedregosa, F. and others},
journal={Journal of Machine Learning Research}, volume={12}, pages={2825--2830}, year={2011}}
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class Accuracy(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features(
                {
                    "predictions": datasets.Sequence(datasets.Value("int32")),
                    "references": datasets.Sequence(datasets.Value("int32")),
                }
                if self.config_name == "multilabel"
                else {
                    "predictions": datasets.Value("int32"),
                    "references": datasets.Value("int32"),
                }
            ),
            reference_urls=["https://scikit-learn.org/stable/modules/generated/sklearn.metrics.accuracy_score.html"],
        )

    def _compute(self, predictions, references, normalize=True, sample_weight=None):
        score = accuracy_score(references, predictions, normalize=normalize, sample_weight=sample_weight)
        return {"accuracy": float(score) if normalize else int(score)}
