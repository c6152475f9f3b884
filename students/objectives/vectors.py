"""The vectors objective: a sentence-embedding student learns its teacher's sentence vectors of unlabelled
text, so an index built with the teacher still answers the student's queries.

    shrinkbert distill --objective vectors --teacher minilm --corpus imdb,brown,wordnet --layers 3
    shrinkbert distill --objective vectors --teacher minilm --corpus imdb --student runs/emb-pruned  # recovery

- Reads from the teacher: its sentence vectors of the --corpus lines, the teacher read as a
  sentence-transformers model (its pooling and normalisation from its own files, core/kinds/embedder.py), so
  all-MiniLM-L6-v2 works as it ships; cached by content (students/embedding_distill.py). With
  --hidden-weight at the teacher's width, also its hidden states (the teacher then runs live).
- Loss terms: MSE + cosine to the teacher's vectors (core/kinds/losses.py), the hidden-state MSE, and
  the weighted terms below (`term`): each one function here and its weight field in VectorsOptions.
- Hands the trainer (core/train.py, through students/embedding_distill.py): the student (a smaller
  transformer of the teacher's family, `--student PATH` as it is, or a pretrained one that splits text
  into the teacher's pieces, re-indexed to its ids: students/vocab_map.py), the tokenized lines with
  their targets, and the loss mix. A `--task` of scored pairs (STS-B's shape) picks the epoch kept and is
  recorded for later stages; no sentence of its validation or test pairs is trained on.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from shrinkbert.core.config import field
from shrinkbert.core.errors import ShrinkbertError
from shrinkbert.students.objectives.common import (HiddenLossOptions, SampledCorpusOptions, ShapeOptions,
                                                   StudentOptions, VectorWidthOptions)

# the drop-in term's bank (--drop-in-weight): enough of the teacher's vectors that a text's nearest
# neighbours in it are near ones (4,096 x 384 floats: 6 MB, and a 32 x 4,096 product a step)
DROP_IN_INDEX_ROWS = 4096
DEFAULT_LAYERS = 3  # half of MiniLM's 6 layers: the shape bench/embedding_student.py measures


@dataclass
class VectorsOptions(ShapeOptions, HiddenLossOptions, SampledCorpusOptions, VectorWidthOptions, StudentOptions):
    """--objective vectors: the teacher's sentence vectors of --corpus."""
    query_pull: float = field(0.0, "for each question of a SQuAD --corpus file, the share of its target taken from "
                                   "the teacher's vector of its gold paragraph (the student's query moves towards "
                                   "the document a teacher-built index holds for it); 0 = off", min=0, max=1,
                              group="losses")
    similarity_weight: float = field(0.0, "weight of the MSE between the batch's cosine-similarity matrices, the "
                                          "student's against the teacher's (relational KD); 0 = off",
                                     min=0, group="losses")
    drop_in_weight: float = field(0.0, "weight of the KL between the teacher's and the student's softmax over "
                                       "cosines with a bank of the teacher's vectors of "
                                       f"{DROP_IN_INDEX_ROWS:,} training sentences (each student vector ranks a "
                                       "teacher-built index as the teacher's does: for drop-in queries); 0 = off",
                                 min=0, group="losses")
    keep_by: str = field("validation+agreement", "with a scored-pairs --task: what picks the epoch kept: "
                                                 "validation+agreement (STS validation Spearman + 100 x mean cosine with "
                                                 "the teacher on unseen lines: for a drop-in encoder of a teacher-built "
                                                 "index) | validation (the Spearman alone: for a student scored on "
                                                 "similarity, e.g. with --similarity-weight)",
                         choices=("validation+agreement", "validation"), group="losses")


NAME = "vectors"  # --objective vectors
Options = VectorsOptions


# ---------------------------------------------------------------------------------------------
# The weighted loss terms. A term is a factory: given the training targets (the teacher's vectors, one
# row per sentence) and the seed, it returns term(student_vectors, batch) -> a scalar tensor (the batch's
# "target": the teacher's vectors of its rows; "row": their numbers),
# added to the loss times its weight (a field of VectorsOptions, 0 = off and not computed), in the
# order registered, and logged as `<name>_loss`.

TERMS: dict[str, Callable] = {}  # weight field -> term factory


def term(weight: str):
    """Register a loss term of the vectors objective under its weight field."""
    def register(factory: Callable) -> Callable:
        TERMS[weight] = factory
        return factory
    return register


@term("similarity_weight")
def similarity(targets, seed: int):
    """The batch's cosine-similarity matrix, the student's against the teacher's (relational KD)."""
    from shrinkbert.core.kinds.losses import similarity_matrix_loss

    return lambda vectors, batch: similarity_matrix_loss(vectors, batch["target"])


@term("drop_in_weight")
def drop_in(targets, seed: int):
    """Each student vector ranks a fixed bank of the teacher's vectors (a sample of the training
    sentences') as the teacher's vector of the same text does."""
    import numpy as np
    import torch

    from shrinkbert.core.kinds.losses import index_ranking_loss

    sample = np.random.default_rng(seed).permutation(len(targets))[:DROP_IN_INDEX_ROWS]
    bank = torch.from_numpy(targets[np.sort(sample)])

    def ranking(vectors, batch):
        nonlocal bank
        bank = bank.to(vectors.device)  # once: a no-op from the second step on
        return index_ranking_loss(vectors, batch["target"], bank)
    return ranking


def weighted_terms(cfg) -> dict[str, tuple[float, Callable]]:
    """{weight field: (its value in cfg, the term's factory)} for every registered term."""
    return {weight: (getattr(cfg, weight), factory) for weight, factory in TERMS.items()}


def run(cfg) -> Path:
    """Distil an embedding student as the distill stage's Config asks; return its artifact path."""
    # deferred: --help and the generated API read this module's options without torch
    from shrinkbert.core.builtin import resolve_model
    from shrinkbert.core.data.dataspec import resolve_max_length
    from shrinkbert.core.kinds import kind_for_mode
    from shrinkbert.students.corpus_lines import query_goals, training_lines
    from shrinkbert.students.embedding_distill import EmbeddingStudentConfig, distill_embedding

    if "," in cfg.teacher:
        raise ShrinkbertError("an embedding student learns from one teacher: give one --teacher")
    cfg, _ = resolve_max_length(cfg, kind_for_mode("embeddings"), [cfg.teacher])
    teacher = resolve_model(cfg.teacher)
    if cfg.target:
        raise ShrinkbertError("--target is not supported for embedding students yet: give --layers/--hidden/"
                              "--intermediate (and --dim)")
    into = cfg.student or None  # recovery of a pruned model, or a pretrained student
    if into is not None and (cfg.layers or cfg.hidden or cfg.heads or cfg.intermediate or cfg.dim):
        raise ShrinkbertError(f"--student {cfg.student} is distilled into as it is: drop --layers/--hidden/--heads/"
                              "--intermediate/--dim")
    sentences, unseen, validation, data_record = training_lines(cfg, teacher)
    config = EmbeddingStudentConfig(
        layers=cfg.layers or DEFAULT_LAYERS, hidden=cfg.hidden or None, heads=cfg.heads or None,
        intermediate=cfg.intermediate or None, dim=cfg.dim or None, epochs=max(1, int(round(cfg.epochs))),
        lr=cfg.learning_rate, batch_size=cfg.batch_size, max_length=cfg.max_length, seed=cfg.seed,
        hidden_weight=cfg.hidden_weight, keep_by=cfg.keep_by)
    out = distill_embedding(teacher, sentences, cfg.output_dir, config, validation=validation,
                            cache_dir=cfg.cache_dir or None, data=data_record, student_path=into, loop=cfg,
                            goals=query_goals(cfg, sentences), pull=cfg.query_pull, unseen=unseen,
                            terms=weighted_terms(cfg))
    return Path(out)
