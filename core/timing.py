"""Latency measurement shared by eval/ (the report) and students/ (the latency-target picker)."""
from __future__ import annotations

import time
from typing import Callable

import numpy as np


def percentiles(samples_ms: list[float]) -> dict[str, float]:
    values = np.asarray(samples_ms, dtype=float)
    return {"p50": float(np.percentile(values, 50)), "p90": float(np.percentile(values, 90)),
            "p99": float(np.percentile(values, 99)), "mean": float(values.mean()), "n": int(values.size)}


def time_callable(fn: Callable[[], object], warmup: int = 3, runs: int = 20) -> dict[str, float]:
    """Call fn `warmup` times untimed, then `runs` times timed; latency percentiles in ms."""
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000.0)
    return percentiles(samples)
