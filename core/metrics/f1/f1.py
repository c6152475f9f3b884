"""F1, as a local `evaluate` metric module (works offline; computed with scikit-learn).

Written like the hub's `f1` script so `evaluate.load("/abs/path/to/this/dir")` loads it.
Keep one import per line: evaluate scans this file's imports before loading it.
"""
import datasets
import evaluate
from sklearn.metrics import f1_score

_DESCRIPTION = """
The F1 score is the harmonic mean of precision and recall: F1 = 2 * (precision * recall) / (precision + recall).
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions (`list` of `int`): predicted labels.
    references (`list` of `int`): ground-truth labels.
    labels (`list` of `int`): the labels to include when average != 'binary'. Defaults to None.
    pos_label (`int`): the positive class when average='binary'. Defaults to 1.
    average (`str`): 'binary' (default), 'micro', 'macro', 'weighted', 'samples' or None (per class).
    sample_weight (`list` of `float`): sample weights. Defaults to None.
Returns:
    f1 (`float` or `list` of `float`): in [0, 1]; a list per class when average=None.
Examples:
    >>> metric = evaluate.load("core/metrics/f1")
    >>> metric.compute(references=[0, 1, 0, 1, 0], predictions=[0, 0, 1, 1, 0])
    {'f1': 0.5}
"""

_CITATION = """
@article{scikit-learn, title={Scikit-learn: Machine Learning in {P}ython}, author={Pedregosa, F. and others},
journal={Journal of Machine Learning Research}, volume={12}, pages={2825--2830}, year={2011}}
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class F1(evaluate.Metric):
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
            reference_urls=["https://scikit-learn.org/stable/modules/generated/sklearn.metrics.f1_score.html"],
        )

    def _compute(self, predictions, references, labels=None, pos_label=1, average="binary", sample_weight=None):
        score = f1_score(references, predictions, labels=labels, pos_label=pos_label, average=average,
                         sample_weight=sample_weight, zero_division=0.0)
        return {"f1": score.tolist() if getattr(score, "ndim", 0) else float(score)}
