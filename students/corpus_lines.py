"""The lines an embedding student learns from: --corpus split into training and unseen lines, each
question's gold paragraph (--query-pull), and a scored-pairs task's validation pairs and leak guard.
Shared by the vectors and static objectives (students/objectives/).
"""
from __future__ import annotations

import random
from pathlib import Path

from shrinkbert.core.data.dataspec import resolve_spec, split_pairs
from shrinkbert.core.data.load import load_corpus
from shrinkbert.core.qa_data import QA_SUFFIXES, training_questions
from shrinkbert.core.errors import ShrinkbertError
from shrinkbert.students.processes import log_main

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


def training_lines(cfg, teacher: str) -> tuple[list[str], list[str], list | None, dict]:
    """(training lines, unseen lines, a scored-pairs task's validation pairs or None, the data record
    for the manifest) of --corpus and --task."""
    sentences, unseen = corpus_split(cfg)
    data, validation = validation_pairs(cfg, teacher)
    if data is None:
        data_record = {"corpus": cfg.corpus, "corpus_mix": cfg.corpus_mix, "rows": {"train": len(sentences)}}
    else:
        spec, task = data
        sentences, leaks = guard_task_pairs(spec, cfg, sentences)
        data_record = spec.record(task, max_length=cfg.max_length, corpus=cfg.corpus, corpus_mix=cfg.corpus_mix,
                                  rows={"train": len(sentences)}, leak_guard_removed=leaks)
    return sentences, unseen, validation, data_record
