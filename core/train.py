"""The one training loop every stage uses (teachers, students), built on HF Accelerate.

    metrics = train(model, train_dataset, collate_fn, loss_fn, cfg, checkpoint_dir)

`loss_fn(model, batch) -> (loss, logs)` holds everything stage-specific (MLM masking, KD losses);
this loop holds what they share: AdamW with weight-decay groups, linear warmup then decay,
gradient accumulation and clipping, mixed precision where the device has it, several processes
(DDP on GPUs, gloo on CPU), a progress bar, tracker logging, and checkpoints that resume exactly.

Exact resume: every `checkpoint_every` optimizer steps `accelerator.save_state` writes model,
optimizer and RNG states of every process, and `train_state.json` the scheduler and the data
position (epoch, micro-batch), into a fresh directory, and a `latest` pointer is then replaced atomically. A rerun with the same
config finds the pointer, restores all of it and skips the batches already seen
(`skip_first_batches`), so a run killed at any moment ends with the same weights as one that
never stopped. This holds because nothing outside the checkpoint feeds randomness: shuffling is
seeded per epoch (seedable sampler), dataloaders use their own generator, `eval_fn` runs with the
RNG state forked, and random batch transforms (dynamic masking) belong in `loss_fn`, which runs
in the main process on the checkpointed global RNG, never in `collate_fn` workers.
When a run completes, a final checkpoint marked `done` lets a rerun return at once.
"""
from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import shutil
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

import torch

from shrinkbert.core.config import to_dict
from shrinkbert.core.configs import TrainConfig
from shrinkbert.core.device import cpu_has_bf16
from shrinkbert.core.errors import ShrinkbertError
from shrinkbert.core.progress import progress_bar
from shrinkbert.core.quiet import tied_decoder_quiet

LATEST = "latest"  # pointer file naming the newest complete checkpoint
DONE = "done.json"
# Scheduler + TrainState as JSON. Registering them with Accelerate would pickle them, and its
# loader unpickles custom objects with weights_only=False: a checkpoint someone else made could
# run code on resume. Everything Accelerate itself loads here goes through weights_only=True.
TRAIN_STATE = "train_state.json"
# Config keys that do not change what a run computes; a resume may differ in them.
RESUME_NEUTRAL = {"resume", "num_workers", "log_every", "log_with", "checkpoint_every", "project_dir"}


# `auto` turns CPU bf16 autocast on from this model width (hidden size) up: below it a bf16 step is no
# faster than fp32, from it up faster at the same accuracy (bench/cpu_bf16.py times a step per width).
# On a GPU `auto` stays fp32: small models at batches of short rows are launch-bound there, and bf16 ran
# them slower; base-sized models at long batches ask for bf16.
AUTO_BF16_MIN_HIDDEN = 160


def model_width(model: torch.nn.Module) -> int | None:
    """The widest hidden size among the transformers models inside `model` (None: no config says)."""
    from shrinkbert.core.compact import is_compact

    # a compact student (core/compact) is no transformer: its LSTM and convolutions are not what the
    # width rule was measured on, so it trains in fp32 under `auto`
    widths = [int(module.config.hidden_size) for module in model.modules()
              if isinstance(getattr(getattr(module, "config", None), "hidden_size", None), int)
              and not is_compact(module.config)]
    return max(widths) if widths else None


def resolve_mixed_precision(requested: str, model: torch.nn.Module | None = None, width: int | None = None) -> str:
    """What Accelerate runs: `no`, `bf16` or `fp16`, from the requested mode, the device and (for `auto`)
    the model's width (`width` where the model is not loaded: a teacher whose outputs may be cached)."""
    requested = (requested or "no").lower()
    if requested not in ("auto", "no", "bf16", "fp16"):
        raise ShrinkbertError(f"mixed_precision must be auto, no, bf16 or fp16, got {requested!r}")
    if requested == "auto":
        width = model_width(model) if model is not None else width
        wide = width is not None and width >= AUTO_BF16_MIN_HIDDEN
        return "bf16" if not torch.cuda.is_available() and wide and cpu_has_bf16() else "no"
    if requested == "no":
        return "no"
    if not torch.cuda.is_available():  # CPU autocast: bf16 only where the cores compute in it natively
        return "bf16" if requested == "bf16" and cpu_has_bf16() else "no"
    if requested == "bf16" and not torch.cuda.is_bf16_supported():
        return "fp16"
    return requested


def fresh_precision(precision: str) -> None:
    """Let this process train in `precision` though an earlier training in it chose another (a bf16
    student, then a static table in fp32, from one Python session): Accelerate keeps one precision per
    process and refuses a second. Its precision state is dropped then, never the process group."""
    from accelerate.state import AcceleratorState

    shared = AcceleratorState._shared_state  # empty until a first Accelerator in this process
    if shared and shared.get("_mixed_precision") not in (None, precision):
        AcceleratorState._reset_state(reset_partial_state=False)


def param_groups(modules: Iterable[torch.nn.Module], weight_decay: float) -> list[dict]:
    """AdamW groups: decay on weight matrices, none on biases and LayerNorm weights (1-D tensors)."""
    decay, no_decay, seen = [], [], set()
    for module in modules:
        for name, param in module.named_parameters():
            if not param.requires_grad or id(param) in seen:
                continue
            seen.add(id(param))
            (no_decay if param.ndim < 2 or name.endswith(".bias") else decay).append(param)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


class _LossModule(torch.nn.Module):
    """Model + extra trainable modules in one module whose forward is the loss, so DDP syncs them all."""

    def __init__(self, model, extra_modules, loss_fn):
        super().__init__()
        self.model = model
        self.extra = torch.nn.ModuleList(extra_modules)
        self._loss_fn = loss_fn

    def forward(self, batch):
        return self._loss_fn(self.model, batch)


class TrainState:
    """The run's position and history, checkpointed alongside model and optimizer."""

    def __init__(self):
        self.step, self.epoch, self.batch, self.elapsed, self.tokens = 0, 0, 0, 0.0, 0
        self.history: list[dict] = []

    def state_dict(self):
        return dict(vars(self))

    def load_state_dict(self, state):
        vars(self).update(state)


def _latest(checkpoint_dir: Path) -> Path | None:
    pointer = checkpoint_dir / LATEST
    if not pointer.is_file():
        return None
    path = checkpoint_dir / pointer.read_text().strip()
    return path if path.is_dir() else None


def _check_same_run(checkpoint_dir: Path, config: dict) -> None:
    saved_file = checkpoint_dir / "config.json"
    if not saved_file.is_file():
        return
    saved = json.loads(saved_file.read_text())
    changed = sorted(k for k in set(saved) | set(config)
                     if k not in RESUME_NEUTRAL and saved.get(k) != config.get(k))
    if changed:
        raise ShrinkbertError(
            f"checkpoint directory {checkpoint_dir} holds a run with other settings "
            f"({', '.join(changed)}); delete it to start afresh or pass --no-resume")


class Checkpoints:
    """A run's resumable checkpoints in one directory: `step-N/` (Accelerate's save_state of every
    process, plus TRAIN_STATE: the scheduler and the data position as JSON), a `latest` pointer
    replaced atomically as the commit point, and `config.json`, the run config a resume must match.
    The final checkpoint carries DONE (the run's metrics), so a rerun of a finished run returns at once."""

    def __init__(self, accelerator, directory: Path, scheduler, state: TrainState):
        self.accelerator, self.directory, self.scheduler, self.state = accelerator, directory, scheduler, state

    def resume_or_start(self, run_config: dict, resume: bool, desc: str) -> dict | None:
        """Restore the latest checkpoint (when `resume` and there is one) or start an empty directory;
        the final metrics when the restored run had finished, else None."""
        latest = _latest(self.directory) if resume else None
        if latest is None:
            if self.accelerator.is_main_process:
                shutil.rmtree(self.directory, ignore_errors=True)
                self.directory.mkdir(parents=True)
                (self.directory / "config.json").write_text(json.dumps(run_config, indent=1, default=str))
            self.accelerator.wait_for_everyone()
            return None
        _check_same_run(self.directory, run_config)
        if not (latest / TRAIN_STATE).is_file():
            raise ShrinkbertError(f"checkpoint {latest} has no {TRAIN_STATE} (made by an older shrinkbert?); "
                                  "delete it to start afresh or pass --no-resume")
        self._load_safely(latest)
        saved = json.loads((latest / TRAIN_STATE).read_text())
        self.scheduler.load_state_dict(saved["scheduler"])
        self.state.load_state_dict(saved["state"])
        self.accelerator.print(f"{desc}: resumed from {latest} at step {self.state.step}")
        finished = json.loads((latest / DONE).read_text()) if (latest / DONE).is_file() else None
        self.accelerator.wait_for_everyone()
        return finished

    def _load_safely(self, latest: Path) -> None:
        try:  # Accelerate loads with weights_only=True: a crafted pickle is refused, not run
            from accelerate.utils.other import load as weights_only_load

            for rng_file in latest.glob("random_states_*.pkl"):  # Accelerate only logs a failure
                weights_only_load(rng_file)                      # here, and resume is no longer exact
            self.accelerator.load_state(str(latest))
        except Exception as err:
            first = (str(err).strip().splitlines() or [type(err).__name__])[0]
            raise ShrinkbertError(f"checkpoint {latest} cannot be loaded safely ({type(err).__name__}: "
                                  f"{first[:200]}); delete it or pass --no-resume") from None

    def save(self, done_metrics: dict | None = None) -> None:
        """Write step-N into a temporary sibling, then move it and the pointer into place (main
        process), so a kill at any moment leaves the previous checkpoint whole."""
        accelerator, directory = self.accelerator, self.directory
        name = f"step-{self.state.step}"
        tmp = directory / f".tmp-{name}"
        if accelerator.is_main_process:
            shutil.rmtree(tmp, ignore_errors=True)
        accelerator.wait_for_everyone()
        with tied_decoder_quiet():  # an MLM decoder shares the embedding table: tied again on load
            accelerator.save_state(str(tmp))
        accelerator.wait_for_everyone()
        if accelerator.is_main_process:
            (tmp / TRAIN_STATE).write_text(json.dumps(
                {"scheduler": self.scheduler.state_dict(), "state": self.state.state_dict()}, default=str))
            if done_metrics is not None:
                (tmp / DONE).write_text(json.dumps(done_metrics, default=str))
            shutil.rmtree(directory / name, ignore_errors=True)
            os.replace(tmp, directory / name)
            pointer = directory / f".{LATEST}.tmp"
            pointer.write_text(name)
            os.replace(pointer, directory / LATEST)  # the commit point
            for old in directory.glob("*step-*"):
                if old.name != name:
                    shutil.rmtree(old, ignore_errors=True)
        accelerator.wait_for_everyone()


def _count_tokens(batch) -> torch.Tensor | int:
    """The batch's real tokens, left on the batch's device (no host sync)."""
    if isinstance(batch, Mapping):
        if "attention_mask" in batch:
            return batch["attention_mask"].sum()
        if "input_ids" in batch:
            return batch["input_ids"].numel()
    return 0


class _Window:
    """A logging window's sums of loss, logs and tokens, kept as the step left them: a float() or
    int() of a CUDA tensor blocks the host until the GPU's queue drains, and one per step keeps the
    host from preparing the next batch while the GPU works. Read once per window."""

    def __init__(self):
        self.losses: list = []
        self.logs: dict[str, list] = {}
        self.pending: list = []  # token counts not yet read
        self.tokens = 0  # read so far in this window
        self.start = time.perf_counter()

    def add(self, loss: torch.Tensor, logs: Mapping | None, tokens) -> None:
        self.losses.append(loss.detach())
        for key, value in (logs or {}).items():  # detached: a kept log must not keep the step's graph alive
            self.logs.setdefault(key, []).append(value.detach() if isinstance(value, torch.Tensor) else value)
        self.pending.append(tokens)

    def take_tokens(self) -> int:
        """The tokens counted since the last take (the run's total adds them at each log, checkpoint
        and the end); the window's own count, for its tokens/s, keeps them."""
        counted, self.pending = sum(int(t) for t in self.pending), []
        self.tokens += counted
        return counted

    def record(self, scale: int) -> dict[str, float]:
        """The window's mean loss and logs and its tokens/s (tokens x `scale` processes)."""
        n = max(len(self.losses), 1)
        return {"loss": sum(float(v) for v in self.losses) / n,
                "tokens_per_s": self.tokens * scale / max(time.perf_counter() - self.start, 1e-9),
                **{k: sum(float(v) for v in values) / n for k, values in self.logs.items()}}


# On a CPU, SDPA runs its flash kernel where attention dropout is 0 (`distill --dropout 0`, ModernBERT's
# default), which trains short batches slower than its math kernel and long ones faster; up to this many
# tokens the math kernel runs (bench/cpu_attention_kernel.py times both kernels by batch length).
MATH_ATTENTION_UP_TO = 128


def attention_kernel(batch, device: torch.device):
    """The SDPA kernel a training step's forward runs under (its backward follows the forward's)."""
    ids = batch.get("input_ids") if isinstance(batch, Mapping) else None
    if device.type != "cpu" or ids is None or ids.shape[-1] > MATH_ATTENTION_UP_TO:
        return contextlib.nullcontext()
    from torch.nn.attention import SDPBackend, sdpa_kernel

    return sdpa_kernel(SDPBackend.MATH)


def train(model: torch.nn.Module, train_dataset, collate_fn: Callable, loss_fn: Callable,
          cfg: TrainConfig, checkpoint_dir: str | Path, extra_modules: Iterable[torch.nn.Module] = (),
          eval_fn: Callable[[torch.nn.Module], dict] | None = None, desc: str = "train",
          frozen_modules: Iterable[torch.nn.Module] = ()) -> dict[str, Any]:
    """Train `model` (and `extra_modules`) in place on `train_dataset`; return the final metrics.

    loss_fn(model, batch) -> (loss tensor, logs dict of floats) is called on each micro-batch
    (already on the device); loss and logs are averaged over each logging window. eval_fn(model) -> dict runs at the end of every epoch and of the run.
    frozen_modules (e.g. a teacher) are moved to the device and kept in eval mode, untrained.
    On several processes only the main process should write artifacts afterwards
    (`accelerate.PartialState().is_main_process`).
    """
    from accelerate import Accelerator
    from accelerate.utils import DataLoaderConfiguration, DistributedDataParallelKwargs, set_seed
    from torch.utils.data import DataLoader
    from transformers import get_constant_schedule_with_warmup, get_linear_schedule_with_warmup

    checkpoint_dir = Path(checkpoint_dir)
    run_config = to_dict(cfg) if dataclasses.is_dataclass(cfg) else dict(vars(cfg))
    trackers = [t.strip() for t in (cfg.log_with or "").split(",") if t.strip()]
    precision = resolve_mixed_precision(cfg.mixed_precision, model)
    fresh_precision(precision)
    accelerator = Accelerator(
        cpu=not torch.cuda.is_available(),  # on CPU, several processes must opt in to gloo DDP
        gradient_accumulation_steps=cfg.grad_accum_steps,
        mixed_precision=precision,
        log_with=trackers or None, project_dir=str(checkpoint_dir / "logs") if trackers else None,
        # On a GPU, batches come from pinned memory and move without blocking: a pageable copy waits
        # behind every kernel already queued, which serialises the host's next batch with the GPU's step.
        dataloader_config=DataLoaderConfiguration(use_seedable_sampler=True, data_seed=cfg.seed,
                                                  non_blocking=torch.cuda.is_available()),
        kwargs_handlers=[DistributedDataParallelKwargs(find_unused_parameters=True)])
    set_seed(cfg.seed)
    if trackers:
        accelerator.init_trackers(desc.replace(" ", "-"), config={k: v for k, v in run_config.items()
                                                                   if isinstance(v, (int, float, str, bool))})

    extra_modules = list(extra_modules)
    if cfg.torch_compile:
        # The encoder, in place: every loss runs it, through the model's own forward or directly (MLM
        # pretraining calls it alone, to run its head on the masked rows only); parameter names,
        # checkpoints and save_pretrained stay as they are uncompiled.
        getattr(model, "base_model", model).compile()
    for frozen in frozen_modules:
        frozen.to(accelerator.device).eval().requires_grad_(False)
    wrapper = _LossModule(model, extra_modules, loss_fn)
    groups = param_groups([model, *extra_modules], cfg.weight_decay)
    if not any(g["params"] for g in groups):
        raise ShrinkbertError(f"{desc}: the model has no trainable parameters")
    try:  # the fused kernel (CPU and GPU) is several times faster than the per-tensor loop
        optimizer = torch.optim.AdamW(groups, lr=cfg.learning_rate, fused=True)
    except (RuntimeError, TypeError, ValueError):
        optimizer = torch.optim.AdamW(groups, lr=cfg.learning_rate)
    lengths = row_lengths(train_dataset) if cfg.group_by_length else None
    grouped = (LengthGroupedSampler(lengths, cfg.batch_size, accelerator.num_processes, cfg.seed)
               if lengths is not None else None)
    loader = DataLoader(train_dataset, batch_size=cfg.batch_size, shuffle=grouped is None, sampler=grouped,
                        collate_fn=collate_fn, num_workers=cfg.num_workers, pin_memory=torch.cuda.is_available(),
                        generator=torch.Generator().manual_seed(cfg.seed))
    wrapper, optimizer, loader = accelerator.prepare(wrapper, optimizer, loader)
    if len(loader) == 0:
        raise ShrinkbertError(f"{desc}: the training set is empty")

    steps_per_epoch = math.ceil(len(loader) / cfg.grad_accum_steps)
    total_steps = cfg.max_steps if cfg.max_steps > 0 else max(1, math.ceil(cfg.epochs * steps_per_epoch))
    warmup = cfg.warmup_steps if cfg.warmup_steps > 0 else int(cfg.warmup_ratio * total_steps)
    # The scheduler is stepped here once per optimizer step (not prepared: Accelerate would step it
    # once per process), and checkpointed as JSON (TRAIN_STATE).
    scheduler = (get_linear_schedule_with_warmup(optimizer, warmup, total_steps) if cfg.lr_schedule == "linear"
                 else get_constant_schedule_with_warmup(optimizer, warmup))
    state = TrainState()

    checkpoints = Checkpoints(accelerator, checkpoint_dir, scheduler, state) if cfg.checkpoint_every > 0 else None
    if checkpoints is not None:
        finished = checkpoints.resume_or_start(run_config, resume=cfg.resume, desc=desc)
        if finished is not None:  # the run had completed: its final metrics
            return finished

    def evaluate() -> dict:
        rng = torch.get_rng_state(), torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None
        wrapper.eval()
        with torch.no_grad():
            result = eval_fn(accelerator.unwrap_model(wrapper).model) or {}
        wrapper.train()
        torch.set_rng_state(rng[0])
        if rng[1] is not None:
            torch.cuda.set_rng_state_all(rng[1])
        state.history.append({"kind": "eval", "step": state.step, "epoch": state.epoch, **result})
        accelerator.log(result, step=state.step)
        return result

    bar = progress_bar(total=total_steps, initial=state.step, desc=desc, disable=not accelerator.is_local_main_process)
    wrapper.train()
    window = _Window()
    run_start, elapsed_before = time.perf_counter(), state.elapsed
    while state.step < total_steps:
        loader.set_epoch(state.epoch)
        if grouped is not None:  # Accelerate does not reach a custom sampler through every wrapper (skip + shard)
            grouped.set_epoch(state.epoch)
        epoch_loader = accelerate_skip(loader, state.batch) if state.batch else loader
        for batch in epoch_loader:
            with accelerator.accumulate(wrapper):
                with attention_kernel(batch, accelerator.device):
                    loss, logs = wrapper(batch)
                accelerator.backward(loss)
                if accelerator.sync_gradients and cfg.max_grad_norm > 0:
                    accelerator.clip_grad_norm_(wrapper.parameters(), cfg.max_grad_norm)
                optimizer.step()
                if accelerator.sync_gradients and not accelerator.optimizer_step_was_skipped:
                    scheduler.step()
                optimizer.zero_grad(set_to_none=True)
            state.batch += 1
            window.add(loss, logs, _count_tokens(batch))
            if not accelerator.sync_gradients:
                continue
            state.step += 1
            bar.update(1)
            if state.step % max(cfg.log_every, 1) == 0 or state.step == total_steps:
                state.tokens += window.take_tokens() * accelerator.num_processes
                record = {"kind": "train", "step": state.step, "epoch": state.epoch, "lr": scheduler.get_last_lr()[0],
                          **window.record(accelerator.num_processes)}
                state.history.append(record)
                accelerator.log({k: v for k, v in record.items() if k not in ("kind", "step")}, step=state.step)
                bar.set_postfix(loss=f"{record['loss']:.4f}", tok_s=f"{record['tokens_per_s']:,.0f}")
                window = _Window()
            if state.step >= total_steps:
                break
            if checkpoints is not None and state.step % cfg.checkpoint_every == 0:
                state.tokens += window.take_tokens() * accelerator.num_processes
                state.elapsed = elapsed_before + time.perf_counter() - run_start
                checkpoints.save()
        if state.batch >= len(loader):  # the epoch ran to its end
            if eval_fn is not None:
                evaluate()
            state.epoch, state.batch = state.epoch + 1, 0
    bar.close()

    metrics: dict[str, Any] = {}
    if eval_fn is not None:
        evals = [h for h in state.history if h["kind"] == "eval"]
        metrics.update(evaluate() if not evals or evals[-1]["step"] != state.step else
                       {k: v for k, v in evals[-1].items() if k not in ("kind", "step", "epoch")})
    state.tokens += window.take_tokens() * accelerator.num_processes
    state.elapsed = elapsed_before + time.perf_counter() - run_start
    losses = [h["loss"] for h in state.history if h["kind"] == "train"]
    metrics.update({"train_loss": losses[-1] if losses else float("nan"), "steps": state.step,
                    "epochs": state.step / steps_per_epoch, "train_time_s": state.elapsed,
                    "tokens_per_s": state.tokens / max(state.elapsed, 1e-9),
                    "num_processes": accelerator.num_processes, "mixed_precision": str(accelerator.mixed_precision),
                    "history": state.history})
    if checkpoints is not None:
        checkpoints.save(done_metrics=metrics)
    for tracker in accelerator.trackers:  # not end_training(): that tears down the process group,
        tracker.finish()                  # which the stage still needs to write its artifact
    return metrics


def epoch_losses(metrics: dict) -> list[float]:
    """The mean logged training loss of each epoch of a finished run (`train`'s metrics: its history
    and steps); log every step for an exact mean, every N steps for one over windows of N."""
    steps_per_epoch = metrics["steps"] / max(metrics["epochs"], 1e-9)
    by_epoch: dict[int, list[float]] = {}
    for entry in (h for h in metrics["history"] if h["kind"] == "train"):
        by_epoch.setdefault(int((entry["step"] - 1) // steps_per_epoch), []).append(entry["loss"])
    return [sum(values) / len(values) for _, values in sorted(by_epoch.items())]


def row_lengths(dataset) -> list[int] | None:
    """Tokens per row (len of input_ids) of a datasets.Dataset or a sequence of dicts; None if it has none."""
    try:
        if hasattr(dataset, "column_names"):
            if "input_ids" not in dataset.column_names:
                return None
            return [len(ids) for ids in dataset["input_ids"]]
        if len(dataset) and isinstance(dataset[0], Mapping) and "input_ids" in dataset[0]:
            return [len(dataset[i]["input_ids"]) for i in range(len(dataset))]
    except (TypeError, KeyError, IndexError):
        pass
    return None


class LengthGroupedSampler(torch.utils.data.Sampler):
    """Row order that groups similar lengths, like transformers' group_by_length, and exact under resume.

    Each epoch: a permutation from torch.Generator(seed + epoch) (nothing else, so a resumed run
    rebuilds the same order), cut into megabatches of `mega_batch_mult` global batches (batch_size x
    num_processes rows); each megabatch is sorted by length, longest first (stable), and cut into
    global batches, whose order is then shuffled by the same generator (a run of long-to-short
    batches would correlate the gradient with length over 50 steps; only a last, partial batch
    stays last, so that batch boundaries do not shift) with the longest batch first, so an
    out-of-memory shows on the first step. Accelerate then deals the consecutive batches to the
    processes (BatchSamplerShard): the batches of one step have similar lengths, every process
    gets disjoint rows, every row comes once per epoch.
    """

    def __init__(self, lengths: list[int], batch_size: int, num_processes: int = 1, seed: int = 0,
                 mega_batch_mult: int = 50):
        self.lengths = list(lengths)
        self.seed, self.epoch = seed, 0
        global_batch = batch_size * max(1, num_processes)
        self.global_batch = global_batch
        self.megabatch = global_batch * max(1, min(mega_batch_mult, len(self.lengths) // (4 * global_batch)))

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return len(self.lengths)

    def __iter__(self):
        generator = torch.Generator().manual_seed(self.seed + self.epoch)
        order = torch.randperm(len(self.lengths), generator=generator).tolist()
        megabatches = [sorted(order[i:i + self.megabatch], key=lambda row: -self.lengths[row])
                       for i in range(0, len(order), self.megabatch)]
        rows = [row for megabatch in megabatches for row in megabatch]
        size = self.global_batch
        batches = [rows[i:i + size] for i in range(0, len(rows) - len(rows) % size, size)]
        tail = rows[len(batches) * size:]
        batches = [batches[i] for i in torch.randperm(len(batches), generator=generator).tolist()]
        if len(batches) > 1:
            longest = max(range(len(batches)), key=lambda i: max(self.lengths[row] for row in batches[i]))
            batches[0], batches[longest] = batches[longest], batches[0]
        for batch in batches:
            yield from batch
        yield from tail


def accelerate_skip(loader, num_batches: int):
    """`accelerator.skip_first_batches`, keeping the epoch so that the shuffle order is the same."""
    from accelerate import skip_first_batches

    skipped = skip_first_batches(loader, num_batches)
    skipped.set_epoch(loader.iteration)
    return skipped


def remove_checkpoints(checkpoint_dir: str | Path) -> None:
    """Delete a stage's checkpoint directory once its artifact has landed (main process only)."""
    from accelerate import PartialState

    state = PartialState(cpu=not _cuda())
    state.wait_for_everyone()
    if state.is_main_process:
        shutil.rmtree(checkpoint_dir, ignore_errors=True)
    state.wait_for_everyone()


def checkpoint_dir_for(output_dir: str | Path) -> Path:
    """Where a stage writing `output_dir` keeps its checkpoints: the sibling `<output_dir>.ckpt`."""
    output_dir = Path(output_dir).expanduser().resolve()
    return output_dir.parent / (output_dir.name + ".ckpt")


def is_main_process() -> bool:
    """True on the process that writes artifacts (rank 0, or the only process)."""
    from accelerate import PartialState

    return PartialState(cpu=not _cuda()).is_main_process


def wait_for_everyone() -> None:
    from accelerate import PartialState

    PartialState(cpu=not _cuda()).wait_for_everyone()


def _cuda() -> bool:
    return torch.cuda.is_available()
