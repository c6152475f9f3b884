"""Measure variants side by side: load (with memory), accuracy, interleaved latency; cached.

`measure(paths, rows, settings, cache)` returns one Variant per path, in order. A variant
that cannot be found, loaded or run carries an `error` line and the others are still measured.
"""
from __future__ import annotations

import os
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
from tqdm.auto import tqdm

from shrinkbert.core.artifacts import artifact_hash, read_manifest
from shrinkbert.core.device import describe_machine
from shrinkbert.core.errors import ShrinkbertError
from shrinkbert.core.metrics import compute_metrics
from shrinkbert.eval.cache import MeasurementCache, cache_key
from shrinkbert.eval.latency import Case, measure_interleaved, plan_cases
from shrinkbert.eval.lineage import lineage
from shrinkbert.eval.memory import MODES, PeakRSS
from shrinkbert.eval.rows import TestRows
from shrinkbert.eval.runners import detect_kind, is_token_artifact, open_runner

CACHE_VERSION = 2
MEMORY_PROBES_AT_ONCE = 2  # the machines this targets have 2 cores


@dataclass
class Settings:
    batch_sizes: list[int] = field(default_factory=lambda: [1, 8])
    seq_lens: list[str] = field(default_factory=lambda: ["128", "real"])
    runs: int = 30
    warmup: int = 5
    threads: int = 0  # 0: every core of the machine
    max_length: int = 128
    eval_batch_size: int = 32
    attention: str = "eager"
    memory: str = "isolated"  # isolated (fresh process per variant), inprocess, or off

    def __post_init__(self):
        if self.memory is False or self.memory == "False":  # YAML 1.1 reads a bare `off` as false
            self.memory = "off"
        if self.memory not in MODES:
            raise ShrinkbertError(f"memory must be one of {', '.join(MODES)}, got {self.memory!r}")
        self.threads = int(self.threads) or (os.cpu_count() or 1)
        if self.runs < 1 or self.warmup < 0:
            raise ShrinkbertError(f"runs must be >= 1 and warmup >= 0 (got runs={self.runs}, warmup={self.warmup})")
        if self.max_length < 2:
            raise ShrinkbertError(f"max_length must be at least 2, got {self.max_length}")

    @property
    def cases(self) -> list[Case]:
        return plan_cases(self.batch_sizes, self.seq_lens)

    @property
    def headline(self) -> Case:
        return self.cases[0]


@dataclass
class Variant:
    name: str
    path: str
    kind: str = ""
    manifest: dict[str, Any] = field(default_factory=dict)
    content_hash: str = ""
    key: str = ""
    error: str | None = None
    warnings: list[str] = field(default_factory=list)
    static: dict[str, Any] = field(default_factory=dict)
    accuracy: dict[str, Any] = field(default_factory=dict)
    latency: dict[str, dict[str, float]] = field(default_factory=dict)
    lineage: dict[str, Any] = field(default_factory=dict)
    cached: list[str] = field(default_factory=list)
    runner: Any = None

    @property
    def ok(self) -> bool:
        return self.error is None


def variant_names(paths: list[str]) -> list[str]:
    """Short unique names: the directory name, with its parent's name where two collide."""
    names = [Path(p).name or str(p) for p in paths]
    for i, name in enumerate(names):
        if names.count(name) > 1:
            parts = Path(paths[i]).resolve().parts
            names[i] = "/".join(parts[-2:])
    seen: dict[str, int] = {}
    unique = []
    for name in names:
        seen[name] = seen.get(name, 0) + 1
        unique.append(name if seen[name] == 1 else f"{name}#{seen[name]}")
    return unique


def _one_line(err: BaseException) -> str:
    if isinstance(err, ShrinkbertError):
        return str(err)
    text = str(err).strip()
    return f"{type(err).__name__}: {text.splitlines()[0]}" if text else type(err).__name__


def measure(paths: list[str], rows: TestRows, settings: Settings, cache: MeasurementCache | None = None,
            progress: bool = True, log: Callable[[str], None] | None = None) -> list[Variant]:
    cache = cache or MeasurementCache(None, enabled=False)
    log = log or (lambda line: print(line, file=sys.stderr, flush=True))
    variants = [Variant(name, str(path)) for name, path in zip(variant_names([str(p) for p in paths]), paths)]
    machine = describe_machine()
    common = {"v": CACHE_VERSION, "machine": machine, "threads": settings.threads,
              "max_length": settings.max_length, "attention": settings.attention}

    def fail(variant: Variant, message: str) -> None:
        variant.error = message
        log(f"error: {variant.name} ({variant.path}): {message}")
        if variant.runner is not None:
            variant.runner.close()
            variant.runner = None

    def warn(variant: Variant, message: str) -> None:
        variant.warnings.append(message)
        log(f"warning: {variant.name}: {message}")

    # 1. identify: kind, manifest, content hash (the cache key), lineage
    for variant in variants:
        try:
            variant.kind = detect_kind(variant.path)
            try:
                variant.manifest = read_manifest(variant.path)
            except ShrinkbertError as err:
                warn(variant, f"{err}; lineage and parity unknown")
            variant.content_hash = artifact_hash(variant.path)
            code = Path(variant.path) / "predict.py"
            identity = [variant.content_hash, code.read_text() if code.is_file() else "", variant.kind]
            if is_token_artifact(variant.path):
                # A token classifier is loaded with its own head now (it once loaded as a sequence one):
                # its key differs, so nothing measured the old way is reused. Sequence keys are unchanged.
                identity.append("token-classifier")
            variant.key = cache_key(*identity)
            variant.lineage = lineage(variant.path, variant.manifest or None)
        except (ShrinkbertError, OSError) as err:
            fail(variant, _one_line(err))

    def static_key(v):
        return cache_key("static", v.key, common, settings.batch_sizes, settings.seq_lens, settings.memory)

    def accuracy_key(v):
        return cache_key("accuracy", v.key, common, rows.fingerprint)

    def latency_key(v, case: Case):
        return cache_key("latency", v.key, common, case.label, settings.runs, settings.warmup,
                         rows.fingerprint if case.seq_len is None else "")

    cases = settings.cases
    # 2. reuse what an earlier run finished
    for variant in variants:
        if not variant.ok:
            continue
        for kind, key, slot in (("static", static_key(variant), "static"), ("accuracy", accuracy_key(variant), "accuracy")):
            hit = cache.get(kind, key)
            if hit is not None:
                setattr(variant, slot, hit)
                variant.cached.append(kind)
    latency_hits = {(v.name, case.label): cache.get("latency", latency_key(v, case), count=False)
                    for v in variants if v.ok for case in cases}

    def case_complete(case: Case) -> bool:
        return all(latency_hits[(v.name, case.label)] is not None for v in variants if v.ok)

    def needs_runner(v: Variant) -> bool:
        return v.ok and (not v.static or not v.accuracy or any(latency_hits[(v.name, c.label)] is None for c in cases))

    def open_variant(variant: Variant) -> None:
        variant.runner = open_runner(variant.path, settings.threads, variant.manifest, attention=settings.attention)

    # 3. load (memory measured) and accuracy, one variant at a time. The isolated memory probes are
    # fresh processes that mostly import libraries, one core each: two run beside this loop (memory
    # does not depend on CPU contention, and nothing is timed until they are all done).
    todo = [v for v in variants if needs_runner(v)]
    _preload(todo, settings.threads)
    probes = ThreadPoolExecutor(max_workers=MEMORY_PROBES_AT_ONCE)
    memory_of = {v.name: probes.submit(_isolated_memory, v, settings, warn)
                 for v in todo if not v.static and settings.memory == "isolated"}
    for variant in tqdm(todo, desc="load + accuracy", unit="variant", disable=not progress, leave=False):
        try:
            memory: dict[str, Any] = memory_of[variant.name].result() if variant.name in memory_of else {}
            with PeakRSS() as peak:
                open_variant(variant)
                _largest_batch(variant.runner, rows, settings)
            if settings.memory == "inprocess":
                memory = {"memory_bytes": peak.delta_bytes}
            if not variant.static:
                variant.static = {**_static(variant), **memory}
                cache.put("static", static_key(variant), variant.static)
            if not variant.accuracy:
                variant.accuracy = _accuracy(variant.runner, rows, settings)
                cache.put("accuracy", accuracy_key(variant), variant.accuracy)
        except Exception as err:  # one bad variant must not stop the others
            fail(variant, _one_line(err))
    probes.shutdown(wait=True)  # a failed variant's probe may still run; none may overlap the timing

    # A case's timings are reused only when every measurable variant has them: the ratios between
    # variants must come from one interleaved run, so a new or changed variant re-times the case
    # for all (opening the runners that the cache had spared).
    to_time = [case for case in cases if not case_complete(case)]
    for case in cases:
        if case not in to_time:
            for variant in (v for v in variants if v.ok):
                variant.latency[case.label] = latency_hits[(variant.name, case.label)]
                variant.cached.append(case.label)
                cache.hits += 1
    for variant in (v for v in variants if to_time and v.ok and v.runner is None):
        try:
            open_variant(variant)
        except Exception as err:
            fail(variant, _one_line(err))

    # 4. latency: each case not wholly cached, every variant, interleaved
    for case in cases:
        runners = {v.name: v.runner for v in variants if v.ok and v.runner is not None and case.label not in v.latency}
        if not runners:
            continue
        by_name = {v.name: v for v in variants}
        bar = tqdm(total=(settings.warmup + settings.runs) * len(runners), desc=f"latency {case.label}",
                   unit="call", disable=not progress, leave=False, mininterval=0.5)
        results = measure_interleaved(
            runners, case, rows.texts, rows.pairs, max_length=settings.max_length, warmup=settings.warmup,
            runs=settings.runs, on_call=lambda: bar.update(1),
            on_error=lambda name, message: warn(by_name[name], message))
        bar.close()
        for name, stats in results.items():
            by_name[name].latency[case.label] = stats
            cache.put("latency", latency_key(by_name[name], case), stats)

    for variant in variants:
        if variant.runner is not None:
            variant.runner.close()
            variant.runner = None
        if variant.ok and not variant.latency and variant.accuracy:
            warn(variant, "no latency case could be measured")
    return variants


def _preload(variants: list[Variant], threads: int) -> None:
    """Import the runtimes (and each model type's modeling code) before any memory is measured,
    so the first variant's figure is its own and not the libraries' import cost."""
    import importlib
    import json

    kinds = {v.kind for v in variants}
    if "pytorch" in kinds:
        import torch
        import transformers  # noqa: F401

        torch.set_num_threads(threads)
        torch.ones(64, 64) @ torch.ones(64, 64)  # start the thread pool
        for v in variants:
            try:
                model_type = json.loads((Path(v.path) / "config.json").read_text()).get("model_type", "")
                importlib.import_module(f"transformers.models.{model_type.replace('-', '_')}.modeling_{model_type.replace('-', '_')}")
            except Exception:
                pass
    if kinds & {"onnx", "bundle"}:
        import onnxruntime  # noqa: F401
    import tokenizers  # noqa: F401
    from transformers import AutoTokenizer  # noqa: F401


def _largest_batch(runner, rows: TestRows, settings: Settings) -> None:
    """One call at the largest shape, so the memory figure includes activations, not only weights."""
    size, length = _largest_shape(settings)
    if runner.max_positions():
        length = min(length, runner.max_positions())
    index = [i % len(rows) for i in range(size)]
    runner.forward(runner.encode([rows.texts[i] for i in index],
                                 [rows.pairs[i] for i in index] if rows.pairs is not None else None,
                                 max_length=length, pad_to=length))


def _largest_shape(settings: Settings) -> tuple[int, int]:
    fixed = [c.seq_len for c in settings.cases if c.seq_len is not None]
    return max(settings.batch_sizes), max(fixed + [settings.max_length])


def _isolated_memory(variant: Variant, settings: Settings, warn) -> dict[str, Any]:
    """Memory of the variant alone in a fresh process (eval.memprobe); {} with a warning if that fails."""
    from shrinkbert.eval.memprobe import measure_isolated

    batch, length = _largest_shape(settings)
    try:
        probe = measure_isolated(variant.path, settings.threads, batch, length, settings.attention)
    except ShrinkbertError as err:
        warn(variant, f"{err}; memory not measured")
        return {}
    return {"memory_bytes": int(probe["delta_bytes"]), "process_peak_bytes": int(probe["process_peak_bytes"]),
            "runtime_base_bytes": int(probe["base_rss_bytes"])}


def _static(variant: Variant) -> dict[str, Any]:
    runner = variant.runner
    files = runner.model_files()
    counted = runner.num_parameters()
    declared = variant.manifest.get("num_parameters")
    return {
        "kind": runner.kind,
        "runtime": runner.describe(),
        "model_files": [f.name for f in files],
        "size_bytes": int(sum(f.stat().st_size for f in files)),
        "num_parameters": int(declared) if isinstance(declared, int) and declared > 0 else counted,
        "num_parameters_source": "manifest" if isinstance(declared, int) and declared > 0 else
                                 ("counted" if runner.kind == "pytorch" else "ONNX initializer elements"),
        "memory_bytes": None,
        "process_peak_bytes": None,
    }


def label_columns(id2label: dict[int, str] | None, label_names: tuple[str, ...]) -> list[int] | None:
    """The model's output column for each task label, matched by name; None to keep the index order.

    A model that names its labels (config id2label, the bundle's labels.json) is scored by name,
    so a variant trained with another label order is not silently scored wrong. Generic names
    (LABEL_0, ...) or names that do not cover the task's fall back to index order.
    """
    if not id2label:
        return None
    by_name = {name: index for index, name in id2label.items()}
    if not set(label_names) <= set(by_name):
        return None
    columns = [by_name[name] for name in label_names]
    return None if columns == list(range(len(label_names))) else columns


def _accuracy(runner, rows: TestRows, settings: Settings) -> dict[str, Any]:
    if rows.is_token:
        return _tag_accuracy(runner, rows, settings)
    predictions: list[int] = []
    columns = label_columns(runner.id2label(), rows.task.label_names)
    step = settings.eval_batch_size
    for start in range(0, len(rows), step):
        texts = rows.texts[start:start + step]
        pairs = rows.pairs[start:start + step] if rows.pairs is not None else None
        logits = np.asarray(runner.predict(texts, pairs, settings.max_length))
        if logits.ndim == 3:
            raise ShrinkbertError(f"the model tags words (a token classifier) but task '{rows.task.name}' "
                                  "is a sequence task")
        if logits.ndim != 2 or logits.shape[0] != len(texts):
            raise ShrinkbertError(f"the model returned logits of shape {logits.shape} for {len(texts)} rows")
        predictions.extend(_task_predictions(logits, columns, rows.task))
    metrics = compute_metrics(rows.task.metrics, predictions, rows.labels, num_labels=rows.task.num_labels)
    return {"metrics": metrics, "n": len(rows), "predictions": predictions,
            "label_order": "index" if columns is None else f"by name: task label i = model output {columns}"}


def _task_predictions(logits: np.ndarray, columns, task) -> list[int]:
    """Arg-max labels as the task's label indices (model outputs reordered by name where they differ)."""
    if columns is not None:
        logits = logits[:, columns]
    if logits.shape[1] != task.num_labels:
        raise ShrinkbertError(f"the model has {logits.shape[1]} outputs but task '{task.name}' "
                              f"has {task.num_labels} labels")
    return [int(p) for p in logits.argmax(axis=1)]


def _tag_accuracy(runner, rows: TestRows, settings: Settings) -> dict[str, Any]:
    """A token task: each word scored on its first sub-token (core/tagging.py), words past the
    variant's truncation (or that its tokenizer turns into nothing) dropped with their gold tags;
    word accuracy, and for a seqeval task entity precision/recall/F1 (tag_scores)."""
    from shrinkbert.core.tagging import tag_scores

    columns = label_columns(runner.id2label(), rows.task.label_names)
    predictions: list[int] = []
    golds: list[int] = []
    counts: list[int] = []
    step = settings.eval_batch_size
    for start in range(0, len(rows), step):
        words = rows.words[start:start + step]
        tags = rows.labels[start:start + step]
        logits, scored = runner.predict_words(words, settings.max_length)
        logits = np.asarray(logits)
        if len(scored) != len(words) or any(not all(0 <= i < len(w) for i in s) for s, w in zip(scored, words)):
            raise ShrinkbertError(f"the model scored words {scored} of rows of {[len(w) for w in words]} words")
        total = sum(len(s) for s in scored)
        if logits.ndim != 2 or logits.shape[0] != total:
            raise ShrinkbertError(f"the model returned word logits of shape {logits.shape} for {total} words")
        predictions.extend(_task_predictions(logits, columns, rows.task))
        for row_tags, indices in zip(tags, scored):
            golds.extend(int(row_tags[i]) for i in indices)  # the gold tags of the words scored
            counts.append(len(indices))
    if not golds:
        raise ShrinkbertError(f"no word of the {len(rows)} test rows could be scored")
    metrics = tag_scores(rows.task, predictions, golds, counts)
    return {"metrics": metrics, "n": len(rows), "words": len(golds), "words_dropped": rows.num_words - len(golds),
            "predictions": predictions, "word_counts": counts,
            "label_order": "index" if columns is None else f"by name: task label i = model output {columns}"}
