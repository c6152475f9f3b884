"""The bundle's runtime defaults, chosen by measurement: ONNX Runtime's thread count and spinning.

A bundle runs in its user's process, normally with nothing else busy in it. There ORT's default,
worker threads that spin while they wait for work, is usually the faster. Whether one thread beats
ORT's default (one per physical core) depends on the model, the host (two vCPUs that share a core
favour one thread) and the length of the texts (one thread can win on short texts and lose at 128
tokens on the same host). So each bundle is timed where its task's texts are, batch 1 at the mean token count of the rows its bundle stage checks parity on, and at
b1/s128 (b1/s128 alone where it has no rows: an embedding bundle), at its base setting (ORT's thread
default, spinning on) and at each alternative left to measure (spinning off; one thread), each in a fresh
process of its own (its own predict.py --benchmark, so no torch and nothing of the kit's), the settings
taken in turn over ROUNDS rounds and each read as the median of its rounds: on a shared VM a single
sample per setting can be off by more than the difference it decides (bench/graph_variants.py times
the settings interleaved). An alternative replaces the base
only where it measures clearly faster at the task's length and not clearly slower at 128 tokens: a
user's longer text must not pay for the short ones.
labels.json "runtime" holds the choice (the Predictor's defaults), the manifest the figures. It also
says that ONNX Runtime's threads flush denormal floats to zero (compress/bundle_files.open_session): set,
not timed, since it is never slower.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np

CASE = {"batch_size": 1, "seq_len": 128}
RUNS = 30
ROUNDS = 3  # each setting's fresh process, in turn: a burst of noise on the host hits one round, not the choice
CLEARLY_FASTER = 0.9  # the base setting is given up only for a p50 at least 10% lower
SPIN_CHOICES = ("auto", "on", "off")
THREADS_HELP = "'auto', 'default' (ONNX Runtime's: one per physical core) or a number"


def parse_threads(setting: str | int) -> str | int:
    """--threads as given: "auto", "default" or a positive int (a ShrinkbertError otherwise)."""
    from shrinkbert.core.errors import ShrinkbertError

    text = str(setting).strip().lower()
    if text in ("auto", "default"):
        return text
    if text.isdigit() and int(text) > 0:
        return int(text)
    raise ShrinkbertError(f"threads must be {THREADS_HELP}, got {setting!r}")


def _benchmark(bundle_dir: Path, threads: int | None, spin: bool, seq_len: int) -> dict[str, Any] | None:
    """The bundle's own predict.py --benchmark in a fresh interpreter; None where it failed."""
    cmd = [sys.executable, str(bundle_dir / "predict.py"), "--benchmark", str(RUNS), "--seq-len", str(seq_len),
           "--batch-size", str(CASE["batch_size"]), "--threads", str(threads or 0)] + ([] if spin else ["--no-spin"])
    env = {**os.environ, "TOKENIZERS_PARALLELISM": "false"}
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env, cwd=str(bundle_dir))
    except subprocess.TimeoutExpired:
        return None
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    return json.loads(lines[-1]) if done.returncode == 0 and lines else None


def _write_choice(bundle_dir: Path, threads: int | None, spin: bool, meta_file: str = "labels.json") -> None:
    path = bundle_dir / meta_file
    meta = json.loads(path.read_text(encoding="utf-8"))
    meta["runtime"] = {"threads": threads, "spin": spin, "flush_denormals": True}  # bundle_files.open_session
    path.write_text(json.dumps(meta, indent=2, ensure_ascii=False))


def _name(threads: int | None, spin: bool) -> str:
    return f"threads {threads or 'default'}, spin {'on' if spin else 'off'}"


def choose_runtime(bundle_dir: str | Path, max_length: int, setting: str = "auto",
                   meta_file: str = "labels.json", threads: str | int = "auto",
                   typical_tokens: int | None = None) -> dict[str, Any]:
    """Write the bundle's runtime defaults into its `meta_file` "runtime" (labels.json; an embedding
    bundle's embedding.json) and return the record for the manifest. `setting` is spinning: "auto"
    times it on and off, "on"/"off" sets it; `threads`: "auto" times one thread against ONNX
    Runtime's default, "default" or a number sets it. What is set is not timed (the same bytes every
    build); what is timed may differ between two builds of one model. `typical_tokens`: the task's mean
    token count, where the choice is timed (None: CASE's length)."""
    bundle_dir = Path(bundle_dir)
    threads = parse_threads(threads)
    base_threads = threads if isinstance(threads, int) else None
    base = (base_threads, setting != "off")
    alternatives = []
    if setting == "auto":
        alternatives.append((base_threads, False))
    if threads == "auto":
        alternatives.append((1, base[1]))
    record: dict[str, Any] = {"threads_note": "None: ONNX Runtime's default, one per physical core"}
    if not alternatives:
        chosen = base
        record["chosen_by"] = f"--spin {setting} --threads {threads} (set, not measured)"
    else:
        record_len = min(CASE["seq_len"], max_length)
        seq_len = min(int(typical_tokens), max_length) if typical_tokens else record_len
        rounds: dict[tuple[str, int], list[float]] = {}
        lengths = [seq_len] + ([record_len] if seq_len != record_len else [])
        for _ in range(ROUNDS):
            for candidate in [base, *alternatives]:
                for length in lengths:
                    ms = (_benchmark(bundle_dir, *candidate, length) or {}).get("p50_ms")
                    if ms:
                        rounds.setdefault((_name(*candidate), length), []).append(ms)

        def median_of(candidate, length):
            samples = rounds.get((_name(*candidate), length))
            return float(np.median(samples)) if samples else None

        p50 = {_name(*c): median_of(c, seq_len) for c in [base, *alternatives]}
        p50_record = {_name(*c): median_of(c, record_len) for c in [base, *alternatives]} if len(lengths) > 1 else {}
        chosen = base
        best = p50[_name(*base)]
        for candidate in alternatives:
            ms, long_ms, long_base = (p50[_name(*candidate)], p50_record.get(_name(*candidate)),
                                      p50_record.get(_name(*base)))
            not_slower_long = not p50_record or bool(long_ms and long_base and long_ms * CLEARLY_FASTER <= long_base)
            if best and ms and ms < CLEARLY_FASTER * p50[_name(*base)] and ms < best and not_slower_long:
                chosen, best = candidate, ms
        where = (f"the mean token count of the task's texts ({typical_tokens})" if typical_tokens
                 else "no task texts to measure")
        record["chosen_by"] = (f"p50 at b{CASE['batch_size']}/s{seq_len} ({where}), {RUNS} calls, each setting in a "
                               f"fresh process of its own (predict.py --benchmark), the median of {ROUNDS} rounds taken "
                               "in turn; the base setting (" + _name(*base) +
                               f") kept unless another is {1 - CLEARLY_FASTER:.0%} faster there"
                               + (f" and not {1 - CLEARLY_FASTER:.0%} slower at b1/s{record_len}" if p50_record else ""))
        record["p50_ms"] = p50
        if p50_record:
            record[f"p50_ms_s{record_len}"] = p50_record  # what the choice costs at long texts
    _write_choice(bundle_dir, chosen[0], chosen[1], meta_file)
    return {"threads": chosen[0], "spin": chosen[1], "flush_denormals": True,
            "flush_denormals_note": "set, not timed: ONNX Runtime's threads flush denormal floats to zero, never "
                                    "slower and up to 2x faster over padded tokens (bench/denormals.py)", **record}
