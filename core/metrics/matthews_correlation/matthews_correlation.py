"""Matthews correlation coefficient, as a local `evaluate` metric module (offline; scikit-learn).

Written like the hub's `matthews_correlation` script so `evaluate.load("/abs/path/to/this/dir")`
loads it. Keep one import per line: evaluate scans this file's imports before loading it.
"""
import datasets
import evaluate
from sklearn.metrics import matthews_corrcoef

_DESCRIPTION = """
The Matthews correlation coefficient measures the quality of binary and multiclass classifications.
It is in [-1, 1]: 1 a perfect prediction, 0 no better than chance, -1 total disagreement.
It stays informative when the classes have very different sizes.
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions (`list` of `int`): predicted labels.
    references (`list` of `int`): ground-truth labels.
    sample_weight (`list` of `float`): sample weights. Defaults to None.
Returns:
    matthews_correlation (`float`): in [-1, 1].
Examples:
    >>> metric = evaluate.load("core/metrics/matthews_correlation")
    >>> metric.compute(references=[1, 3, 2, 0, 3, 2], predictions=[1, 2, 2, 0, 3, 3])
    {'matthews_correlation': 0.5384615384615384}
"""

_CITATION = """
@article{scikit-learn, title={Scikit-learn: Machine Learning in {P}ython}, author={Pedregosa, F. and others},
journal={Journal of Machine Learning Research}, volume={12}, pages={2825--2830}, year={2011}}
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class MatthewsCorrelation(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features(
                {
                    "predictions": datasets.Value("int32"),
                    "references": datasets.Value("int32"),
                }
            ),
            reference_urls=["https://scikit-learn.org/stable/modules/generated/sklearn.metrics.matthews_corrcoef.html"],
        )

    def _compute(self, predictions, references, sample_weight=None):
        return {"matthews_correlation": float(matthews_corrcoef(references, predictions, sample_weight=sample_weight))}
