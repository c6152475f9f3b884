"""The processes of a (possibly multi-process) distillation: Accelerate's state and main-process logging.

One home for both, so every piece of the distill stage (data, models, the stage) opts in to CPU
multi-process the same way and logs once.
"""
from __future__ import annotations

import torch


def process_state():
    """Accelerate's process state, opted in to CPU multi-process (gloo) the way core.train's
    Accelerator is: PartialState is a singleton and its first creation decides, so a bare
    PartialState() before training would leave each process training alone."""
    from accelerate import PartialState

    return PartialState(cpu=not torch.cuda.is_available())


def log_main(message: str) -> None:
    if process_state().is_main_process:
        print(message, flush=True)
