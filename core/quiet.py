"""Library warnings a shrinkbert user cannot act on, silenced at the calls that raise them.

Each filter is targeted (one message or one warning category) and applies only inside
`quiet_library_warnings`, used as a decorator on the call that triggers it; everything else a
library says still reaches the user. What is silenced, and why nobody can act on it:

- transformers logs "`torch_dtype` is deprecated" when Optimum's ONNX exporter loads the model
  with the old keyword: Optimum's call, not the user's.
- torch's ONNX tracer warns (TracerWarning) that Python values in transformers' modelling code are
  traced as constants; they are constants for these graphs, and the export's parity check (and
  the latency probe's fixed shapes) is what says whether the graph is right.
- torch warns (DeprecationWarning) that the TorchScript-based ONNX exporter is the legacy one; the
  kit picks it on purpose: the newer dynamo exporter's graphs are not fused by ONNX Runtime.
- ONNX Runtime's quantizer asks, on the root logger, for its shape-inference pre-processing; the
  kit quantizes Optimum's export or its O2-optimized graph, for which the pre-pass is not wanted.
- transformers reports a sentence encoder's pooler as "newly initialized ... You should probably
  TRAIN this model" when an embedding model (saved without BERT's pooler, which sentence vectors
  never use) is loaded as AutoModel: `unused_pooler_quiet` drops that report when the pooler's are
  the only new weights, and the loader then removes the pooler (core/kinds/embedder.py).
- transformers reports a head the stage is about to train (finetune's classifier, pretrain's new
  MLM head) as "newly initialized ... You should probably TRAIN this model": the advice is what
  the stage does next. `new_head_reported` replaces it with one line naming the new modules.
- Accelerate warns "Removed shared tensor" when a checkpoint of a masked-LM model is saved: its
  decoder shares the word-embedding table (and the prediction bias), tied again on every load.
  `tied_decoder_quiet` drops the warning when the MLM decoder's are the only tensors it names.
"""
from __future__ import annotations

import contextlib
import logging
import warnings

# logger name ("" is the root logger) -> message fragments dropped while the calls run
UNACTIONABLE_LOGS = {
    "transformers.configuration_utils": ("`torch_dtype` is deprecated",),
    "": ("Please consider to run pre-processing before quantization",),
}


class _DropMessages(logging.Filter):
    def __init__(self, fragments: tuple[str, ...]):
        super().__init__()
        self.fragments = fragments

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        return not any(fragment in message for fragment in self.fragments)


@contextlib.contextmanager
def quiet_library_warnings(tracing: bool = False):
    """Inside (or around a function it decorates): the messages above are dropped. tracing: the
    call traces a torch model to ONNX (TracerWarning)."""
    installed = []
    for name, fragments in UNACTIONABLE_LOGS.items():
        logger, dropper = logging.getLogger(name or None), _DropMessages(fragments)
        logger.addFilter(dropper)
        installed.append((logger, dropper))
    try:
        with warnings.catch_warnings():
            if tracing:
                from torch.jit import TracerWarning  # deferred: torch costs seconds; tracing loads it anyway

                warnings.filterwarnings("ignore", category=TracerWarning)
                warnings.filterwarnings("ignore", message="You are using the legacy TorchScript-based ONNX export",
                                        category=DeprecationWarning)
                warnings.filterwarnings("ignore", message="The feature will be removed",
                                        category=DeprecationWarning, module="torch.onnx")
                # an LSTM traced at one batch size: its graph takes any (the export's parity check holds it)
                warnings.filterwarnings("ignore", message="Exporting a model to ONNX with a batch_size other than 1")
            yield
    finally:
        for logger, dropper in installed:
            logger.removeFilter(dropper)


NEW_WEIGHTS = r"newly initialized: \[([^\]]*)\]"  # transformers' report of weights a load created
SHARED_TENSORS = r"Removed shared tensor \{([^}]*)\}"  # Accelerate's at save time


class _NamesReport(logging.Filter):
    """Drops a message that lists weight names (the `pattern`'s group) when `drop(names)` says so;
    every other message passes. `seen` keeps the names of the messages dropped."""

    def __init__(self, pattern: str, drop):
        super().__init__()
        self.pattern, self.drop, self.seen = pattern, drop, []

    def filter(self, record: logging.LogRecord) -> bool:
        import re

        found = re.search(self.pattern, record.getMessage())
        if not found:
            return True
        names = [name.strip(" '\"") for name in found.group(1).split(",") if name.strip()]
        if names and self.drop(names):
            self.seen += names
            return False
        return True


def _pooler_only(names: list[str]) -> bool:
    return all(name.startswith("pooler.") for name in names)


def _tied_decoder(names: list[str]) -> bool:
    return all(name.endswith(("decoder.weight", "decoder.bias")) for name in names)


@contextlib.contextmanager
def _filtered(logger_name: str, report: logging.Filter):
    logger = logging.getLogger(logger_name)
    logger.addFilter(report)
    try:
        yield report
    finally:
        logger.removeFilter(report)


def unused_pooler_quiet():
    """Inside: transformers' report of a pooler-only set of new weights is dropped (see above)."""
    return _filtered("transformers.modeling_utils", _NamesReport(NEW_WEIGHTS, _pooler_only))


@contextlib.contextmanager
def new_head_reported(stage: str):
    """Inside: transformers' report of new weights is dropped; after, one line names their modules
    ("finetune: new weights, trained here: bert.pooler.dense, classifier")."""
    with _filtered("transformers.modeling_utils", _NamesReport(NEW_WEIGHTS, lambda names: True)) as report:
        yield
    modules = list(dict.fromkeys(name.rsplit(".", 1)[0] for name in report.seen))
    # the outermost modules only: cls.predictions, not also cls.predictions.transform.dense
    outer = [m for m in modules if not any(m.startswith(other + ".") for other in modules)]
    if outer:
        print(f"{stage}: new weights, trained here: {', '.join(outer)}", flush=True)


def tied_decoder_quiet():
    """Inside: Accelerate's warning about an MLM decoder's tied tensors at save time is dropped (see above)."""
    return _filtered("accelerate.utils.other", _NamesReport(SHARED_TENSORS, _tied_decoder))
