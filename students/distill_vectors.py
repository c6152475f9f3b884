"""`shrinkbert distill` of a kind whose models give sentence vectors: the stage's Config in, an
embedding student out (students/distill.py hands it here by the kind's `sentence_vectors`).

    shrinkbert distill --mode embeddings --teacher minilm --corpus imdb,brown,wordnet --layers 3
    shrinkbert distill --mode embeddings --teacher minilm --corpus imdb --student static --dim 256
    shrinkbert distill --mode embeddings --teacher minilm --corpus imdb --student runs/emb-pruned  # recovery

The teacher is read as a sentence-transformers model (its pooling and normalisation from its own
files, core/embedder.py), so `--mode embeddings` takes all-MiniLM-L6-v2 as it ships; a teacher whose
manifest already says kind embedding (a fine-tuned or distilled embedding model) goes this way in
any mode. The student learns the teacher's sentence vectors of the `--corpus` lines
(students/embedding_distill.py: MSE + cosine, teacher vectors cached by content), or with `--student
static` is model2vec's static table (students/static.py) tuned on the same lines; `--student PATH`
distils into that embedding model as it is (a pruned one: compress/prune.py), or into a pretrained one
that splits text into the teacher's pieces (`--teacher mpnet --student minilm`: re-indexed to the
teacher's ids, with a least-squares projection to its width; students/vocab_map.py). A `--task` of
scored pairs (STS-B's shape) picks the epoch by validation Spearman and is recorded for later stages;
no sentence of its validation or test pairs, nor a near-duplicate, is trained on (core/data/leakguard.py:
a corpus such as STS-B's own training sentences shares some with them).
"""
from __future__ import annotations

import dataclasses
import random
from pathlib import Path

import numpy as np

from shrinkbert.core.artifacts import atomic_artifact, check, write_manifest
from shrinkbert.core.builtin import resolve_model
from shrinkbert.core.config import options, refuse_unread
from shrinkbert.core.configs import DataConfig, TrainConfig
from shrinkbert.core.data.dataspec import resolve_spec, split_pairs
from shrinkbert.core.data.load import load_corpus
from shrinkbert.core.qa_data import QA_SUFFIXES, training_questions
from shrinkbert.core.embedder import Embedder
from shrinkbert.students.configs import EMBEDDING_ONLY_OPTIONS
from shrinkbert.core.errors import ShrinkbertError
from shrinkbert.students.embedding_distill import EmbeddingStudentConfig, distill_embedding, teacher_vectors
from shrinkbert.students.processes import log_main

# What `distill` reads for an embedding student (the data fields, then these); any other option set
# is refused in one line (core.config.refuse_unread), so `--temperature 4` is never silently ignored.
READS = frozenset(f.name for f in (*dataclasses.fields(DataConfig), *dataclasses.fields(TrainConfig))) | {
    "teacher", "mode", "corpus", "student", "target", "layers", "hidden", "heads", "intermediate",
    "dim", "hidden_weight", "max_length", "max_train_rows", "max_eval_rows", "output_dir"} | EMBEDDING_ONLY_OPTIONS
DEFAULT_LAYERS = 3  # half of MiniLM's 6 layers: the shape bench/embedding_student.py measures
STATIC = "static"
# model2vec's static student tunes its table in the same loop, with an optimizer of its own (Adam at
# a constant 1e-3, no decay or clipping: students/static.py) and batches of 64 unless --batch-size
# says otherwise; it reads the loop's other options (epochs, seed, checkpoints, resume).
STATIC_LEARNING_RATE, STATIC_BATCH_SIZE = 1e-3, 64
STATIC_READS = (frozenset(f.name for f in (*dataclasses.fields(DataConfig), *dataclasses.fields(TrainConfig)))
                - {"learning_rate", "weight_decay", "warmup_ratio", "warmup_steps", "lr_schedule", "max_grad_norm",
                   "torch_compile"}) | {  # a lookup table: nothing to compile
    "teacher", "mode", "corpus", "corpus_mix", "student", "dim", "max_length", "max_train_rows", "max_eval_rows",
    "output_dir"}


UNSEEN_LINES = 500  # corpus lines never trained on: the teacher's agreement on them helps pick the epoch


def corpus_sentences(cfg) -> list[str]:
    """The training lines of --corpus (`corpus_split`)."""
    return corpus_split(cfg)[0]


def corpus_split(cfg) -> tuple[list[str], list[str]]:
    """(training lines, unseen lines) of --corpus: its distinct non-empty lines, shuffled with --seed;
    with --max-train-rows, that many: the first of all lines pooled, or (--corpus-mix equal) an
    equal share drawn from each corpus (all of a corpus smaller than its share), so a small
    query-like corpus is not crowded out. Up to UNSEEN_LINES lines beyond them are never trained
    on (without --max-train-rows, the last of a corpus of 10x as many lines)."""
    if not cfg.corpus:
        raise ShrinkbertError("an embedding student learns the teacher's vectors of sentences: give --corpus "
                              "(built-in imdb, brown, wordnet, sotu, rotten-tomatoes, or .txt files)")
    sources = [name.strip() for name in cfg.corpus.split(",") if name.strip()]
    if cfg.corpus_mix == "equal" and cfg.max_train_rows and len(sources) > 1:
        share, spare = -(-cfg.max_train_rows // len(sources)), -(-UNSEEN_LINES // len(sources))
        drawn = [_distinct_shuffled(load_corpus(source), cfg.seed) for source in sources]
        sentences = _distinct_shuffled([line for lines in drawn for line in lines[:share]], cfg.seed)
        unseen = _distinct_shuffled([line for lines in drawn for line in lines[share:share + spare]], cfg.seed)
    else:
        pool = _distinct_shuffled(load_corpus(cfg.corpus), cfg.seed)
        keep = cfg.max_train_rows or (len(pool) - UNSEEN_LINES if len(pool) >= 10 * UNSEEN_LINES else len(pool))
        sentences, unseen = pool[:keep], pool[keep:keep + UNSEEN_LINES]
    if not sentences:
        raise ShrinkbertError(f"corpus {cfg.corpus} holds no text")
    taken = set(sentences)
    return (sentences[:cfg.max_train_rows] if cfg.max_train_rows else sentences,
            [line for line in unseen if line not in taken][:UNSEEN_LINES])


def _distinct_shuffled(lines, seed: int) -> list[str]:
    distinct = [line for line in dict.fromkeys(s.strip() for s in lines) if line]
    random.Random(seed).shuffle(distinct)
    return distinct


def query_goals(cfg, sentences: list[str]) -> list[str | None] | None:
    """--query-pull's goal for each sentence: the gold paragraph of a question of a SQuAD --corpus
    file, None for every other line; None without --query-pull."""
    if not cfg.query_pull:
        return None
    paragraphs: dict[str, str] = {}
    for source in (name.strip() for name in cfg.corpus.split(",")):
        if Path(source).suffix.lower() in QA_SUFFIXES and Path(source).is_file():
            for question, context in training_questions(source):
                paragraphs.setdefault(question, context)
    if not paragraphs:
        raise ShrinkbertError("--query-pull pulls questions towards their paragraphs: give a SQuAD file (.json) "
                              "in --corpus")
    return [paragraphs.get(sentence) for sentence in sentences]


def validation_pairs(cfg, teacher: str):
    """(the data spec, the validation pairs) of a scored-pairs --task, or (None, None) without one."""
    spec = resolve_spec(cfg, [teacher], required=False)
    if spec is None:
        return None, None
    task, pairs = split_pairs(spec, "validation", cfg.max_eval_rows, cfg.cache_dir)
    return (spec, task), pairs


def guard_task_pairs(spec, cfg, sentences: list[str]) -> tuple[list[str], int]:
    """The training lines less those that repeat (or nearly repeat) a sentence of the scored-pairs task's
    validation or test pairs, and how many went: the student must not have learnt the teacher's
    vector of a sentence it is scored on."""
    from shrinkbert.core.data.dataspec import load_splits
    from shrinkbert.core.data.leakguard import LeakGuard, describe

    task, splits = load_splits(spec, cfg.cache_dir or None)
    guard = LeakGuard.for_splits(splits, name=task.name, columns=("sentence1", "sentence2"))
    kept, removed = guard.filter(sentences)
    if removed:
        log_main(describe(removed, len(sentences), guard, "corpus lines"))
    if not kept:
        raise ShrinkbertError(f"every line of --corpus {cfg.corpus} repeats a sentence of {task.name}'s validation "
                              "or test pairs: distil on other text")
    return kept, removed


def distill_vectors(cfg) -> Path:
    """Distil an embedding student as the distill stage's Config asks; return its artifact path."""
    if cfg.student == STATIC:
        refuse_unread(cfg, STATIC_READS, "for a static embedding student (--student static)")
    else:
        refuse_unread(cfg, READS, "for an embedding student (mode embeddings, or a teacher of kind embedding)")
    teacher = resolve_model(cfg.teacher)
    if "," in cfg.teacher:
        raise ShrinkbertError("an embedding student learns from one teacher: give one --teacher")
    if cfg.target:
        raise ShrinkbertError("--target is not supported for embedding students yet: give --layers/--hidden/"
                              "--intermediate (and --dim)")
    into = cfg.student if cfg.student and cfg.student != STATIC else None  # recovery of a pruned model
    if into is not None and (cfg.layers or cfg.hidden or cfg.heads or cfg.intermediate or cfg.dim):
        raise ShrinkbertError(f"--student {cfg.student} is distilled into as it is: drop --layers/--hidden/--heads/"
                              "--intermediate/--dim")
    sentences, unseen = corpus_split(cfg)
    data, validation = validation_pairs(cfg, teacher)
    if data is None:
        data_record = {"corpus": cfg.corpus, "corpus_mix": cfg.corpus_mix, "rows": {"train": len(sentences)}}
    else:
        spec, task = data
        sentences, leaks = guard_task_pairs(spec, cfg, sentences)
        data_record = spec.record(task, max_length=cfg.max_length, corpus=cfg.corpus, corpus_mix=cfg.corpus_mix,
                                  rows={"train": len(sentences)}, leak_guard_removed=leaks)
    if cfg.student == STATIC:
        return _static(cfg, teacher, sentences, validation, data_record)
    config = EmbeddingStudentConfig(
        layers=cfg.layers or DEFAULT_LAYERS, hidden=cfg.hidden or None, heads=cfg.heads or None,
        intermediate=cfg.intermediate or None, dim=cfg.dim or None, epochs=max(1, int(round(cfg.epochs))),
        lr=cfg.learning_rate, batch_size=cfg.batch_size, max_length=cfg.max_length, seed=cfg.seed,
        hidden_weight=cfg.hidden_weight, similarity_weight=cfg.similarity_weight,
        drop_in_weight=cfg.drop_in_weight, keep_by=cfg.keep_by)
    out = distill_embedding(teacher, sentences, cfg.output_dir, config, validation=validation,
                            cache_dir=cfg.cache_dir or None, data=data_record, student_path=into, loop=cfg,
                            goals=query_goals(cfg, sentences), pull=cfg.query_pull, unseen=unseen)
    return Path(out)


def _static(cfg, teacher: str, sentences: list[str], validation, data_record: dict) -> Path:
    """model2vec's static table from the teacher, tuned on the corpus in the kit's training loop; with
    validation pairs the best epoch (the untuned table, epoch 0, included) is kept, beside the
    checkpoints so a resumed run keeps it too."""
    import json
    import shutil

    from shrinkbert.core.sts import sts_spearman
    from shrinkbert.core.train import LATEST, checkpoint_dir_for, remove_checkpoints
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
    loop = dataclasses.replace(cfg, learning_rate=STATIC_LEARNING_RATE,
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
                       metrics=metrics, seed=cfg.seed, num_parameters=int(student.vectors.size), data=data_record,
                       checks=[check("unit_vectors", bool(np.allclose(np.linalg.norm(student.encode(sentences[:8]), axis=1), 1, atol=1e-4)),
                                     "8 corpus sentences")],
                       extra={"kind": "embedding", "dim": dim, "student": STATIC})
    remove_checkpoints(checkpoints)
    return Path(cfg.output_dir)
