"""Latency done honestly on a shared CPU: warm-up, stated threads, variants interleaved.

For each case (batch size x sequence length) every variant gets its warm-up calls, then the
timed calls go round-robin across variants (A,B,C, B,C,A, C,A,B, ...: the starting variant
rotates too), so drift on the machine (another process, thermal, frequency) hits all alike.
Only the model call is timed; inputs are tokenized beforehand. Garbage collection is paused
during the timed loop.

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


def measure_interleaved(runners: dict[str, object], case: Case, texts: Sequence[str],
                        pairs: Sequence[str] | None, *, max_length: int, warmup: int, runs: int,
                        on_call: Callable[[], None] | None = None,
                        on_error: Callable[[str, str], None] | None = None) -> dict[str, dict]:
    """Time every runner on this case, interleaved; {name: stats} for those that did not fail.

    A runner that fails (a shape it cannot take, a crash) is dropped from the rotation and
    reported through on_error(name, message); the others go on.
    """
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
        except Exception as err:
            _report(on_error, name, f"{case.label}: cannot prepare inputs: {_one_line(err)}")
    tokens = {name: [int(_mask(b).sum()) if case.seq_len is None else case.seq_len * case.batch_size
                     for b in batches_list] for name, batches_list in prepared.items()}
    live = [name for name in runners if name in prepared]
    # Warm-up, interleaved like the timed runs.
    for i in range(warmup):
        for name in list(live):
            if not _call(runners[name], prepared[name][i % len(prepared[name])], name, case, live, on_error):
                continue
            if on_call:
                on_call()
    samples: dict[str, list[float]] = {name: [] for name in live}
    sizes: dict[str, list[int]] = {name: [] for name in live}
    used_tokens: dict[str, list[int]] = {name: [] for name in live}
    gc.collect()
    gc.disable()
    try:
        for r in range(runs):
            order = live[r % len(live):] + live[:r % len(live)] if live else []
            for name in order:
                if name not in live:
                    continue
                index = (warmup + r) % len(prepared[name])
                inputs = prepared[name][index]
                start = time.perf_counter()
                ok = _call(runners[name], inputs, name, case, live, on_error)
                elapsed = (time.perf_counter() - start) * 1000.0
                if ok:
                    samples[name].append(elapsed)
                    sizes[name].append(case.batch_size)
                    used_tokens[name].append(tokens[name][index])
                if on_call:
                    on_call()
    finally:
        gc.enable()
    results = {name: summarize(samples[name], sizes[name], used_tokens[name]) for name in live if samples[name]}
    load = _load_1m()
    for stats in results.values():
        stats["load_1m"] = load  # how busy the machine was while this case was timed
    return results


def _load_1m() -> float | None:
    try:
        return round(os.getloadavg()[0], 2)
    except (AttributeError, OSError):
        return None


def _mask(inputs) -> np.ndarray:
    mask = inputs["attention_mask"]
    return mask.numpy() if hasattr(mask, "numpy") else np.asarray(mask)


def _call(runner, inputs, name, case, live, on_error) -> bool:
    try:
        runner.forward(inputs)
        return True
    except Exception as err:
        live.remove(name)
        _report(on_error, name, f"{case.label}: the model call failed: {_one_line(err)}")
        return False


def _one_line(err: BaseException) -> str:
    text = str(err).strip()
    return f"{type(err).__name__}: {text.splitlines()[0]}" if text else type(err).__name__


def _report(on_error, name: str, message: str) -> None:
    if on_error:
        on_error(name, message)
