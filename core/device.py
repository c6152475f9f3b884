"""Threads and devices: state them explicitly, because latency on a shared CPU depends on them."""
from __future__ import annotations

import os


def set_threads(num_threads: int | None = None) -> int:
    """Pin torch's intra-op threads (default: all cores) and return the number used."""
    import torch

    num_threads = num_threads or os.cpu_count() or 1
    torch.set_num_threads(num_threads)
    return num_threads


def _cpuinfo(prefix: str) -> str:
    """The value of the first /proc/cpuinfo line starting with `prefix` (Linux), or ''."""
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith(prefix):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return ""


def cpu_flags() -> set[str]:
    """The CPU's instruction-set flags (Linux), used to pick an int8 kernel set (avx512_vnni, avx2)."""
    return set(_cpuinfo("flags").split())


def cpu_model() -> str:
    """The CPU's model name (Linux), or '' where there is none."""
    return _cpuinfo("model name")


def describe_machine() -> str:
    import platform

    flags = cpu_flags()
    isa = "avx512_vnni" if "avx512_vnni" in flags else "avx2" if "avx2" in flags else platform.machine()
    model = cpu_model()
    return f"{platform.processor() or platform.machine()}{' ' + model if model else ''}, {os.cpu_count()} cores, {isa}"
