"""A bundle on one thread pinned to each core in turn, and unpinned on one thread and on ONNX Runtime's
default, in fresh processes over interleaved rounds: whether this host's cores run it alike.

    python bench/vcpu_speed.py runs/demo/bundle --seq-len 128 --rounds 8

On a shared VM two vCPUs can differ for minutes at a time (a busy hyperthread sibling on the host), and
a one-thread process then runs at the speed of whichever core it lands on: the bundle stage's choice of
thread count, and any single timing, reads that draw. Prints the CPU (vendor, family/model, ISA) and,
per setting, the median and the range of the rounds' p50s (each round: the bundle's own `predict.py
--benchmark`, its --calls calls after its warmup).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def p50_ms(bundle: Path, seq_len: int, calls: int, threads: int, cpu: int | None) -> float:
    def pin():  # the child alone: this process keeps every core
        if cpu is not None:
            os.sched_setaffinity(0, {cpu})

    done = subprocess.run([sys.executable, str(bundle / "predict.py"), "--benchmark", str(calls), "--seq-len",
                           str(seq_len), "--threads", str(threads)], capture_output=True, text=True, check=True,
                          cwd=str(bundle), preexec_fn=pin, timeout=300, env={**os.environ, "TOKENIZERS_PARALLELISM": "false"})
    return json.loads(done.stdout.strip().splitlines()[-1])["p50_ms"]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("bundle", help="a bundle folder (its predict.py takes --benchmark)")
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--calls", type=int, default=100)
    p.add_argument("--rounds", type=int, default=8)
    args = p.parse_args(argv)
    from shrinkbert.core.device import describe_machine

    bundle = Path(args.bundle).resolve()
    cpus = sorted(os.sched_getaffinity(0))
    settings = {f"1 thread on cpu {c}": (1, c) for c in cpus}
    settings.update({"1 thread, unpinned": (1, None), "ORT default threads, unpinned": (0, None)})
    samples: dict[str, list[float]] = {name: [] for name in settings}
    print(f"machine: {describe_machine()}; cores {cpus}; b1/s{args.seq_len}, {args.calls} calls a process", flush=True)
    for r in range(args.rounds):
        row = []
        for name, (threads, cpu) in settings.items():
            samples[name].append(p50_ms(bundle, args.seq_len, args.calls, threads, cpu))
            row.append(f"{samples[name][-1]:.2f}")
        print(f"round {r}: " + "  ".join(row), flush=True)
    for name, values in samples.items():
        print(f"{name:32s} median {np.median(values):.3f} ms  range {min(values):.3f}-{max(values):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
