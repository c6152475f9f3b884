"""shrinkbert: make BERT-family encoders small and fast: classifiers, taggers, extractive QA, sentence embedders.

The front door: the Python API below (shrinkbert/functions.py, typed functions generated from the
stage registry, shrinkbert.stages), the `shrinkbert` CLI (shrinkbert.cli) and the recipe runner
(shrinkbert.recipe) all call the same stage functions. The rooms install inside this namespace:
shrinkbert.teachers, .students, .compress, .eval, and the plumbing in .core.
"""
from shrinkbert.api import Artifact
from shrinkbert.deploy.corpus import predict_corpus
from shrinkbert.deploy.launch import serve
from shrinkbert.functions import (bundle, distill, export, finetune, pretrain, prune, quantize, report, sparsify,
                                  trim_vocab)

__all__ = ["Artifact", "pretrain", "finetune", "distill", "prune", "sparsify", "trim_vocab", "export", "quantize",
           "bundle", "report", "predict_corpus", "serve"]
