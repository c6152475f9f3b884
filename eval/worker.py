"""One variant in a process of its own, timed on request: the latency a user's process would see.

    python -m shrinkbert.eval.worker     (started by eval.workers; JSON-line requests on stdin, replies on stdout)

The process holds only the runtime its variant ships in: a PyTorch dir imports torch and
transformers here; an ONNX dir onnxruntime and numpy, never torch; an edge bundle its own
predict.py's Predictor (onnxruntime, tokenizers, numpy). Inputs arrive tokenized by the parent
(the report times the model call only), so an ONNX worker needs no tokenizer library either.
The one exception is kind "embedding" (eval/vector_report.py): a sentence embedder is timed
text -> normalised vector, tokenizing included, since for a static student tokenizing is most of
the work; its inputs arrive as {"texts": [...]}, and a bundle runs its own predict.py's `embed`.

Requests, one dict each, answered by one dict ({"error": "one line"} when something fails):
    {"op": "open", "path", "kind", "threads", "attention", "manifest", "options", "memory"} -> {"timed_with": {...}}
    (options: the loader's own; a PyTorch dir's "device", cpu or cuda. memory: true reads the RSS after
    the runtime's imports and its peak while the variant loads, for the "memory" request)
    {"op": "memory", "batch": {name: int64 array}}                       -> {"delta_bytes", "base_rss_bytes",
                                                                             "process_peak_bytes"}
    (one call at the report's largest shape: the peak RSS growth over loading and that call, as
    eval.memprobe measures it; the report's isolated memory, measured here so that no second process
    pays the imports again)
    {"op": "inputs", "key", "batches": [{name: int64 array}, ...]}      -> {}
    {"op": "time", "key", "indices": [batch index per call]}            -> {"ms": [one per call]}
    {"op": "close"}                                                      -> (the process exits)
"timed_with" is read back from the loaded runtime (threads, spinning, the libraries imported), so
the report states what the model really ran with, not what was asked for.
"""
from __future__ import annotations

import gc
import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

from shrinkbert.eval.encoders import open_encoder
from shrinkbert.eval.runners import call_with_supported, load_bundle_module, pick_onnx_file

# Each loader returns (run: inputs -> None, convert: int64 arrays -> the runtime's inputs, timed_with).
Loaded = tuple[Callable[[Any], Any], Callable[[dict], Any], dict]


def _open_pytorch(path: Path, threads: int, attention: str, manifest: dict, options: dict) -> Loaded:
    import torch  # this worker's own runtime, imported only here so the ONNX workers never load it

    from shrinkbert.eval.runners import open_runner

    # options["device"]: "cuda" puts the model and its inputs on the GPU (eval --torch-device)
    runner = open_runner(path, threads, manifest, attention=attention, device=options.get("device", "cpu"))

    def convert(batch: dict) -> dict:
        return {name: torch.from_numpy(array).to(runner.device) for name, array in batch.items()}

    return runner.forward, convert, {"runtime": f"torch {torch.__version__}", "threads": torch.get_num_threads(),
                          "interop_threads": torch.get_num_interop_threads(), "describe": runner.describe()}


def _open_onnx(path: Path, threads: int, attention: str, manifest: dict, options: dict) -> Loaded:
    from shrinkbert.core.ortsession import ort_session

    model_file = pick_onnx_file(path, manifest)
    # ORT's own default (spinning on): nothing else runs in this process for the spinning to slow;
    # denormals flushed to zero, as a bundle runs its graph (compress/bundle_files.open_session)
    session = ort_session(model_file, threads, spin=True, flush_denormals=True)
    return _session_run(session), dict, {**session_settings(session), "describe": f"onnxruntime {model_file.name}"}


def _bundle_threads(path: Path, threads: int) -> int:
    """The threads a bundle is timed on: its own defaults (its meta file's "runtime"), as it ships, except
    that it gets no more than the report gives every variant. A bundle that chose one thread (timed faster
    at its task's text length, compress/bundle_runtime.py) runs on one; 0 is ONNX Runtime's default."""
    for name in ("labels.json", "embedding.json"):
        meta = json.loads((path / name).read_text(encoding="utf-8")) if (path / name).is_file() else None
        chosen = (meta.get("runtime") or {}).get("threads") if isinstance(meta, dict) else None
        if chosen:
            return min(threads, chosen) if threads else chosen
    return threads


def _open_bundle(path: Path, threads: int, attention: str, manifest: dict, options: dict) -> Loaded:
    module = load_bundle_module(path)
    # a Predictor older than the threads option keeps its own
    predictor = call_with_supported(module.Predictor, str(path), threads=_bundle_threads(path, threads))
    session = predictor.session
    return _session_run(session), dict, {**session_settings(session), "describe": "edge bundle Predictor"}


def _open_embedding(path: Path, threads: int, attention: str, manifest: dict, options: dict) -> Loaded:
    """A sentence embedder timed text -> vector: a bundle through its own predict.py's Predictor
    (as it ships), anything else through the report's encoder (eval.encoders.open_encoder)
    with ONNX Runtime's spinning on, as alone in a process of its own."""
    def texts_of(batch: dict) -> list[str]:
        return [str(text) for text in batch["texts"]]

    if str(manifest.get("stage", "")).startswith("bundle"):
        threads = _bundle_threads(path, threads)
        predictor = call_with_supported(load_bundle_module(path).Predictor, str(path), threads=threads)
        graph_runtime = getattr(getattr(predictor, "graph", None), "runtime", None) or {}  # a graph's spinning
        return predictor.embed, texts_of, {"runtime": f"bundle ({manifest.get('runtime', 'onnxruntime')})",
                                           "threads": threads, "describe": "edge bundle Predictor.embed",
                                           **{key: graph_runtime[key] for key in ("spin", "flush_denormals")
                                              if key in graph_runtime}}
    encode, runtime = open_encoder(str(path), threads, int(options.get("max_length", 128)), spin=True,
                                   flush_denormals=True)
    return encode, texts_of, {"runtime": runtime, "threads": threads, "describe": "text -> vector"}


LOADERS = {"pytorch": _open_pytorch, "onnx": _open_onnx, "bundle": _open_bundle, "embedding": _open_embedding}


def _session_run(session) -> Callable[[dict], Any]:
    return lambda feed: session.run(None, feed)


def session_settings(session) -> dict:
    """The threads and spinning an ORT session really has (0 threads: ORT's default, one per core)."""
    import onnxruntime as ort  # already imported by the session's owner

    options = session.get_session_options()
    def entry(name: str, default: str) -> str:
        try:
            return options.get_session_config_entry(name)
        except Exception:  # the entry was never set: ORT's default
            return default

    return {"runtime": f"onnxruntime {ort.__version__}", "threads": options.intra_op_num_threads,
            "spin": entry("session.intra_op.allow_spinning", "1") != "0",
            "flush_denormals": entry("session.set_denormal_as_zero", "0") == "1"}


class Worker:
    def __init__(self):
        self.run: Callable[[Any], Any] | None = None
        self.convert: Callable[[dict], Any] = dict
        self.inputs: dict[str, list] = {}
        self.load_rss: tuple[int, int] | None = None  # (RSS after the runtime's imports, peak while loading)

    def open(self, path, kind, threads, attention="eager", manifest=None, options=None, memory=False) -> dict:
        def load() -> Loaded:
            return LOADERS[kind](Path(path), int(threads), attention, manifest or {}, options or {})

        if memory:
            from shrinkbert.eval.memory import PeakRSS, import_runtime

            import_runtime(kind, path, tokenizer=False)  # the report tokenizes for it: see the module doc
            with PeakRSS() as peak:
                self.run, self.convert, timed_with = load()
            self.load_rss = (peak.start, peak.peak)
        else:
            self.run, self.convert, timed_with = load()
        libraries = [name for name in ("torch", "transformers", "onnxruntime", "tokenizers") if name in sys.modules]
        return {"timed_with": {**timed_with, "process": "own", "libraries": libraries}}

    def memory(self, batch) -> dict:
        from shrinkbert.eval.memory import PeakRSS, high_water_mark

        if self.load_rss is None:
            raise RuntimeError("memory was not asked for when the variant was opened")
        base, load_peak = self.load_rss
        with PeakRSS() as peak:
            self.run(self.convert(batch))
        top = max(load_peak, peak.peak)
        return {"delta_bytes": max(0, top - base), "base_rss_bytes": base,
                "process_peak_bytes": max(high_water_mark(), top)}

    def load_inputs(self, key, batches) -> dict:
        self.inputs[key] = [self.convert(batch) for batch in batches]
        return {}

    def time(self, key, indices) -> dict:
        batches = self.inputs[key]
        samples = []
        gc.collect()
        gc.disable()  # a collection inside a timed call is the harness's noise, not the model's
        try:
            for index in indices:
                start = time.perf_counter()
                self.run(batches[index])
                samples.append((time.perf_counter() - start) * 1000.0)
        finally:
            gc.enable()
        return {"ms": samples}


def _one_line(err: BaseException) -> str:
    text = str(err).strip()
    return f"{type(err).__name__}: {text.splitlines()[0]}" if text else type(err).__name__


def to_json(value):
    """json.dumps' fallback for what crosses the pipe: arrays as {"__ndarray__", "dtype"}, numpy scalars as
    Python numbers. JSON rather than pickle, so that neither side ever unpickles what the other wrote."""
    if isinstance(value, np.ndarray):
        return {"__ndarray__": value.tolist(), "dtype": str(value.dtype)}
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"cannot send {type(value).__name__} to or from a timing worker")


def from_json(obj: dict):
    """json.loads' object hook: the inverse of `to_json` for arrays."""
    if "__ndarray__" in obj:
        return np.asarray(obj["__ndarray__"], dtype=obj["dtype"])
    return obj


def serve(requests, replies) -> None:
    worker = Worker()
    handlers = {"open": worker.open, "memory": worker.memory, "inputs": worker.load_inputs, "time": worker.time}
    for line in requests:  # ends when the parent goes away
        request = json.loads(line, object_hook=from_json)
        op = request.pop("op")
        if op == "close":
            return
        try:
            reply = handlers[op](**request)
        except Exception as err:  # one bad variant: the parent drops it and goes on with the others
            reply = {"error": _one_line(err)}
        replies.write(json.dumps(reply, default=to_json).encode() + b"\n")
        replies.flush()


def main() -> int:
    replies = sys.stdout.buffer
    sys.stdout = sys.stderr  # a library's print must not corrupt the reply stream
    serve(sys.stdin.buffer, replies)
    return 0


if __name__ == "__main__":
    code = main()
    # Skip the interpreter's teardown (slow with torch loaded): the report closes its workers one by
    # one, and nothing here holds a file that needs flushing beyond the reply stream, flushed per reply.
    sys.stderr.flush()
    os._exit(code)
