"""The distill stage's data: the task's tokenized splits or a general corpus, transfer sets, collating.

Rows are tokenized once and row-indexed (the teacher-output cache looks batches up by index);
transfer-set rows (--augment, --transfer-corpus) carry no gold label (NO_LABEL) and pass the
leak guard, so no validation or test text ever trains.
"""
from __future__ import annotations

import os
from pathlib import Path

import torch

from shrinkbert.core.compact import ARCHITECTURES as COMPACT_STUDENTS
from shrinkbert.core.cache import default_cache_dir
from shrinkbert.core.data.dataspec import load_splits
from shrinkbert.core.data.leakguard import LeakGuard, describe
from shrinkbert.core.errors import ShrinkbertError
from shrinkbert.core.kinds import kind_of
from shrinkbert.core.predict import MODEL_INPUTS
from shrinkbert.core.kinds.tagging import IGNORE
from shrinkbert.students.augment import (NO_LABEL, TRANSFER_SAMPLE_SEED, corpus_transfer_pairs, corpus_transfer_rows,
                                        transfer_rows)
from shrinkbert.students.processes import log_main


def teacher_cache_dir(cfg) -> Path:
    """Teacher outputs live in the one shrinkbert cache, beside the stored splits."""
    return (Path(cfg.cache_dir).expanduser() if cfg.cache_dir else default_cache_dir()) / "teacher-outputs"


def make_collate(tokenizer, targets: tuple[str, ...] = ("labels",)):
    """Pad model inputs; carry the kind's targets (`TaskKind.target_columns`: labels, a QA window's
    start/end_positions) and row indices through as tensors."""

    tokenizer.deprecation_warnings["Asking-to-pad-a-fast-tokenizer"] = True  # pad() is right here: pre-tokenized rows

    def collate(features: list[dict]) -> dict:
        inputs = [{k: f[k] for k in MODEL_INPUTS if k in f} for f in features]
        batch = dict(tokenizer.pad(inputs, padding=True, return_tensors="pt"))
        for key in (*targets, "row_idx"):
            if key in features[0]:
                values = [f[key] for f in features]
                if isinstance(values[0], (list, tuple)):  # a tagger's labels: padded to the inputs with IGNORE
                    width = batch["input_ids"].shape[1]
                    values = [list(v) + [IGNORE] * (width - len(v)) for v in values]
                batch[key] = torch.tensor(values, dtype=torch.long)
        return batch

    return collate


def with_row_index(dataset, kind=None):
    """The model inputs, the kind's targets and scoring columns of tokenized rows, plus each row's index."""
    kind = kind or kind_of(None)
    keep = [c for c in dataset.column_names if c in (*MODEL_INPUTS, *kind.target_columns, *kind.scoring_columns)]
    dataset = dataset.select_columns(keep)
    return dataset.add_column("row_idx", list(range(len(dataset))))


SMALL_DATA_ROWS = 5_000  # below this, a pair task's rows alone teach a student too little (bench/small_data.py)
SMALL_DATA_AUGMENT = 8  # teacher-labelled perturbed copies per row (TinyBERT's task phase uses 20)
SMALL_DATA_ENV = "SHRINKBERT_SMALL_DATA"  # "off": as --small-data off on every run (the test suite's tiny runs)


def small_data_defaults(cfg, train_rows: int, supports_transfer: bool) -> dict:
    """A task student on fewer than SMALL_DATA_ROWS rows gets what small-data distillation relies on,
    where the user set neither: a teacher-labelled transfer set (--augment copies of each row) and the
    hidden-state loss, for a transformer student (--small-data auto; cfg is changed in place, so the manifest's config is what
    ran). Returns the record for the log and the manifest: what was switched on, or with --small-data
    off what was left off; {} when the rows are enough or there is nothing to add."""
    # Measured on a sentence-pair task (bench/small_data.py); token and QA tasks have no sentence-level
    # transfer set, and the hidden-state loss alone is not measured there: they are left as given.
    if train_rows >= SMALL_DATA_ROWS or not supports_transfer:
        return {}
    would = {}
    if not cfg.augment and not cfg.transfer_corpus:
        would["augment"] = SMALL_DATA_AUGMENT
    if not cfg.hidden_weight and cfg.student not in COMPACT_STUDENTS:  # a compact student has no hidden states
        would["hidden_weight"] = 1.0
    if not would:
        return {}
    if cfg.small_data == "off" or os.environ.get(SMALL_DATA_ENV, "") == "off":
        return {"train_rows": train_rows, "switched_on": {}, "left_off": would}
    for name, value in would.items():
        setattr(cfg, name, value)
    return {"train_rows": train_rows, "switched_on": would}


def load_data(cfg, tokenizer, spec=None, record: dict | None = None, masked_lm: bool = False):
    """(task or None, train dataset, test dataset or None), tokenized and row-indexed: the task's splits, or
    (`masked_lm`) the --corpus lines alone; `record` receives what the transfer set and the leak guard did
    (for the manifest)."""
    record = {} if record is None else record
    if not masked_lm:
        from shrinkbert.core.data.load import tokenize_task

        if spec is None:
            raise ShrinkbertError("no task given: --task NAME_OR_FILE (or --objective masked-lm --corpus ...)")
        task, splits = load_splits(spec, cfg.cache_dir)
        if (cfg.augment or cfg.transfer_corpus) and not kind_of(task).supports_transfer_set:
            raise ShrinkbertError(f"--augment and --transfer-corpus make sentence-level transfer sets; task "
                                  f"'{task.name}' is a {task.kind} task")
        tokenized = tokenize_task(splits, tokenizer, task, max_length=cfg.max_length, doc_stride=cfg.doc_stride)
        train_set, test_set = tokenized["train"], tokenized["test"]
        if cfg.max_train_rows:
            train_set = train_set.select(range(min(cfg.max_train_rows, len(train_set))))
        record["small_data"] = small_data_defaults(cfg, len(train_set), kind_of(task).supports_transfer_set)
        if cfg.augment or cfg.transfer_corpus:
            source = splits["train"].select(range(len(train_set)))
            guard = LeakGuard.for_splits(splits, name=task.name)  # nothing of validation/test trains
            train_set = _with_transfer_rows(train_set, source, task, tokenizer, cfg, guard, record)
        if cfg.max_eval_rows:
            test_set = test_set.select(range(min(cfg.max_eval_rows, len(test_set))))
        return task, with_row_index(train_set, kind_of(task)), with_row_index(test_set, kind_of(task))
    import datasets

    from shrinkbert.core.data.load import load_corpus

    lines = load_corpus([c for c in cfg.corpus.split(",") if c], max_lines=cfg.max_train_rows or None,
                        cache_dir=cfg.cache_dir or None)
    if spec is not None:  # the teacher's task (or --task): its validation/test rows never train
        guard_task, guard_splits = load_splits(spec, cfg.cache_dir or None)
        guard = LeakGuard.for_splits(guard_splits, name=guard_task.name)
        total = len(lines)
        lines, removed = guard.filter(lines)
        record["leak_guard"] = {"task": guard.name, "removed": removed, "of": total}
        log_main(describe(removed, total, guard, "corpus lines"))
    encoded = tokenizer(lines, truncation=True, max_length=cfg.max_length, return_token_type_ids=True,
                        return_attention_mask=True)
    train_set = datasets.Dataset.from_dict({k: encoded[k] for k in MODEL_INPUTS if k in encoded})
    return None, with_row_index(train_set), None


def _with_transfer_rows(train_set, source, task, tokenizer, cfg, guard, record: dict):
    """The tokenized training rows followed by teacher-labelled rows (label NO_LABEL): perturbed
    copies of them (--augment) and transfer-corpus lines (--transfer-corpus), minus leaks."""
    import datasets

    texts, pairs = [], [] if task.pair else None
    if cfg.augment:
        if tokenizer.mask_token is None:
            raise ShrinkbertError("--augment needs a tokenizer with a mask token")
        # Fixed like the corpus sample, not --seed: the copies are then the same for every seed, so one
        # cached teacher pass serves them all (a 110k-row transfer set took 7 min of teacher per seed).
        texts, pairs = transfer_rows(source["text"], source["text_pair"] if task.pair else None, cfg.augment,
                                     TRANSFER_SAMPLE_SEED, tokenizer.mask_token)
    copies, corpus_lines = len(texts), 0
    if cfg.transfer_corpus:
        if pairs is None:
            lines, seen, leaks = corpus_transfer_rows(cfg.transfer_corpus, cfg.max_transfer_rows, guard,
                                                      cfg.cache_dir or None)
        else:  # a pair task: pairs of corpus lines, the next line or a random one
            lines, seconds, seen, leaks = corpus_transfer_pairs(cfg.transfer_corpus, cfg.max_transfer_rows, guard,
                                                                cfg.cache_dir or None)
            pairs = pairs + seconds
        unit = "lines" if pairs is None else "pairs (a line and the next or a random line)"
        record["transfer_corpus"] = {"corpus": cfg.transfer_corpus, "rows": len(lines), "lines_read": seen,
                                     "leaks_removed": leaks, "pairs": pairs is not None}
        log_main(f"transfer corpus {cfg.transfer_corpus}: {len(lines):,} {unit}, labelled by the teacher; "
             + describe(leaks, seen, guard, "lines read" if pairs is None else "pairs drawn"))
        texts, corpus_lines = texts + lines, len(lines)
    keep = guard.keep_mask(texts, pairs)
    if not all(keep):
        texts = [t for t, k in zip(texts, keep) if k]
        pairs = [p for p, k in zip(pairs, keep) if k] if pairs is not None else None
    record["transfer_rows"] = {"augment_copies": copies, "total": len(texts), "leaks_removed": keep.count(False)}
    if not texts:
        return train_set
    encoded = tokenizer(texts, pairs, truncation=True, max_length=cfg.max_length, return_token_type_ids=True,
                        return_attention_mask=True)
    extra = datasets.Dataset.from_dict({**{k: encoded[k] for k in MODEL_INPUTS if k in encoded}, "labels": [NO_LABEL] * len(texts)})
    train_set = train_set.cast_column("labels", datasets.Value("int64"))  # a ClassLabel cannot hold NO_LABEL
    extra = extra.cast(datasets.Features({k: train_set.features[k] for k in extra.column_names}))
    log_main(f"transfer set: {len(texts):,} rows ({copies:,} perturbed copies of {len(source):,} training rows and "
         f"{corpus_lines:,} corpus {'lines' if pairs is None else 'pairs'}, less {keep.count(False):,} leaks), labelled by "
         "the teacher alone")
    return datasets.concatenate_datasets([train_set.select_columns(extra.column_names), extra])
