"""ONNX export through Optimum, with dynamic batch and sequence axes and a parity check on real rows.

The graph is Optimum's (`main_export`, TorchScript exporter, dynamic `batch_size` and
`sequence_length` axes) in the layout ORTModelForSequenceClassification loads. Optional graph
optimization goes through ORTOptimizer (O1/O2); when asked for, its fp32 latency against the plain
graph is measured here and recorded, because on small models it often does not help. Its
SkipLayerNormalization fusion is then kept or undone, whichever is faster on this host
(compress/skip_layer_norm.py), and the manifest says which.

Parity: the exported graph (optimized, if asked) runs on real rows, in batches of several sizes
and lengths, against the PyTorch model. A max |logit diff| over `tolerance` is a failure (label agreement
is recorded too): ShrinkbertError and no artifact, unless allow_parity_failure (recorded in the manifest).
"""
from __future__ import annotations

import contextlib
import io
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np

from shrinkbert.compress.common import (align_labels, accuracy, copy_graph_files, load_rows, onnx_file, ort_logits,
                                        ort_session, parity, judged_scores, torch_logits)
from shrinkbert.compress.configs import ExportConfig as Config
from shrinkbert.compress import skip_layer_norm
from shrinkbert.core.artifacts import atomic_artifact, check, write_manifest
from shrinkbert.core.compact import is_compact
from shrinkbert.core.config import stage_main
from shrinkbert.core.builtin import resolve_model
from shrinkbert.core.data.dataspec import resolve_spec, length_records, resolve_max_length
from shrinkbert.core.errors import ShrinkbertError, require
from shrinkbert.core.kinds import kind_for_stage, kind_of
from shrinkbert.core.models import count_parameters
from shrinkbert.core.ortsession import graph_feed
from shrinkbert.core.quiet import quiet_library_warnings
from shrinkbert.core.timing import time_callable


@quiet_library_warnings(tracing=True)
def export_graph(model_dir: str | Path, out: Path, opset: int = 0, kind=None) -> None:
    """Export with Optimum under the export task of `kind` (the model's task kind; None: sequence)."""
    from optimum.exporters.onnx import main_export

    kwargs = {"opset": opset} if opset else {}
    task = kind_of(kind).export_task
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            main_export(str(model_dir), output=str(out), task=task, device="cpu",
                        do_validation=False, **kwargs)
    except (ValueError, KeyError, RuntimeError) as err:
        raise ShrinkbertError(f"ONNX export of {model_dir} failed: {str(err).splitlines()[0][:300]}") from None


def optimize_graph(out: Path, level: str) -> None:
    """Replace out/model.onnx with its ORTOptimizer-optimized version."""
    from optimum.onnxruntime import ORTOptimizer
    from optimum.onnxruntime.configuration import OptimizationConfig

    levels = {"O1": 1, "O2": 2}
    require(level in levels, f"optimization must be none, O1 or O2, got '{level}'")
    with tempfile.TemporaryDirectory() as work:
        optimizer = ORTOptimizer.from_pretrained(str(out), file_names=["model.onnx"])
        optimizer.optimize(OptimizationConfig(optimization_level=levels[level]), save_dir=work)
        shutil.move(str(next(Path(work).glob("*.onnx"))), str(out / "model.onnx"))
        for extra in ("ort_config.json",):
            if (Path(work) / extra).is_file():
                shutil.copy2(Path(work) / extra, out / extra)


def latency_probe(path: Path, tokenizer, max_length: int, threads: int) -> float:
    """Median ms of one padded batch-1 row of max_length tokens (a quick probe, not the benchmark)."""
    session = ort_session(path, threads or None)
    batch = tokenizer(["hello world " * max_length], truncation=True, max_length=max_length, padding="max_length",
                      return_tensors="np")
    feed = graph_feed(batch, [i.name for i in session.get_inputs()])
    return time_callable(lambda: session.run(None, feed), warmup=3, runs=15)["p50"]


def check_parity(session, model, tokenizer, rows, max_length: int) -> tuple:
    """Parity over batches of 1, 3 and 8 rows: different batch sizes and padded lengths."""
    reference = torch_logits(model, tokenizer, rows, max_length, batch_size=8)
    pieces, start, sizes = [], 0, [1, 3, 8]
    while start < len(rows):
        size = sizes[len(pieces) % len(sizes)]
        pieces.append(ort_logits(session, tokenizer, rows[start:start + size], max_length, batch_size=size))
        start += size
    candidate = np.concatenate(pieces)
    return parity(reference, candidate), reference, candidate


@quiet_library_warnings(tracing=True)
def trace_graph(model, tokenizer, out: Path, kind, opset: int = 0) -> None:
    """A kind whose outputs Optimum's export leaves out (`graph_export` "traced"): `model` traced by
    torch.onnx's TorchScript exporter (its graphs are the ones ONNX Runtime fuses and quantizes,
    STACK.md) with the encoder inputs it takes, dynamic batch and sequence axes, and the kind's
    `output_names` as its outputs."""
    import torch

    from shrinkbert.core.predict import encoder_inputs

    sample = encoder_inputs(model, tokenizer(["a b", "c"], padding=True, return_tensors="pt", return_token_type_ids=True))
    if "token_type_ids" not in tokenizer.model_input_names:  # a BERT student given MPNet's tokenizer: the
        sample.pop("token_type_ids", None)                 # graph takes what the tokenizer writes (types all 0)
    names, outputs = list(sample), list(kind.output_names)

    class Positional(torch.nn.Module):  # torch.onnx passes inputs by position and reads a tuple back
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, *tensors):
            result = self.model(**dict(zip(names, tensors)))
            return tuple(result[name] for name in outputs)

    with contextlib.redirect_stdout(io.StringIO()):
        torch.onnx.export(Positional().eval(), tuple(sample.values()), str(out / "model.onnx"), input_names=names,
                          output_names=outputs, opset_version=opset or 17, dynamo=False,
                          dynamic_axes={**{name: {0: "batch", 1: "sequence"} for name in names},
                                        **{name: {0: "batch"} for name in outputs}})


def run(cfg: Config) -> Path:
    require(bool(cfg.model) and bool(cfg.output_dir), "export needs --model and --output-dir")
    folder = str(resolve_model(cfg.model))  # "minilm": the installed folder, recorded as the parent
    kind = kind_for_stage(folder, "export")  # a sentence-transformers folder as it ships: an embedder
    model, tokenizer = kind.load_torch(folder)
    cfg.model = folder
    cfg, asked = resolve_max_length(cfg, kind, [folder])
    spec = resolve_spec(cfg, [folder], required=False)  # no task anywhere: built-in sentences
    rows, task = load_rows(spec, "validation", cfg.parity_rows, cfg.cache_dir, kind=kind)
    if task is not None and kind_of(task) is not kind:
        raise ShrinkbertError(f"{folder} is a {kind.description or kind.name} model but task '{task.name}' is "
                              f"{kind_of(task).description or kind_of(task).name}: pass the task it was made for")
    labels = align_labels(rows, task, model.config.id2label, tokenizer, cfg.max_length)
    long_rows = kind.long_parity_rows(cfg.max_length, task)  # at and past max_length: truncation agrees too
    with atomic_artifact(cfg.output_dir) as tmp:
        tmp = Path(tmp)
        if kind.graph_export == "traced" or is_compact(model):  # Optimum knows no compact student's model type
            trace_graph(model, tokenizer, tmp, kind, cfg.opset)
            tokenizer.save_pretrained(tmp)
            copy_graph_files(Path(folder), tmp, kind.graph_files(folder) or ["config.json"])
        else:
            export_graph(folder, tmp, cfg.opset, kind=kind)
        metrics: dict = {"optimization": cfg.optimization}
        if cfg.optimization != "none" and is_compact(model):
            # ORTOptimizer's fusions are a transformer's (attention, LayerNorm, GELU); ONNX Runtime's own
            # graph optimizations still run when a session loads the graph
            metrics.update(optimization="none", optimization_skipped=f"{cfg.optimization}: ORTOptimizer's fusions "
                           f"are a transformer's, and a {model.config.model_type} model has none")
        elif cfg.optimization != "none":
            plain_ms = latency_probe(onnx_file(tmp), tokenizer, cfg.max_length, cfg.threads)
            optimize_graph(tmp, cfg.optimization)
            kept = skip_layer_norm.choose(onnx_file(tmp), cfg.max_length, cfg.threads, len(tokenizer),
                                          cfg.skip_layer_norm)
            if kept is not None:  # the residual Add + LayerNorm fusion, kept or undone by measurement here
                metrics["skip_layer_norm"] = kept
            opt_ms = latency_probe(onnx_file(tmp), tokenizer, cfg.max_length, cfg.threads)
            metrics["latency_probe_ms_b1"] = {"plain": round(plain_ms, 3), cfg.optimization: round(opt_ms, 3),
                                              "speedup": round(plain_ms / opt_ms, 3), "threads": cfg.threads or "ort-default"}
        session = ort_session(tmp, cfg.threads or None)
        result, reference, candidate = check_parity(session, model, tokenizer, rows, cfg.max_length)
        long = parity(torch_logits(model, tokenizer, long_rows, cfg.max_length),
                      ort_logits(session, tokenizer, long_rows, cfg.max_length))
        gap = max(result["max_abs_logit_diff"], long["max_abs_logit_diff"])
        # A label can only flip within the tolerance on a near-tie, so the bound on the outputs is the test.
        passed = gap <= cfg.tolerance
        metrics.update({"parity": {**result, "max_abs_logit_diff": gap, "long_rows": long["rows"],
                                   "long_rows_max_abs_diff": long["max_abs_logit_diff"],
                                   "tolerance": cfg.tolerance, "passed": passed,
                                   "rows_source": spec.task if spec else "builtin-sentences"},
                        "val_accuracy_torch": accuracy(reference, labels),
                        "val_accuracy_onnx": accuracy(candidate, labels),
                        "onnx_mb": round(onnx_file(tmp).stat().st_size / 1e6, 3),
                        "dynamic_axes": {i.name: list(i.shape) for i in session.get_inputs()}})
        metrics.update(judged_scores(task, labels, torch=reference, onnx=candidate))
        if not passed and not cfg.allow_parity_failure:
            raise ShrinkbertError(
                f"ONNX parity failed: max |output diff| {gap:.2e} (tolerance {cfg.tolerance:.0e}), label agreement "
                f"{result['label_agreement']:.3f} on {result['rows'] + long['rows']} rows; no artifact written "
                "(--allow-parity-failure writes it anyway)")
        metrics["parity_failure_allowed"] = (not passed) and cfg.allow_parity_failure
        write_manifest(tmp, stage="export", parents=[folder], **length_records(cfg, asked), metrics=metrics,
                       num_parameters=count_parameters(model), data=spec.record(task) if spec else None,
                       checks=[check("parity", passed, f"max |output diff| {gap:.2e} (tolerance {cfg.tolerance:.0e}) "
                                     f"on {result['rows']} rows and {long['rows']} at or past max_length")],
                       extra={"kind": kind.name})
    return Path(cfg.output_dir)


def main(argv: list[str] | None = None, prog: str | None = None, description: str | None = None) -> int:
    """The stage's command line (`shrinkbert NAME` passes its prog and one-line summary)."""
    return stage_main(Config, run, description or __doc__, argv, prog)


if __name__ == "__main__":
    sys.exit(main())
