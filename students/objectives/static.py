"""The static objective: model2vec's static student, a table of one vector per token, made from the
teacher and tuned to its sentence vectors of the --corpus lines.

    shrinkbert distill --teacher minilm --corpus imdb --student static --dim 256

- Reads from the teacher: its vector of every token of its vocabulary (reduced by PCA to --dim), then
  its sentence vectors of the --corpus lines (cached by content, students/embedding_distill.py).
- Loss term: 1 - cosine between the mean of a sentence's token vectors and the teacher's vector of it
  (students/static.py).
- Hands the trainer (core/train.py): the table as an EmbeddingBag, with an optimizer of its own (Adam at
  a constant rate, no decay, warmup or clipping: `OWN_OPTIMIZER`) and batches of 64 unless --batch-size
  says otherwise; the loop's other options (epochs, seed, checkpoints, resume) as given. A `--task` of
  scored pairs picks the epoch kept.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from shrinkbert.core.config import options, refuse_options
from shrinkbert.core.errors import ShrinkbertError
from shrinkbert.students.objectives.common import SampledCorpusOptions, StudentOptions, VectorWidthOptions

STATIC = "static"  # --student static
STATIC_BATCH_SIZE = 64
# The loop settings the static table's optimizer fixes: a set value of any of them would be ignored,
# so it is refused (`refuse_fixed`); torch_compile: a lookup table has nothing to compile.
OWN_OPTIMIZER = {"learning_rate": 1e-3, "weight_decay": 0.0, "warmup_ratio": 0.0, "warmup_steps": 0,
                 "lr_schedule": "constant", "max_grad_norm": 0.0, "torch_compile": False}


@dataclass
class StaticOptions(SampledCorpusOptions, VectorWidthOptions, StudentOptions):
    """--objective static: a token-vector table tuned on --corpus."""


NAME = "static"  # --objective static
Options = StaticOptions


def refuse_fixed(cfg) -> None:
    """Refuse, in one line, the loop settings set away from their defaults that `OWN_OPTIMIZER` fixes."""
    defaults = {o.name: o.default for o in options(type(cfg))}
    refuse_options([name for name in OWN_OPTIMIZER if getattr(cfg, name) != defaults[name]],
                   "by the static objective (its table has an optimizer of its own and nothing to compile)")


def run(cfg) -> Path:
    """Distil a static embedding student as the distill stage's Config asks; return its artifact path."""
    # deferred: --help and the generated API read this module's options without torch
    from shrinkbert.core.builtin import resolve_model
    from shrinkbert.core.data.dataspec import resolve_max_length
    from shrinkbert.core.kinds import kind_for_mode
    from shrinkbert.students.corpus_lines import training_lines

    refuse_fixed(cfg)
    if "," in cfg.teacher:
        raise ShrinkbertError("an embedding student learns from one teacher: give one --teacher")
    cfg, _ = resolve_max_length(cfg, kind_for_mode("embeddings"), [cfg.teacher])
    teacher = resolve_model(cfg.teacher)
    sentences, _, validation, data_record = training_lines(cfg, teacher)
    return tune(cfg, teacher, sentences, validation, data_record)


def tune(cfg, teacher: str, sentences: list[str], validation, data_record: dict) -> Path:
    """model2vec's static table from the teacher, tuned on the corpus in the kit's training loop; with
    validation pairs the best epoch (the untuned table, epoch 0, included) is kept, beside the
    checkpoints so a resumed run keeps it too."""
    import json
    import shutil

    import numpy as np

    from shrinkbert.core.artifacts import atomic_artifact, check, write_manifest
    from shrinkbert.core.kinds.embedder import Embedder
    from shrinkbert.core.kinds.sts import sts_spearman
    from shrinkbert.core.train import LATEST, checkpoint_dir_for, remove_checkpoints
    from shrinkbert.students.embedding_distill import teacher_vectors
    from shrinkbert.students.static import StaticEmbedder

    dim = cfg.dim or 256
    embedder = Embedder.load(teacher, max_length=cfg.max_length)
    if dim > embedder.dim:
        raise ShrinkbertError(f"--dim {dim} exceeds the teacher's {embedder.dim} dimensions")
    student = StaticEmbedder.distill(teacher, dim=dim)
    checkpoints = checkpoint_dir_for(cfg.output_dir)
    best_dir = checkpoints / "best"
    if not cfg.resume or not (checkpoints / "run" / LATEST).is_file():
        shutil.rmtree(best_dir, ignore_errors=True)

    def keep_best(epoch, tuned) -> dict:
        if validation is None:  # no pairs to judge by: the last epoch
            return {}
        score = sts_spearman(tuned.encode, validation)
        saved = best_dir / "score.json"
        if not saved.is_file() or score > json.loads(saved.read_text())["score"]:
            best_dir.mkdir(parents=True, exist_ok=True)
            np.save(best_dir / "vectors.npy", tuned.vectors)
            saved.write_text(json.dumps({"score": score}))
        return {"validation_spearman": score}

    if not (best_dir / "score.json").is_file():
        keep_best(0, student)
    vectors = teacher_vectors(embedder, teacher, sentences, cfg.cache_dir or None)
    batch_default = next(o.default for o in options(type(cfg)) if o.name == "batch_size")
    loop = dataclasses.replace(cfg, **OWN_OPTIMIZER,
                               batch_size=STATIC_BATCH_SIZE if cfg.batch_size == batch_default else cfg.batch_size)
    tuned = student.tune_to_teacher(sentences, vectors, loop=loop, checkpoint_dir=checkpoints / "run", on_epoch=keep_best)
    evals = [h for h in tuned["history"] if h["kind"] == "eval"]
    best = {"epoch": len(evals), "score": None}
    if validation is not None:
        student.vectors = np.load(best_dir / "vectors.npy")
        best["score"] = json.loads((best_dir / "score.json").read_text())["score"]
        best["epoch"] = next((h["epoch"] + 1 for h in evals if h.get("validation_spearman") == best["score"]), 0)
    epochs = cfg.epochs
    metrics = {"train_sentences": len(sentences), "epoch_kept": best["epoch"], "steps": tuned["steps"],
               "train_time_s": tuned["train_time_s"]}
    if best["score"] is not None:
        metrics["validation_spearman"] = best["score"]
    with atomic_artifact(cfg.output_dir) as tmp:
        student.save(tmp)
        write_manifest(tmp, stage="distill", parents=[teacher], config={"teacher": cfg.teacher, "student": STATIC,
                       "dim": dim, "epochs": epochs, "seed": cfg.seed, "max_length": cfg.max_length},
                       resolved={"max_length": cfg.max_length},
                       metrics=metrics, seed=cfg.seed, num_parameters=int(student.vectors.size), data=data_record,
                       checks=[check("unit_vectors", bool(np.allclose(np.linalg.norm(student.encode(sentences[:8]), axis=1), 1, atol=1e-4)),
                                     "8 corpus sentences")],
                       extra={"kind": "embedding", "dim": dim, "student": STATIC})
    remove_checkpoints(checkpoints)
    return Path(cfg.output_dir)
