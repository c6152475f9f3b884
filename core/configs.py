"""The options every stage shares: the training loop's (TrainConfig) and the data's (DataConfig).

Like each room's configs.py, this module imports nothing heavy: `shrinkbert STAGE --help` and the
Python API's help are built from these classes without torch, datasets or scikit-learn.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from shrinkbert.core.catalogue import BUILTIN_TASK_SPECS
from shrinkbert.core.config import field
from shrinkbert.core.errors import ShrinkbertError


MAX_LENGTH_HELP = ("tokens per row, as every stage and the bundle read it (training, checks, the latency target, "
                   "truncation); longer inputs are truncated (empty: the parent artifact's, else the task kind's "
                   "default: 128, 384 for QA)")


def max_length_field(**kwargs: Any) -> Any:
    """The one declaration of --max-length: each stage's config holds `max_length: int | None = max_length_field()`.
    The stage resolves it (flag, else parent, else kind) into a copy of the config and the manifest's "resolved"
    record; the config the user passed, and its record in the manifest, keep what was given."""
    return field(None, MAX_LENGTH_HELP, min=8, max=8192, **kwargs)


@dataclass
class TrainConfig:
    """Training knobs. Stage configs inherit these, so every stage has the same flat flags."""
    OPTION_GROUP = "training loop"  # the --help section these fields are listed in (core.config.declared_group)
    learning_rate: float = field(5e-5, "peak learning rate (AdamW)", above=0)
    weight_decay: float = field(0.01, "AdamW weight decay (not applied to biases and LayerNorm weights)", min=0)
    warmup_ratio: float = field(0.1, "fraction of optimizer steps spent warming up linearly", min=0, below=1)
    warmup_steps: int = field(0, "warmup steps; overrides warmup_ratio when > 0", min=0)
    lr_schedule: str = field("linear", "learning rate after warmup: linear (decay to 0, BERT's) or constant "
                                       "(the static student's table tuning)", choices=("linear", "constant"))
    epochs: float = field(3, "passes over the training data", min=0)
    max_steps: int = field(0, "optimizer steps to run; overrides epochs when > 0", min=0)
    batch_size: int = field(32, "examples per batch per process", min=1)
    grad_accum_steps: int = field(1, "micro-batches accumulated per optimizer step", min=1)
    max_grad_norm: float = field(1.0, "clip the gradient norm to this (0: no clipping)", min=0)
    mixed_precision: str = field("auto", "auto | no | bf16 | fp16. auto: bf16 autocast on a CPU with bf16 instructions "
                                         "(avx512_bf16, amx_bf16) for models of hidden size 160 or more, where it runs "
                                         "faster at the same accuracy; fp32 elsewhere, GPUs included. bf16: on a GPU "
                                         "that supports it or a CPU with bf16 instructions; fp16: GPU only. distill's "
                                         "cached teacher outputs run in the same precision (auto: by the teacher's "
                                         "width). Set no to train in fp32 everywhere",
                                 choices=("auto", "no", "bf16", "fp16"))
    torch_compile: bool = field(False, "torch.compile the encoder in place (nn.Module.compile, inductor): faster steps for "
                                       "a base-sized model on a GPU once compiled (a minute or so); off by default, "
                                       "as a small model or a CPU rarely repays the compile")
    checkpoint_every: int = field(200, "save a resumable checkpoint every N optimizer steps (0: never)", min=0)
    resume: bool = field(True, "resume from the checkpoint directory when it holds a checkpoint")
    log_every: int = field(10, "log loss, learning rate and tokens/s every N optimizer steps", min=1)
    log_with: str = field("", "Accelerate trackers, comma-separated (tensorboard, wandb, ...); empty: none")
    seed: int = field(0, "seed for initialisation, shuffling, dropout and masking", min=0, below=2**32)
    num_workers: int = field(0, "dataloader worker processes", min=0)
    group_by_length: bool = field(True, "batch rows of similar length together (megabatches shuffled per epoch, "
                                        "sorted within), so dynamic padding pads little")

    def check(self) -> None:
        """Constraints between fields, checked where configs are parsed (core.config.build_config)."""
        if not self.epochs > 0 and not self.max_steps > 0:
            raise ShrinkbertError(f"nothing to train: epochs ({self.epochs:g}) and max_steps ({self.max_steps}) "
                                  "are both 0; set one of them above 0")


@dataclass
class DataConfig:
    """The data fields every stage shares; empty means "what the parent artifact was made on"."""
    OPTION_GROUP = "data"  # the --help section these fields are listed in (core.config.declared_group)
    task: str = field("", f"built-in task ({', '.join(BUILTIN_TASK_SPECS)}) or a data file/dir (.csv .tsv .jsonl .json "
                          ".parquet; .conll/.txt for token tags), or a dataset name (squad, sentence-transformers/stsb, "
                          "NAME:SPLIT) found in the folders of $SHRINKBERT_DATA, else on the hub; "
                          "empty: the task the parent artifact was made on")
    text_column: str = field("", "column holding the text, or a token task's word lists (user files; empty: "
                                 "inherited, else 'text', or 'tokens' where the file has it)")
    text_pair_column: str = field("", "column holding a pair's second text (user files; empty: inherited, else none)")
    label_column: str = field("", "column holding the label, or a token task's tag lists (user files; CoNLL: the "
                                  "tag field's 0-based index, default the last; empty: inherited, else 'label')")
    split_seed: int | None = field(None, "seed that fixes the stored train/validation/test split, independent of "
                                         "--seed (empty: inherited, else 0)")
    tsv_quoting: bool | None = field(None, "read a .tsv file's \" as CSV quoting (default: no quote processing, "
                                           "as GLUE's files are written; empty: inherited, else off)")
    cache_dir: str = field("", "shrinkbert's cache: downloads, stored splits, tokenized splits, teacher outputs "
                               "(default: $SHRINKBERT_CACHE or ~/.cache/shrinkbert)")
