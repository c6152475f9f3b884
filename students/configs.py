"""The distill stage's options.

Only the options live here: no heavy import, so `shrinkbert STAGE --help` and the Python API's help
answer at once. The stage modules (students/distill.py) import their Config from here.
"""
from __future__ import annotations

from dataclasses import dataclass

from shrinkbert.core.config import field
from shrinkbert.core.configs import DataConfig, TrainConfig

# the drop-in term's bank (--drop-in-weight): enough of the teacher's vectors that a text's nearest
# neighbours in it are near ones (4,096 x 384 floats: 6 MB, and a 32 x 4,096 product a step)
DROP_IN_INDEX_ROWS = 4096

# The options only an embedding student reads (students/distill_vectors.py): the other modes refuse them
EMBEDDING_ONLY_OPTIONS = frozenset({"corpus_mix", "query_pull", "similarity_weight", "drop_in_weight", "keep_by"})


@dataclass
class DistillConfig(TrainConfig, DataConfig):
    teacher: str = field("", "teacher artifact directory (a fine-tuned classifier; an MLM model for mode general); a "
                             "distilled student works too (a teacher assistant); several, comma-separated: an "
                             "ensemble whose soft labels are averaged (students/ensemble.py)", group="model")
    mode: str = field("task", "task: distil on labelled data | general: MLM distillation on raw text | embeddings: "
                              "a sentence-embedding student learns the teacher's sentence vectors of --corpus (the "
                              "teacher read as a sentence-transformers model, e.g. minilm; students/distill_vectors.py)",
                      choices=("task", "general", "embeddings"), group="data")
    corpus: str = field("", "mode general/embeddings: comma-separated corpora (imdb, brown, sotu, wordnet, .txt files, "
                            ".csv files: their text columns, SQuAD .json files: the questions of the training half of "
                            "their articles)", group="data")
    corpus_mix: str = field("pooled", "mode embeddings, with --max-train-rows: pooled (a sample of all --corpus lines "
                                      "together, so a large corpus dominates) | equal (an equal share from each corpus)",
                            choices=("pooled", "equal"), group="data")
    mlm_probability: float = field(0.15, "mode general: share of tokens masked", above=0, max=1, group="data")
    max_train_rows: int = field(0, "use only the first N training rows/lines (0: all)", min=0, group="data")
    max_eval_rows: int = field(0, "evaluate on only the first N test rows (0: all)", min=0, group="data")
    augment: int = field(0, "mode task: add up to N perturbed copies of each training text (masking + n-gram "
                            "sampling), labelled by the teacher alone (students/augment.py); 0 = off", min=0, group="data")
    transfer_corpus: str = field("", "mode task: corpora (imdb, rotten-tomatoes, sotu, wordnet, .txt files) whose "
                                     "lines join the training set unlabelled, taught by the teacher's soft logits "
                                     "alone (TinyBERT's transfer set); the task's validation/test rows and "
                                     "near-duplicates are removed (core/data/leakguard.py)", group="data")
    small_data: str = field("auto", "mode task, a sentence (pair) task below 5,000 training rows: 'auto' switches on what small-data "
                                    "distillation relies on and you did not set (--augment 8 teacher-labelled "
                                    "copies of each row; --hidden-weight 1), recorded in the manifest; 'off' "
                                    "distils on the options as given", choices=("auto", "off"), group="data")
    max_transfer_rows: int = field(0, "at most N transfer-corpus lines: a fixed sample, the same for every --seed, "
                                      "so the teacher's pass over them is cached once (0: all)", min=0, group="data")
    output_dir: str = field("runs/student", "where the student artifact is written", group="output")
    # The student
    target: str = field("", "size target: 25% (of the teacher's parameters), 20MB (fp32 file), 4ms (batch-1 "
                            "latency at max_length on --latency-runtime) or 10x (that latency at most the teacher's "
                            "own there / 10; the teacher is timed once); explicit shape fields below pin dimensions",
                        group="student shape")
    layers: int = field(0, "student layers (0: from the target, else the teacher's)", min=0, group="student shape")
    hidden: int = field(0, "student hidden size (0: from the target, else the teacher's)", min=0, group="student shape")
    heads: int = field(0, "student attention heads (0: hidden / the teacher's head size)", min=0, group="student shape")
    intermediate: int = field(0, "student FFN width (0: the teacher's FFN/hidden ratio)", min=0, group="student shape")
    student: str = field("", "distil INTO this existing model (a pruned one, or a pretrained one of any family "
                             "that splits text into the teacher's pieces: minilm for an mpnet teacher, re-indexed to "
                             "its ids) instead of a new shape; mode embeddings: also 'static' for model2vec's static "
                             "student (a narrower pretrained one gets a least-squares projection to the teacher's "
                             "width)", group="model")
    dim: int = field(0, "mode embeddings: the student's own vector width (PCA of the teacher's; static default 256); "
                        "0: the teacher's vector space (a drop-in for its index)", min=0, group="student shape")
    init: str = field("teacher", "teacher: start from (sliced) teacher weights | random", choices=("teacher", "random"), group="student shape")
    init_layers: str = field("", "teacher layers (1-based) the student layers start from, e.g. 2,4,6 (default: uniform)", group="student shape")
    init_embeddings: str = field("auto", "the student's residual stream from the teacher's: auto (pca for a student "
                                         "narrower than its teacher, where it keeps more of the teacher (bench/plateau.py), "
                                         "columns otherwise) | columns (the dims --init-keep picks) | pca (the "
                                         "top principal components of the teacher's embedding table) | projected (pca, "
                                         "then the teacher's table through a learned projection, folded into a plain "
                                         "table when saved)",
                                 choices=("auto", "columns", "pca", "projected"), group="student shape")
    init_keep: str = field("norm", "which dims to keep when narrower: norm (largest weights) | first", choices=("norm", "first"), group="student shape")
    freeze_embeddings: bool = field(False, "keep the student's word-embedding table as it starts (the teacher's rows, "
                                           "sliced): only its layers, heads and small embeddings learn. Each step is "
                                           "faster (the largest table gets no gradient), for a little accuracy or "
                                           "none; bench/edge_arms.py compares the two",
                                    group="student shape")
    dropout: float | None = field(None, "dropout probability in the student while it distils, every dropout its family "
                                        "has (hidden states, attention, classifier); the saved config keeps the "
                                        "family's (empty: the student's own, 0.1 for BERT)", min=0, below=1,
                                  group="student shape")
    threads: int = field(0, "threads for a latency target's timing (0: all cores)", min=0, group="student shape")
    latency_runtime: str = field("torch", "runtime a latency target is timed on: torch (PyTorch fp32), onnx (fp32 ONNX "
                                          "Runtime) or onnx-int8 (dynamic int8 with this CPU's defaults): pick the "
                                          "one the student ships in", choices=("torch", "onnx", "onnx-int8"), group="student shape")
    # The losses
    layer_map: str = field("", "student:teacher layers for hidden/attention losses, e.g. 1:2,2:4,3:6 (0 = "
                               "embeddings); default uniform: student i <- teacher round(i*T/S)", group="losses")
    logits_weight: float = field(1.0, "weight of soft-logit KD (KL, T^2-scaled); 0 = off", min=0, group="losses")
    hidden_weight: float = field(0.0, "weight of hidden-state MSE (projected when widths differ); 0 = off", min=0, group="losses")
    attention_weight: float = field(0.0, "weight of attention-probability transfer; 0 = off", min=0, group="losses")
    embedding_weight: float = field(0.0, "weight of embedding-output MSE; 0 = off", min=0, group="losses")
    hard_weight: float = field(0.0, "weight of cross-entropy with the gold labels; 0 = off", min=0, group="losses")
    temperature: float = field(2.0, "softmax temperature of the logit KD", above=0, group="losses")
    query_pull: float = field(0.0, "mode embeddings: for each question of a SQuAD --corpus file, the share of its target "
                                   "taken from the teacher's vector of its gold paragraph (the student's query moves "
                                   "towards the document a teacher-built index holds for it); 0 = off", min=0, max=1,
                              group="losses")
    similarity_weight: float = field(0.0, "mode embeddings: weight of the MSE between the batch's cosine-similarity "
                                          "matrices, the student's against the teacher's (relational KD); 0 = off",
                                     min=0, group="losses")
    drop_in_weight: float = field(0.0, "mode embeddings: weight of the KL between the teacher's and the student's "
                                       "softmax over cosines with a bank of the teacher's vectors of "
                                       f"{DROP_IN_INDEX_ROWS:,} training sentences (each student vector ranks a "
                                       "teacher-built index as the teacher's does: for drop-in queries); 0 = off",
                                 min=0, group="losses")
    keep_by: str = field("validation+agreement", "mode embeddings with a scored-pairs --task: what picks the epoch kept: "
                                                 "validation+agreement (STS validation Spearman + 100 x mean cosine with "
                                                 "the teacher on unseen lines: for a drop-in encoder of a teacher-built "
                                                 "index) | validation (the Spearman alone: for a student scored on "
                                                 "similarity, e.g. with --similarity-weight)",
                         choices=("validation+agreement", "validation"), group="losses")
    attention_loss: str = field("kl", "kl | mse between attention probabilities", choices=("kl", "mse"), group="losses")
    # Teacher outputs
    cache: bool = field(True, "cache the teacher's outputs on disk and reuse them across runs", group="teacher outputs")
    cache_hidden: bool = field(True, "also cache the hidden states and attention maps the losses need (fp16, "
                                     "real tokens only); off: the teacher runs live for those losses", group="teacher outputs")
    max_length: int | None = field(None, "tokens per example (and the sequence length of a latency target; "
                                         "empty: the task kind's default, 128; 384 for QA)", min=8, max=8192, group="data")
    doc_stride: int = field(0, "QA: tokens neighbouring windows share (run_qa's name; 0: 128 at max_length 384, "
                               "in proportion otherwise)", min=0, group="data")
    eval_batch_size: int = field(64, "batch size for the teacher pass and the test evaluation", min=1, group="training loop")
    learning_rate: float = field(1e-4, "peak learning rate (AdamW)", above=0, group="training loop")
