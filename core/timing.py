"""Latency measurement shared by eval/ (the report) and students/ (the latency-target picker)."""
from __future__ import annotations

import statistics
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


def median_ms(fn: Callable[[], object], calls: int) -> float:
    """The median of `calls` timed calls of fn, in ms."""
    samples = []
    for _ in range(calls):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000.0)
    return statistics.median(samples)


def interleaved_ms(runs: dict[str, Callable[[], object]], rounds: int, calls: int, warmup: int = 2,
                   best: bool = False) -> dict[str, float]:
    """{name: ms} of several callables timed against each other: each warmed `warmup` times, then
    `rounds` rounds in which each makes `calls` timed calls in turn (drift on a shared machine hits
    every one alike); the median of the rounds' medians, or with `best` the fastest round's median
    (what the cores reach when nothing disturbs them). numpy and the standard library only: it runs in
    the torch-free timing processes too."""
    for fn in runs.values():
        for _ in range(warmup):
            fn()
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(rounds):
        for name, fn in runs.items():
            times[name].append(median_ms(fn, calls))
    return {name: (min(values) if best else statistics.median(values)) for name, values in times.items()}
