"""Latency done honestly on a shared CPU: warm-up, stated threads, variants interleaved.

For each case (batch size x sequence length) every variant gets its warm-up calls, then the
timed calls go round-robin across variants in short bursts (A,B,C, B,C,A, C,A,B, ...: the
starting variant rotates too), so drift on the machine (another process, thermal, frequency)
hits all alike. The calls run where a timer says: in this process (LocalTimer), or in a process
of the variant's own (eval.workers, what the report does). Only the model call is timed; inputs
are tokenized beforehand. Garbage collection is paused during each timed burst. The CPU that
other processes used meanwhile is recorded per case (OtherLoad).

A sequence length is an integer (every batch padded to exactly that many tokens) or "real":
batches of consecutive test rows, their starts spread evenly over the test set, each padded to
its longest row (truncated at max_length), so the timing follows the real length distribution.
"""
from __future__ import annotations

import gc
import os
import time
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
import psutil

from shrinkbert.core.errors import ShrinkbertError
from shrinkbert.core.timing import percentiles

REAL = "real"


@dataclass(frozen=True)
class Case:
    batch_size: int
    seq_len: int | None  # None: the real lengths of the test rows

    @property
    def label(self) -> str:
        return f"b{self.batch_size}/{'real' if self.seq_len is None else f's{self.seq_len}'}"


def parse_seq_len(value: str | int) -> int | None:
    if str(value).strip().lower() == REAL:
        return None
    try:
        length = int(value)
    except ValueError:
        raise ShrinkbertError(f"sequence length must be an integer or '{REAL}', got {value!r}") from None
    if length < 2:
        raise ShrinkbertError(f"sequence length must be at least 2 (for [CLS] and [SEP]), got {length}")
    return length


def plan_cases(batch_sizes: Sequence[int], seq_lens: Sequence[str | int]) -> list[Case]:
    if not batch_sizes or not seq_lens:
        raise ShrinkbertError("give at least one batch size and one sequence length")
    for size in batch_sizes:
        if int(size) < 1:
            raise ShrinkbertError(f"batch size must be at least 1, got {size}")
    return [Case(int(b), parse_seq_len(s)) for s in seq_lens for b in batch_sizes]


def batches_for(case: Case, n_rows: int, count: int) -> list[list[int]]:
    """Row indices of `count` batches of consecutive rows, their starts spread evenly over the
    test set (so a few runs still sample its whole length distribution), wrapping around."""
    if case.seq_len is not None:
        count = 1  # a fixed shape: one batch, run again and again
    step = max(case.batch_size, n_rows / count)
    return [[(int(i * step) + j) % n_rows for j in range(case.batch_size)] for i in range(count)]


def summarize(samples_ms: list[float], batch_sizes: list[int], tokens: list[int]) -> dict[str, float]:
    stats = percentiles(samples_ms)
    total_s = sum(samples_ms) / 1000.0
    stats["min"] = float(min(samples_ms))
    stats["throughput_per_s"] = float(sum(batch_sizes) / total_s) if total_s > 0 else 0.0
    stats["tokens_per_s"] = float(sum(tokens) / total_s) if total_s > 0 else 0.0
    stats["mean_tokens_per_row"] = float(np.mean(tokens) / np.mean(batch_sizes))
    return stats


class LocalTimer:
    """Times a runner in this process (the benches' way, and the report's with isolate=False)."""

    def __init__(self, runner):
        self.runner = runner
        self.pid = os.getpid()
        self.inputs: dict[str, list] = {}

    def load(self, key: str, batches: list) -> None:
        self.inputs[key] = batches

    def time(self, key: str, indices: list[int]) -> list[float]:
        batches, samples = self.inputs[key], []
        gc.collect()
        gc.disable()  # a collection inside a timed call is the harness's noise, not the model's
        try:
            for index in indices:
                start = time.perf_counter()
                self.runner.forward(batches[index])
                samples.append((time.perf_counter() - start) * 1000.0)
        finally:
            gc.enable()
        return samples


class OtherLoad:
    """How many cores the rest of the machine kept busy while a case was timed: the machine's busy
    CPU time (steal included) less the CPU time of the harness's own processes, per second of wall
    clock. Unlike the load average it does not count the harness's own timing threads."""

    def __init__(self, pids):
        self.processes = [psutil.Process(pid) for pid in sorted(set(pids))]

    def _own(self) -> float:
        total = 0.0
        for process in self.processes:
            try:
                times = process.cpu_times()
                total += times.user + times.system
            except psutil.Error:  # a worker that died: its last seconds are not counted
                pass
        return total

    @staticmethod
    def _machine() -> float:
        times = psutil.cpu_times()
        return sum(getattr(times, field, 0.0) for field in ("user", "nice", "system", "irq", "softirq", "steal"))

    def __enter__(self) -> "OtherLoad":
        self.start = (time.perf_counter(), self._machine(), self._own())
        self.cores = None
        return self

    def __exit__(self, *exc) -> None:
        wall = time.perf_counter() - self.start[0]
        others = (self._machine() - self.start[1]) - (self._own() - self.start[2])
        self.cores = round(max(0.0, others / wall), 2) if wall > 0 else None


def _rounds(first: int, count: int, burst: int) -> list[list[int]]:
    """Call numbers first..first+count-1 in bursts of up to `burst` calls."""
    numbers = list(range(first, first + count))
    return [numbers[i:i + burst] for i in range(0, len(numbers), burst)]


def measure_interleaved(runners: dict[str, object], case: Case, texts: Sequence[str],
                        pairs: Sequence[str] | None, *, max_length: int, warmup: int, runs: int,
                        burst: int = 1, lead_in: int = 0, settle_s: float = 0.0,
                        timers: dict[str, object] | None = None,
                        on_call: Callable[[], None] | None = None,
                        on_error: Callable[[str, str], None] | None = None) -> dict[str, dict]:
    """Time every runner on this case, interleaved; {name: stats} for those that did not fail.

    Each runner encodes its own inputs; `timers` (default: a LocalTimer per runner) run them. The
    calls go round-robin in bursts of `burst` calls per variant, the starting variant rotating from
    round to round. Before each burst the machine is left idle for `settle_s` and `lead_in` untimed
    calls are made: the previous variant's threads (ORT's and OpenMP's spin a while after a call)
    must not land on this one, and this one's threads are awake, as in a process that calls its
    model again and again. A runner that fails (a shape it cannot take, a crash) is dropped from the
    rotation and reported through on_error(name, message); the others go on.
    """
    timers = timers or {name: LocalTimer(runner) for name, runner in runners.items()}
    batches = batches_for(case, len(texts), warmup + runs)
    prepared: dict[str, list] = {}
    for name, runner in runners.items():
        limit = runner.max_positions()
        if case.seq_len is not None and limit and case.seq_len > limit:
            _report(on_error, name, f"{case.label}: sequence length {case.seq_len} exceeds the model's "
                                    f"{limit} positions; case skipped")
            continue
        try:
            prepared[name] = [
                runner.encode([texts[i] for i in rows], [pairs[i] for i in rows] if pairs is not None else None,
                              max_length=max_length, pad_to=case.seq_len)
                for rows in batches]
            timers[name].load(case.label, prepared[name])
        except Exception as err:
            prepared.pop(name, None)
            _report(on_error, name, f"{case.label}: cannot prepare inputs: {_one_line(err)}")
    tokens = {name: [int(_mask(b).sum()) if case.seq_len is None else case.seq_len * case.batch_size
                     for b in batches_list] for name, batches_list in prepared.items()}
    live = [name for name in runners if name in prepared]
    samples: dict[str, list[float]] = {name: [] for name in live}
    used: dict[str, list[int]] = {name: [] for name in live}

    def burst_of(name: str, numbers: list[int], timed: bool) -> None:
        indices = [n % len(prepared[name]) for n in numbers]
        if settle_s and len(live) > 1:
            time.sleep(settle_s)
        try:
            elapsed = timers[name].time(case.label, indices[:1] * lead_in + indices)[lead_in:]
        except Exception as err:
            live.remove(name)
            _report(on_error, name, f"{case.label}: the model call failed: {_one_line(err)}")
            return
        if timed:
            samples[name].extend(elapsed)
            used[name].extend(tokens[name][i] for i in indices)
        for _ in elapsed:
            if on_call:
                on_call()

    def rotate(r: int) -> list[str]:
        order = list(live)
        return order[r % len(order):] + order[:r % len(order)] if order else []

    for r, numbers in enumerate(_rounds(0, warmup, burst)):  # warm-up, interleaved like the timed runs
        for name in rotate(r):
            if name in live:
                burst_of(name, numbers, timed=False)
    with OtherLoad([os.getpid()] + [getattr(timers[name], "pid", os.getpid()) for name in live]) as load:
        for r, numbers in enumerate(_rounds(warmup, runs, burst)):
            for name in rotate(r):
                if name in live:
                    burst_of(name, numbers, timed=True)
    results = {name: summarize(samples[name], [case.batch_size] * len(samples[name]), used[name])
               for name in live if samples[name]}
    load_1m = _load_1m()
    for stats in results.values():
        stats["load_1m"] = load_1m  # the machine's load average, the harness's own threads included
        stats["other_cpu_cores"] = load.cores  # cores other processes kept busy while this case was timed
    return results


def _load_1m() -> float | None:
    try:
        return round(os.getloadavg()[0], 2)
    except (AttributeError, OSError):
        return None


def host_array(value) -> np.ndarray:
    """An encoded input as a NumPy array, brought back from the GPU where a runner put it there."""
    return value.cpu().numpy() if hasattr(value, "cpu") else np.asarray(value)


def _mask(inputs) -> np.ndarray:
    return host_array(inputs["attention_mask"])


def _one_line(err: BaseException) -> str:
    text = str(err).strip()
    return f"{type(err).__name__}: {text.splitlines()[0]}" if text else type(err).__name__


def _report(on_error, name: str, message: str) -> None:
    if on_error:
        on_error(name, message)
