"""Peak memory of loading a variant: resident-set growth, sampled by psutil in a background thread.

tracemalloc sees only Python allocations, not the tensors torch and ONNX Runtime allocate in C++,
so RSS is the honest measure here. Variants load one after another into one process: the
figure is how much the process grew while this one loaded and ran its largest batch.
"""
from __future__ import annotations

import threading

import psutil

MODES = ("isolated", "inprocess", "off")
METHODS = {
    "isolated": ("each variant alone in a fresh process (eval.memprobe) that imports only its runtime: "
                 "'RAM MB' = peak RSS growth (psutil, sampled every 1 ms) from loading it and running one batch of "
                 "the largest shape; 'process MB' = that process's peak RSS (VmHWM), runtime libraries included"),
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
