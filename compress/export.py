"""ONNX export through Optimum, with dynamic batch and sequence axes and a parity check on real rows.

The graph is Optimum's (`main_export`, TorchScript exporter, dynamic `batch_size` and
`sequence_length` axes) in the layout ORTModelForSequenceClassification loads. Optional graph
optimization goes through ORTOptimizer (O1/O2); when asked for, its fp32 latency against the plain
graph is measured here and recorded, because on small models it often does not help.

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

from shrinkbert.compress.common import (align_labels, accuracy, load_pt, load_rows, onnx_file, ort_logits,
                             ort_session, parity, torch_logits)
from shrinkbert.compress.configs import ExportConfig as Config
from shrinkbert.core.artifacts import atomic_artifact, check, write_manifest
from shrinkbert.core.config import stage_main, to_dict
from shrinkbert.core.data.builtin import resolve_model
from shrinkbert.core.data.dataspec import resolve_spec, stage_max_length
from shrinkbert.core.errors import ShrinkbertError, require
from shrinkbert.core.kinds import kind_of, own_stage
from shrinkbert.core.models import check_model_dir, count_parameters
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
    names = {i.name for i in session.get_inputs()}
    batch = tokenizer(["hello world " * max_length], truncation=True, max_length=max_length, padding="max_length",
                      return_tensors="np")
    feed = {k: v.astype(np.int64) for k, v in batch.items() if k in names}
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


def run(cfg: Config) -> Path:
    require(bool(cfg.model) and bool(cfg.output_dir), "export needs --model and --output-dir")
    folder = resolve_model(cfg.model)  # "minilm": the installed folder
    own = own_stage(folder, "export")
    if own is not None:  # an embedding model: its pooling and normalisation go inside the graph
        cfg.model = folder  # recorded as the parent
        return own(cfg)
    check_model_dir(cfg.model)
    model, tokenizer = load_pt(cfg.model)
    cfg.max_length = stage_max_length(cfg, kind_of(model.config), [cfg.model])
    spec = resolve_spec(cfg, [cfg.model], required=False)  # no task anywhere: built-in sentences
    kind = kind_of(model)
    rows, task = load_rows(spec, "validation", cfg.parity_rows, cfg.cache_dir, kind=kind)
    labels = align_labels(rows, task, model.config.id2label, tokenizer, cfg.max_length)
    with atomic_artifact(cfg.output_dir) as tmp:
        tmp = Path(tmp)
        export_graph(cfg.model, tmp, cfg.opset, kind=kind)
        metrics: dict = {"optimization": cfg.optimization}
        if cfg.optimization != "none":
            plain_ms = latency_probe(onnx_file(tmp), tokenizer, cfg.max_length, cfg.threads)
            optimize_graph(tmp, cfg.optimization)
            opt_ms = latency_probe(onnx_file(tmp), tokenizer, cfg.max_length, cfg.threads)
            metrics["latency_probe_ms_b1"] = {"plain": round(plain_ms, 3), cfg.optimization: round(opt_ms, 3),
                                              "speedup": round(plain_ms / opt_ms, 3), "threads": cfg.threads or "ort-default"}
        session = ort_session(tmp, cfg.threads or None)
        result, reference, candidate = check_parity(session, model, tokenizer, rows, cfg.max_length)
        # A label can only flip within the tolerance on a near-tie, so the logit bound is the test.
        passed = result["max_abs_logit_diff"] <= cfg.tolerance
        metrics.update({"parity": {**result, "tolerance": cfg.tolerance, "passed": passed,
                                   "rows_source": spec.task if spec else "builtin-sentences"},
                        "val_accuracy_torch": accuracy(reference, labels),
                        "val_accuracy_onnx": accuracy(candidate, labels),
                        "onnx_mb": round(onnx_file(tmp).stat().st_size / 1e6, 3),
                        "dynamic_axes": {i.name: list(i.shape) for i in session.get_inputs()}})
        if not passed and not cfg.allow_parity_failure:
            raise ShrinkbertError(
                f"ONNX parity failed: max |logit diff| {result['max_abs_logit_diff']:.2e} (tolerance "
                f"{cfg.tolerance:.0e}), label agreement {result['label_agreement']:.3f} on {result['rows']} rows; "
                f"no artifact written (--allow-parity-failure writes it anyway)")
        metrics["parity_failure_allowed"] = (not passed) and cfg.allow_parity_failure
        write_manifest(tmp, stage="export", parents=[cfg.model], config=to_dict(cfg), metrics=metrics,
                       num_parameters=count_parameters(model), data=spec.record(task) if spec else None,
                       checks=[check("parity", passed, f"max |logit diff| {result['max_abs_logit_diff']:.2e} "
                                     f"(tolerance {cfg.tolerance:.0e}) on {result['rows']} rows")])
    return Path(cfg.output_dir)


def main(argv: list[str] | None = None, prog: str | None = None, description: str | None = None) -> int:
    """The stage's command line (`shrinkbert NAME` passes its prog and one-line summary)."""
    return stage_main(Config, run, description or __doc__, argv, prog)


if __name__ == "__main__":
    sys.exit(main())
