"""Peak memory of loading a variant: resident-set growth, sampled by psutil in a background thread.

tracemalloc sees only Python allocations, not the tensors torch and ONNX Runtime allocate in C++,
so RSS is the honest measure here. Variants load one after another into one process: the
figure is how much the process grew while this one loaded and ran its largest batch.
"""
from __future__ import annotations

import importlib
import json
import threading
from pathlib import Path

import psutil

MODES = ("isolated", "inprocess", "off")
METHODS = {
    "isolated": ("each variant alone in a process of its own that imports only its runtime (its timing worker, "
                 "eval.worker; a fresh eval.memprobe process where no case is timed): 'RAM MB' = peak RSS growth "
                 "(psutil, sampled every 1 ms) from loading it and running one batch of the largest shape; "
                 "'process MB' = that process's peak RSS (VmHWM), runtime libraries included (a timing worker's ONNX graph "
                 "gets its inputs tokenized by the report, so its process holds onnxruntime alone; a bundle and a "
                 "PyTorch folder load their own tokenizer)"),
    "inprocess": ("peak RSS growth (psutil, sampled every 1 ms) while the variant loaded into the shared harness "
                  "process and ran one batch of the largest shape; approximate: memory freed by earlier variants "
                  "is reused, so later variants can read low"),
    "off": "not measured (--memory off)",
}
METHOD = METHODS["inprocess"]


class PeakRSS:
    """with PeakRSS() as peak: ...; peak.delta_bytes is the peak RSS above the starting RSS."""

    def __init__(self, interval_s: float = 0.001):
        self.interval_s = interval_s
        self.process = psutil.Process()
        self.start = self.peak = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _sample(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self.process.memory_info().rss)
            self._stop.wait(self.interval_s)

    def __enter__(self) -> "PeakRSS":
        self.start = self.peak = self.process.memory_info().rss
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self.process.memory_info().rss)

    @property
    def delta_bytes(self) -> int:
        return max(0, self.peak - self.start)


def import_runtime(kind: str, path: str | Path, tokenizer: bool = True) -> None:
    """Import what a variant of `kind` runs on before its memory is read, so the figure is the model's and
    not the libraries' import: a PyTorch dir torch, transformers and its model type's modeling code; an ONNX
    graph onnxruntime (and transformers' tokenizer where the process tokenizes itself); an edge bundle what
    its predict.py imports (onnxruntime, tokenizers, numpy)."""
    if kind == "pytorch":
        import torch  # noqa: F401
        from transformers import AutoModelForSequenceClassification, AutoTokenizer  # noqa: F401

        model_type = json.loads((Path(path) / "config.json").read_text()).get("model_type", "").replace("-", "_")
        try:
            importlib.import_module(f"transformers.models.{model_type}.modeling_{model_type}")
        except ImportError:
            pass
    elif kind == "onnx":
        import onnxruntime  # noqa: F401
        if tokenizer:
            from transformers import AutoTokenizer  # noqa: F401
    else:
        import numpy  # noqa: F401
        import onnxruntime  # noqa: F401
        import tokenizers  # noqa: F401


def high_water_mark() -> int:
    """Peak RSS of this process (VmHWM). Not getrusage's ru_maxrss: that survives fork + exec, so a
    child of a large parent would report the parent's size."""
    try:
        with open("/proc/self/status") as handle:
            for line in handle:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0
