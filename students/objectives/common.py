"""The options more than one objective reads, each declared once (`core.config.field`).

An objective's options dataclass inherits the groups below that it reads; the distill stage's Config
(students/configs.py) is the union of every objective's. Only options live here: no heavy import, so
`shrinkbert distill --help` answers at once.
"""
from __future__ import annotations

from dataclasses import dataclass

from shrinkbert.core.config import field
from shrinkbert.core.configs import DataConfig, TrainConfig, max_length_field

# the objectives by name, as --objective takes them (students/objectives/__init__.py maps each to its module)
OBJECTIVE_NAMES = ("logits", "masked-lm", "vectors", "static", "drop-in")


@dataclass
class StudentOptions(TrainConfig, DataConfig):
    """What every objective reads: the teacher, the student, the data and the training loop."""
    teacher: str = field("", "teacher artifact directory (a fine-tuned classifier; an MLM model for --objective "
                             "masked-lm); a distilled student works too (a teacher assistant); several, "
                             "comma-separated: an ensemble whose soft labels are averaged (students/ensemble.py)",
                         group="model")
    student: str = field("", "distil INTO this existing model (a pruned one, or a pretrained one of any family "
                             "that splits text into the teacher's pieces: minilm for an mpnet teacher, re-indexed to "
                             "its ids) instead of a new shape; also 'static' for model2vec's static student "
                             "(--objective static; a narrower pretrained one gets a least-squares projection to the "
                             "teacher's width); or a new student that is not a transformer (--objective logits): "
                             "bilstm, cnn or bag (token vectors and an MLP head)", group="model")
    objective: str = field("auto", "how the student is taught (students/objectives/): logits (soft logits, hidden "
                                   "states and attentions on the task's rows) | masked-lm (MLM distillation on raw "
                                   "--corpus text) | vectors (a sentence-embedding student learns the teacher's "
                                   "sentence vectors of --corpus, the teacher read as a sentence-transformers "
                                   "model, e.g. minilm) | static (model2vec's static student) | drop-in (a query "
                                   "encoder for the teacher's index of --corpus's documents: its ranking of them); auto: from the "
                                   "teacher's kind (an embedding teacher: vectors; --student static: static; a "
                                   "classifier, tagger or QA teacher: logits)",
                           choices=("auto", *OBJECTIVE_NAMES), group="model")
    max_train_rows: int = field(0, "use only the first N training rows/lines (0: all)", min=0, group="data")
    max_eval_rows: int = field(0, "evaluate on only the first N test rows (0: all)", min=0, group="data")
    max_length: int | None = max_length_field(group="data")
    output_dir: str = field("runs/student", "where the student artifact is written", group="output")
    learning_rate: float = field(1e-4, "peak learning rate (AdamW)", above=0, group="training loop")


@dataclass
class CorpusOptions:
    """Raw text to distil on (masked-lm, vectors, static)."""
    corpus: str = field("", "objectives masked-lm, vectors and static: comma-separated corpora (imdb, brown, sotu, "
                            "wordnet, .txt files, .csv files: their text columns, SQuAD .json files: the questions "
                            "of the training half of their articles); drop-in: the index's documents (.jsonl "
                            "with text and optional queries and title, SQuAD files: the training half's paragraphs "
                            "and their questions, or any of the above: a document a line)", group="data")


@dataclass
class SampledCorpusOptions(CorpusOptions):
    """How the lines of several corpora are sampled (vectors, static)."""
    corpus_mix: str = field("pooled", "objectives vectors and static, with --max-train-rows: pooled (a sample of all "
                                      "--corpus lines together, so a large corpus dominates) | equal (an equal share "
                                      "from each corpus)", choices=("pooled", "equal"), group="data")


@dataclass
class ShapeOptions:
    """A new transformer student's shape (logits, masked-lm, vectors)."""
    target: str = field("", "size target: 25% (of the teacher's parameters), 20MB (fp32 file), 4ms (batch-1 "
                            "latency at max_length on --latency-runtime) or 10x (that latency at most the teacher's "
                            "own there / 10; the teacher is timed once); explicit shape fields below pin dimensions",
                        group="student shape")
    layers: int = field(0, "student layers (0: from the target, else the teacher's)", min=0, group="student shape")
    hidden: int = field(0, "student hidden size (0: from the target, else the teacher's)", min=0, group="student shape")
    heads: int = field(0, "student attention heads (0: hidden / the teacher's head size)", min=0, group="student shape")
    intermediate: int = field(0, "student FFN width (0: the teacher's FFN/hidden ratio)", min=0, group="student shape")


@dataclass
class VectorWidthOptions:
    """The width of an embedding student's vectors (vectors, static)."""
    dim: int = field(0, "objectives vectors and static: the student's own vector width (PCA of the teacher's; "
                        "static default 256); 0: the teacher's vector space (a drop-in for its index)", min=0,
                     group="student shape")


@dataclass
class HiddenLossOptions:
    """The hidden-state loss (logits, masked-lm, vectors)."""
    hidden_weight: float = field(0.0, "weight of hidden-state MSE (projected when widths differ); 0 = off", min=0,
                                 group="losses")
