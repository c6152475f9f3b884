"""Measure variants side by side: load (with memory), accuracy, interleaved latency; cached.

`measure(paths, rows, settings, cache)` returns one Variant per path, in order. A variant
that cannot be found, loaded or run carries an `error` line and the others are still measured.
The phases, one function each: _identify, _reuse (the cache), _load_and_score, _time (each
variant in a worker process of its own, eval.workers).
"""
from __future__ import annotations

import os
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from shrinkbert.core.artifacts import artifact_hash, read_manifest
from shrinkbert.core.device import describe_machine
from shrinkbert.core.errors import ShrinkbertError, environment_error
from shrinkbert.core.progress import progress_bar
from shrinkbert.eval.cache import MeasurementCache, cache_key
from shrinkbert.eval.latency import Case, measure_interleaved, plan_cases
from shrinkbert.eval.lineage import lineage
from shrinkbert.eval.memory import MODES, PeakRSS
from shrinkbert.eval.memprobe import measure_isolated
from shrinkbert.eval.rows import TestRows
from shrinkbert.eval.runners import artifact_kind, detect_kind, open_runner
from shrinkbert.eval.workers import WorkerProcess, launch_workers, ready_workers

CACHE_VERSION = 3  # 3: latency timed in a worker process per variant, with the settings it ran with
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
    device: str = "cpu"  # where PyTorch variants run: cpu or cuda (ONNX variants and bundles: the CPU)
    memory: str = "isolated"  # isolated (a process per variant: its timing worker, else a probe), inprocess, or off
    isolate: bool = True  # time each variant in a worker process of its own (eval.workers); False: all in this one
    burst: int = 5  # timed calls a variant makes in a row before the next variant's turn
    lead_in: int = 1  # untimed calls before each burst (threads awake, as in a process calling its model)
    settle_ms: float = 50.0  # idle time before each burst, for the previous worker's spinning threads to stop

    def __post_init__(self):
        if self.memory is False or self.memory == "False":  # YAML 1.1 reads a bare `off` as false
            self.memory = "off"
        if self.memory not in MODES:
            raise ShrinkbertError(f"memory must be one of {', '.join(MODES)}, got {self.memory!r}")
        self.threads = int(self.threads) or (os.cpu_count() or 1)
        if self.burst < 1:
            raise ShrinkbertError(f"burst must be at least 1, got {self.burst}")
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


class _Notes:
    """One error line per failed variant, warnings beside it; both logged as they happen."""

    def __init__(self, log: Callable[[str], None] | None):
        self.log = log or (lambda line: print(line, file=sys.stderr, flush=True))

    def fail(self, variant: Variant, message: str) -> None:
        variant.error = message
        self.log(f"error: {variant.name} ({variant.path}): {message}")
        if variant.runner is not None:
            variant.runner.close()
            variant.runner = None

    def warn(self, variant: Variant, message: str) -> None:
        variant.warnings.append(message)
        self.log(f"warning: {variant.name}: {message}")


class _Keys:
    """The cache key of each measurement: the variant's identity and every setting that changes it."""

    def __init__(self, settings: Settings, rows: TestRows):
        self.settings, self.rows = settings, rows
        self.common = {"v": CACHE_VERSION, "machine": describe_machine(), "threads": settings.threads,
                       "max_length": settings.max_length, "attention": settings.attention,
                       # only a GPU run adds the key, so the CPU measurements cached before it stay valid
                       **({"device": settings.device} if settings.device != "cpu" else {})}

    def static(self, v: Variant) -> str:
        s = self.settings
        return cache_key("static", v.key, self.common, s.batch_sizes, s.seq_lens, s.memory)

    def accuracy(self, v: Variant) -> str:
        return cache_key("accuracy", v.key, self.common, self.rows.fingerprint)

    def latency(self, v: Variant, case: Case) -> str:
        s = self.settings
        return cache_key("latency", v.key, self.common, case.label, s.runs, s.warmup, s.isolate, s.burst, s.lead_in,
                         s.settle_ms,
                         self.rows.fingerprint if case.seq_len is None else "")


def measure(paths: list[str], rows: TestRows, settings: Settings, cache: MeasurementCache | None = None,
            progress: bool = True, log: Callable[[str], None] | None = None) -> list[Variant]:
    """Identify every variant, reuse what the cache holds, load and score the rest (memory measured
    as they load), then time each case not wholly cached; runners are closed on the way out."""
    cache = cache or MeasurementCache(None, enabled=False)
    notes, keys = _Notes(log), _Keys(settings, rows)
    variants = [Variant(name, str(path)) for name, path in zip(variant_names([str(p) for p in paths]), paths)]
    for variant in variants:
        _identify(variant, notes)
    latency_hits = _reuse(variants, cache, keys)
    launched = _launch_timers(variants, latency_hits, settings)
    try:
        _load_and_score(variants, latency_hits, rows, settings, cache, keys, notes, progress, launched)
        _time(variants, latency_hits, rows, settings, cache, keys, notes, progress, launched)
    finally:
        for worker in launched.values():  # closing a closed worker does nothing
            worker.close()
        for variant in variants:
            if variant.runner is not None:
                variant.runner.close()
                variant.runner = None
    for variant in variants:
        if variant.ok and not variant.latency and variant.accuracy:
            notes.warn(variant, "no latency case could be measured")
    return variants


def _identify(variant: Variant, notes: _Notes) -> None:
    """Kind, manifest, content hash (the cache key) and lineage; an error line when it is no artifact."""
    try:
        variant.kind = detect_kind(variant.path)
        try:
            variant.manifest = read_manifest(variant.path)
        except ShrinkbertError as err:
            notes.warn(variant, f"{err}; lineage and parity unknown")
        variant.content_hash = artifact_hash(variant.path)
        code = Path(variant.path) / "predict.py"
        identity = [variant.content_hash, code.read_text() if code.is_file() else "", variant.kind]
        # A kind that is measured its own way (a token classifier) adds to its key, so nothing measured
        # as another kind is reused; sequence keys are the plain identity.
        identity.extend(artifact_kind(variant.path).cache_identity)
        variant.key = cache_key(*identity)
        variant.lineage = lineage(variant.path, variant.manifest or None)
    except (ShrinkbertError, OSError) as err:
        notes.fail(variant, _one_line(err))


def _reuse(variants: list[Variant], cache: MeasurementCache, keys: _Keys) -> dict[tuple[str, str], dict | None]:
    """Fill static and accuracy from the cache; return the cached latency per (variant, case), not yet
    used (a case is reused only when every variant has it: see _time)."""
    for variant in (v for v in variants if v.ok):
        for kind, key in (("static", keys.static(variant)), ("accuracy", keys.accuracy(variant))):
            hit = cache.get(kind, key)
            if hit is not None:
                setattr(variant, kind, hit)
                variant.cached.append(kind)
    return {(v.name, case.label): cache.get("latency", keys.latency(v, case), count=False)
            for v in variants if v.ok for case in keys.settings.cases}


def _open(variant: Variant, settings: Settings) -> None:
    variant.runner = open_runner(variant.path, settings.threads, variant.manifest, attention=settings.attention,
                                 device=settings.device)


def _on_gpu(variant: Variant, settings: Settings) -> bool:
    return variant.kind == "pytorch" and settings.device != "cpu"


def _wants_isolated_memory(variant: Variant, settings: Settings) -> bool:
    return settings.memory == "isolated" and not variant.static and not _on_gpu(variant, settings)


def _load_and_score(variants, latency_hits, rows, settings, cache, keys, notes, progress,
                    launched: dict[str, WorkerProcess]) -> None:
    """Load (memory measured) and score, one variant at a time, each one that the cache does not
    wholly answer. Isolated memory is read in the variant's timing worker (`launched`, already
    importing its runtime beside this loop) after its accuracy, by then loaded; where no case is to be
    timed in workers, in a fresh eval.memprobe process instead, two at a time beside this loop
    (memory does not depend on CPU contention, and nothing is timed until they are all done)."""
    todo = [v for v in variants if v.ok and (not v.static or not v.accuracy or
                                             any(latency_hits[(v.name, c.label)] is None for c in settings.cases))]
    _preload(todo, settings.threads)
    probes = ThreadPoolExecutor(max_workers=MEMORY_PROBES_AT_ONCE)
    for variant in (v for v in todo if _on_gpu(v, settings) and settings.memory != "off" and not v.static):
        notes.warn(variant, "memory not measured: it runs on the GPU, and the report's memory is the "
                            "process's resident memory on the host")
    memory_of = {v.name: probes.submit(_isolated_memory, v, settings, notes.warn)
                 for v in todo if _wants_isolated_memory(v, settings) and v.name not in launched}
    for variant in progress_bar(todo, desc="load + accuracy", unit="variant", disable=not progress, leave=False):
        try:
            memory: dict[str, Any] = memory_of[variant.name].result() if variant.name in memory_of else {}
            with PeakRSS() as peak:
                _open(variant, settings)
                _largest_batch(variant.runner, rows, settings)
            if settings.memory == "inprocess" and not _on_gpu(variant, settings):
                memory = {"memory_bytes": peak.delta_bytes}
            if not variant.accuracy:
                variant.accuracy = _accuracy(variant.runner, rows, settings)
                cache.put("accuracy", keys.accuracy(variant), variant.accuracy)
            if _wants_isolated_memory(variant, settings) and variant.name in launched:
                memory = _worker_memory(launched[variant.name], variant, rows, settings, notes.warn)
            if not variant.static:
                variant.static = {**_static(variant), **memory}
                cache.put("static", keys.static(variant), variant.static)
        except Exception as err:  # one bad variant must not stop the others; a full disk stops all of them
            if environment_error(err):
                probes.shutdown(wait=True)
                raise
            notes.fail(variant, _one_line(err))
    probes.shutdown(wait=True)  # a failed variant's probe may still run; none may overlap the timing


def _cases_to_time(variants: list[Variant], latency_hits, settings: Settings) -> list[Case]:
    return [case for case in settings.cases if any(latency_hits[(v.name, case.label)] is None
                                                   for v in variants if v.ok)]


def _spec(variant: Variant, settings: Settings) -> dict[str, Any]:
    """What a timing worker needs to open the variant (eval.workers)."""
    return {"path": variant.path, "kind": variant.kind, "manifest": variant.manifest,
            "options": {"device": settings.device}}


def _launch_timers(variants: list[Variant], latency_hits, settings: Settings) -> dict[str, WorkerProcess]:
    """The timing workers, started before the accuracy pass wherever a case is to be timed in them, so
    that their imports overlap it; each told whether to read its variant's isolated memory."""
    if not settings.isolate or not _cases_to_time(variants, latency_hits, settings):
        return {}
    specs = {v.name: {**_spec(v, settings), "memory": _wants_isolated_memory(v, settings)} for v in variants if v.ok}
    return launch_workers(specs, settings.threads, settings.attention)


def _time(variants, latency_hits, rows, settings, cache, keys, notes, progress,
          launched: dict[str, WorkerProcess]) -> None:
    """Time every case not wholly cached, all variants interleaved; each in a worker process of its
    own (settings.isolate: the workers `launched` before the accuracy pass), the parent's runner only
    encoding its inputs.

    A case's timings are reused only when every measurable variant has them: the ratios between
    variants must come from one interleaved run, so a new or changed variant re-times the case
    for all (opening the runners that the cache had spared)."""
    cases = settings.cases
    to_time = _cases_to_time(variants, latency_hits, settings)
    for case in (c for c in cases if c not in to_time):
        for variant in (v for v in variants if v.ok):
            variant.latency[case.label] = latency_hits[(variant.name, case.label)]
            variant.cached.append(case.label)
            cache.hits += 1
    if not to_time:
        return
    for variant in (v for v in variants if v.ok and v.runner is None):
        try:
            _open(variant, settings)
        except Exception as err:
            notes.fail(variant, _one_line(err))
    by_name = {v.name: v for v in variants if v.ok}
    timers = _start_timers(by_name, settings, notes, launched) if settings.isolate else None
    try:
        for case in to_time:
            runners = {name: v.runner for name, v in by_name.items() if case.label not in v.latency
                       and (timers is None or name in timers)}
            if not runners:
                continue
            bar = progress_bar(total=(settings.warmup + settings.runs) * len(runners), desc=f"latency {case.label}",
                               unit="call", disable=not progress, leave=False, mininterval=0.5)
            results = measure_interleaved(
                runners, case, rows.texts, rows.pairs, max_length=settings.max_length, warmup=settings.warmup,
                runs=settings.runs, burst=settings.burst, lead_in=settings.lead_in if timers is not None else 0,
                settle_s=settings.settle_ms / 1000.0 if timers is not None else 0.0,
                timers={name: timers[name] for name in runners} if timers is not None else None,
                on_call=lambda: bar.update(1), on_error=lambda name, message: notes.warn(by_name[name], message))
            bar.close()
            for name, stats in results.items():
                stats["timed_with"] = timers[name].timed_with if timers is not None else _in_process(by_name[name])
                by_name[name].latency[case.label] = stats
                cache.put("latency", keys.latency(by_name[name], case), stats)
    finally:
        for timer in (timers or {}).values():
            timer.close()


def _start_timers(by_name: dict[str, Variant], settings: Settings, notes: _Notes,
                  launched: dict[str, WorkerProcess]) -> dict[str, Any]:
    """A worker process per variant (eval.workers): those `launched` already, the others started now;
    a variant whose worker cannot open it is warned about and left untimed."""
    workers = {name: worker for name, worker in launched.items() if name in by_name}
    missing = {v.name: _spec(v, settings) for v in by_name.values() if v.name not in workers}
    workers.update(launch_workers(missing, settings.threads, settings.attention) if missing else {})
    timers, errors = ready_workers(workers)
    for name, message in errors.items():
        notes.warn(by_name[name], f"cannot be timed in a process of its own: {message}")
    return timers


def _in_process(variant: Variant) -> dict[str, Any]:
    """The settings a variant timed in the harness's own process ran with (isolate=False)."""
    return {"process": "shared", "threads": variant.runner.threads, "describe": variant.runner.describe(),
            **({"spin": False} if variant.kind != "pytorch" else {})}


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


def _largest_inputs(runner, rows: TestRows, settings: Settings):
    """The variant's inputs at the largest shape: test rows, padded to its length."""
    size, length = _largest_shape(settings)
    if runner.max_positions():
        length = min(length, runner.max_positions())
    index = [i % len(rows) for i in range(size)]
    return runner.encode([rows.texts[i] for i in index], [rows.pairs[i] for i in index] if rows.pairs is not None
                         else None, max_length=length, pad_to=length)


def _largest_batch(runner, rows: TestRows, settings: Settings) -> None:
    """One call at the largest shape, so the memory figure includes activations, not only weights."""
    runner.forward(_largest_inputs(runner, rows, settings))


def _largest_shape(settings: Settings) -> tuple[int, int]:
    fixed = [c.seq_len for c in settings.cases if c.seq_len is not None]
    return max(settings.batch_sizes), max(fixed + [settings.max_length])


def _isolated_memory(variant: Variant, settings: Settings, warn) -> dict[str, Any]:
    """Memory of the variant alone in a fresh process (eval.memprobe); {} with a warning if that fails."""
    batch, length = _largest_shape(settings)
    try:
        probe = measure_isolated(variant.path, settings.threads, batch, length, settings.attention)
    except ShrinkbertError as err:
        warn(variant, f"{err}; memory not measured")
        return {}
    return _memory_fields(probe, "memory probe")


def _worker_memory(worker: WorkerProcess, variant: Variant, rows: TestRows, settings: Settings, warn) -> dict[str, Any]:
    """Memory of the variant in its own timing worker (loaded there beside the accuracy pass): one
    call at the largest shape, on the test rows the parent tokenizes; {} with a warning if that fails."""
    try:
        probe = worker.memory_of(_largest_inputs(variant.runner, rows, settings))
    except ShrinkbertError as err:
        warn(variant, f"{err}; memory not measured")
        return {}
    return _memory_fields(probe, "timing worker")


def _memory_fields(probe: dict[str, Any], where: str) -> dict[str, Any]:
    return {"memory_bytes": int(probe["delta_bytes"]), "process_peak_bytes": int(probe["process_peak_bytes"]),
            "runtime_base_bytes": int(probe["base_rss_bytes"]), "memory_process": where}


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
    """The variant's scores on the test rows, as the task's kind computes them (core/kinds)."""
    columns = label_columns(runner.id2label(), rows.task.label_names)
    scores = rows.kind.score_runner(runner, rows, columns, settings.eval_batch_size, settings.max_length)
    return {**scores, "label_order": "index" if columns is None else f"by name: task label i = model output {columns}"}
