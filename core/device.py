"""Threads and devices: state them explicitly, because latency on a shared CPU depends on them."""
from __future__ import annotations

import contextlib
import os
from typing import Iterator


def set_threads(num_threads: int | None = None) -> int:
    """Pin torch's intra-op threads (default: all cores) and return the number used."""
    import torch

    num_threads = num_threads or os.cpu_count() or 1
    torch.set_num_threads(num_threads)
    return num_threads


@contextlib.contextmanager
def torch_threads(num_threads: int | None = None) -> Iterator[int]:
    """`set_threads` for the duration of a block, then torch's thread count as it was found (a
    latency probe must not change the threads of the training that follows it)."""
    import torch

    previous = torch.get_num_threads()
    try:
        yield set_threads(num_threads)
    finally:
        torch.set_num_threads(previous)


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


def cpu_has_bf16() -> bool:
    """Whether the cores have bf16 instructions (AVX512-BF16 or AMX): only there does CPU bf16 autocast
    run faster than fp32 (elsewhere it is emulated and slower)."""
    return bool({"avx512_bf16", "amx_bf16"} & cpu_flags())


def cpu_model() -> str:
    """The CPU's model name with its family and model numbers (Linux; "AMD EPYC" alone does not say
    which generation), or '' where there is none."""
    name = _cpuinfo("model name")
    family, model = _cpuinfo("cpu family"), _cpuinfo("model\t")
    return f"{name} family {family} model {model}" if name and family and model else name


def detect_isa() -> str:
    """The instruction set int8 kernels run on: avx512_vnni, avx512, avx2 or arm64 (one rule for the
    int8 defaults and for every report that states the machine)."""
    import platform

    flags = cpu_flags()
    if platform.machine().lower() in ("aarch64", "arm64"):
        return "arm64"
    if "avx512_vnni" in flags or "avx512vnni" in flags:
        return "avx512_vnni"
    if "avx512f" in flags or "avx512bw" in flags:
        return "avx512"
    return "avx2"


def describe_machine() -> str:
    import platform

    isa = detect_isa()
    model = cpu_model()
    return f"{platform.processor() or platform.machine()}{' ' + model if model else ''}, {os.cpu_count()} cores, {isa}"
