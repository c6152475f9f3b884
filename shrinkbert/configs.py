"""The frontier's options.

Only the options live here: no heavy import, so `shrinkbert STAGE --help` and the Python API's help
answer at once. The stage modules (shrinkbert/frontier.py) import their Config from here.
"""
from __future__ import annotations

from dataclasses import dataclass

from shrinkbert.core.config import field
from shrinkbert.core.configs import DataConfig


@dataclass
class FrontierConfig(DataConfig):
    teacher: str = field("", "fine-tuned teacher artifact", group="model")
    output_dir: str = field("runs/frontier", "where students, exports, frontier.md/.json/.png are written", group="output")
    speedups: str = field("2x,4x,8x,15x,25x", "speed-up targets against the teacher (PyTorch fp32, batch 1)")
    shapes: str = field("", "also distil these shapes as given (e.g. 3L/H128,2L/H160; heads and FFN follow the "
                            "teacher's ratios unless written /A4/F512), or students that are not transformers "
                            "(bilstm, cnn, bag; /H width, /L LSTM layers, /D token-vector width, e.g. bilstm/H150/D256; "
                            "on a pair task /align and /compose: --cross-attention, --composition), and measure them "
                            "in the same table")
    cuts: str = field("", "also make these shapes by cutting a wide student (e.g. 2L/H384/A6/F384): distil L layers "
                          "at width H with the teacher's heads and FFN, remove heads and FFN neurons down to A and F "
                          "(prune, the same count per layer), distil again; measured in the same table")
    seeds: int = field(3, "training seeds per target (0..N-1); retention is reported as mean ± sd", min=1)
    runtime: str = field("onnx-int8", "runtime the student ships in, on which its shape is picked",
                         choices=("torch", "onnx", "onnx-int8"))
    resume: bool = field(True, "reuse student/export/int8 artifacts already in the output folder")
    compare_to: str = field("teacher", "what every point's retention is compared with, paired on the test rows: "
                                       "teacher, or a point (a target such as 15x, or a shape such as 2L-H160)")
    pick: str = field("", "what the shipped student must meet, a batch-1 latency (0.2ms) or a speed-up over the "
                          "teacher in PyTorch fp32 (50x): the table names the point that meets it with the highest "
                          "mean retention over its seeds, transformer or not (empty: no pick)")
    # passed to every distillation
    epochs: float = field(3, "distillation epochs", min=0)
    max_steps: int = field(0, "distillation optimizer steps (0: from epochs)", min=0)
    batch_size: int = field(32, "distillation batch size", min=1)
    learning_rate: float = field(1e-4, "distillation peak learning rate", above=0)
    compact_learning_rate: float = field(2e-3, "the peak learning rate of students that are not transformers "
                                               "(--shapes bilstm, cnn, bag), which learn from their token vectors up",
                                         above=0)
    max_length: int = field(128, "tokens per row: training, timing (the sequence length of the targets) and eval",
                            min=8, max=8192)
    max_train_rows: int = field(0, "first N training rows (0: all)", min=0)
    max_eval_rows: int = field(0, "first N test rows for the table (0: all)", min=0)
    hidden_weight: float = field(0.0, "hidden-state KD weight", min=0)
    attention_weight: float = field(0.0, "attention KD weight", min=0)
    init_embeddings: str = field("auto", "the students' embedding init (distill --init-embeddings): auto (pca for a "
                                         "narrower student) | columns | pca | projected",
                                 choices=("auto", "columns", "pca", "projected"))
    mixed_precision: str = field("auto", "distill --mixed-precision: auto (bf16 on a CPU with bf16 instructions for "
                                         "students of hidden size 160 or more) | no | bf16 | fp16 (GPU)",
                                 choices=("auto", "no", "bf16", "fp16"))
    augment: int = field(0, "perturbed copies per training row in the transfer set", min=0)
    transfer_corpus: str = field("", "corpora for a teacher-labelled transfer set (e.g. imdb)")
    max_transfer_rows: int = field(0, "at most N transfer-corpus lines (0: all)", min=0)
    # timing
    threads: int = field(0, "threads for shape picking and timing (0: all cores)", min=0)
    runs: int = field(30, "timed runs per variant in the final measurement", min=1)
    warmup: int = field(5, "untimed runs first", min=0)
