"""The teacher stages' options: tokenizer, pretrain, finetune.

Only the options live here: no heavy import, so `shrinkbert STAGE --help` and the Python API's help
answer at once. The stage modules (teachers/tokenizer.py, pretrain.py, finetune.py) import their Config from here.
"""
from __future__ import annotations

from dataclasses import dataclass

from shrinkbert.core.config import field
from shrinkbert.core.configs import DataConfig, TrainConfig, max_length_field

PRESETS = {  # name -> BertConfig shape
    "bert-base": dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072),
    "bert-large": dict(hidden_size=1024, num_hidden_layers=24, num_attention_heads=16, intermediate_size=4096),
    "mini": dict(hidden_size=256, num_hidden_layers=4, num_attention_heads=4, intermediate_size=1024),
    "tiny": dict(hidden_size=128, num_hidden_layers=2, num_attention_heads=2, intermediate_size=512),
    "micro": dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64),  # smoke tests
}


@dataclass
class TokenizerConfig:
    output_dir: str = field("runs/tokenizer", "where the tokenizer artifact is written", group="output")
    corpus: list[str] = field(["sotu"], "built-in corpora (sotu, wordnet) and/or .txt files, comma-separated")
    max_train_rows: int = field(0, "use at most this many lines (rows) of text (0: all)", min=0)
    vocab_size: int = field(8000, "WordPiece vocabulary size, special tokens included", min=16)
    min_frequency: int = field(2, "a merge must be seen this often to enter the vocabulary", min=0)
    limit_alphabet: int = field(1000, "at most this many single characters in the vocabulary", min=1)
    lowercase: bool = field(True, "lower-case and strip accents (uncased BERT)")
    model_max_length: int = field(512, "longest input the tokenizer will produce when truncating", min=8)
    seed: int = field(0, "recorded for lineage; WordPiece training is deterministic", min=0)


@dataclass
class PretrainConfig(TrainConfig):
    output_dir: str = field("runs/mlm", "where the pretrained model artifact is written", group="output")
    model: str = field("", "continue from this model (dir, 'minilm' or hub name); empty: from scratch with preset", group="model")
    preset: str = field("tiny", "shape when training from scratch", choices=tuple(PRESETS))
    tokenizer: str = field("", "tokenizer dir (required from scratch; default: the model's own)")
    corpus: list[str] = field(["sotu"], "built-in corpora (sotu, wordnet, imdb, rotten-tomatoes, brown; all: every "
                                        "one) and/or .txt files, comma-separated")
    cache_dir: str = field("", "the shrinkbert cache (default $SHRINKBERT_CACHE or ~/.cache/shrinkbert): built-in "
                               "corpora and the reusable pretrained artifacts")
    reuse: str = field("auto", "reuse the artifact of an earlier run with the same config, models and text "
                               "(teachers/reuse.py) instead of training: on | off | auto (on for a student of "
                               "--teacher, off for continued or from-scratch runs, whose reruns check determinism)",
                       choices=("auto", "on", "off"))
    max_train_rows: int = field(0, "use at most this many lines (rows) of text (0: all)", min=0)
    max_length: int = field(128, "tokens per example, [CLS] and [SEP] included", min=8, max=8192)
    nsp: bool = field(False, "add next-sentence prediction (BertForPreTraining, sentence-pair examples)")
    masking: str = field("dynamic", "dynamic (new masks every batch) or static (masks fixed per example)", choices=("dynamic", "static"))
    mlm_probability: float = field(0.15, "fraction of tokens selected for prediction", above=0, max=1)
    head_warmup_steps: int = field(100, "continued runs: steps training only the new MLM head first", min=0)
    head_learning_rate: float = field(5e-4, "learning rate for the head warm-up", above=0)
    heldout_fraction: float = field(0.02, "fraction of the text held out to measure MLM loss", above=0, below=1)
    heldout_max_examples: int = field(512, "at most this many held-out examples", min=1)
    eval_batch_size: int = field(64, "batch size for the held-out loss", min=1)
    learning_rate: float = field(1e-4, "peak learning rate (AdamW)", above=0)
    epochs: float = field(1, "passes over the training text", min=0)
    checkpoint_every: int = field(500, "save a resumable checkpoint every N optimizer steps (0: never)", min=0)
    # A student of a teacher (teachers/pretrain_student.py)
    teacher: str = field("", "pretrain a new student of this teacher: its tokenizer, its widths for the shape "
                             "fields left 0, its sliced weights (--init teacher)", group="student")
    layers: int = field(0, "student layers (0: the teacher's)", min=0, group="student")
    hidden: int = field(0, "student hidden size (0: the teacher's)", min=0, group="student")
    heads: int = field(0, "student attention heads (0: hidden / the teacher's head size)", min=0, group="student")
    intermediate: int = field(0, "student FFN width (0: the teacher's FFN/hidden ratio)", min=0, group="student")
    init: str = field("teacher", "teacher: start from the teacher's slices (as distill does) | random",
                      choices=("teacher", "random"), group="student")
    init_layers: str = field("", "teacher layers (1-based) the student layers start from (default: uniform)",
                             group="student")
    init_embeddings: str = field("columns", "the student's residual stream: columns (largest-norm dims) | pca "
                                            "(top principal components of the teacher's embeddings)",
                                 choices=("columns", "pca"), group="student")
    mlm_weight: float = field(1.0, "weight of the MLM loss (cross-entropy with the masked tokens)", min=0, group="student")
    kd_weight: float = field(0.0, "weight of MLM-KD: KL to an MLM teacher's softened predictions at the masked "
                                  "tokens (0 = off)", min=0, group="student")
    kd_teacher: str = field("", "the MLM-KD teacher (an MLM model, e.g. the teacher's domain-MLM parent); "
                                "empty: --teacher", group="student")
    temperature: float = field(2.0, "softmax temperature of MLM-KD", above=0, group="student")


@dataclass
class FinetuneConfig(TrainConfig, DataConfig):
    output_dir: str = field("runs/teacher", "where the fine-tuned classifier artifact is written", group="output")
    model: str = field("minilm", "starting model: a model dir, an MLM artifact, 'minilm', or a hub name", group="model")
    tokenizer: str = field("", "tokenizer dir (default: the model's own)")
    max_train_rows: int = field(0, "train on the first N rows of the train split only (0: all)", min=0)
    max_eval_rows: int = field(0, "validate and test on the first N rows of those splits only (0: all)", min=0)
    max_length: int | None = max_length_field()
    doc_stride: int = field(0, "QA: tokens neighbouring windows share (run_qa's name; 0: 128 at max_length 384, in proportion otherwise)", min=0)
    eval_batch_size: int = field(64, "batch size for validation and test", min=1)
    keep: str = field("best", "best (the epoch with the best validation score: accuracy, or entity F1 for NER) or final",
                      choices=("best", "final"))
    label_all_subtokens: bool = field(False, "token tasks: train on every sub-token of a word, not only its first")
    learning_rate: float = field(1e-4, "peak learning rate (AdamW); MiniLM likes 1e-4, BERT-base 2e-5 to 5e-5", above=0)
    batch_size: int = field(32, "examples per batch per process", min=1)
    epochs: float = field(3, "passes over the training data", min=0)
    mode: str = field("classifier", "what to train: 'classifier' (a head for the task's labels) or 'embeddings' (a "
                                    "sentence-embedding model: CosineSimilarityLoss on scored pairs, "
                                    "in-batch negatives (MultipleNegativesRankingLoss's form) on an NLI task's "
                                    "entailment pairs, judged by triplet accuracy)", choices=("classifier", "embeddings"))
