"""Tasks' datasets in one shape, split once by seed and stored, so every variant sees the same rows.

`load_task` turns a built-in name, a user file (.csv .tsv .jsonl .json .parquet), a directory of
train/validation/test files, a name found in the data folders of $SHRINKBERT_DATA (datafolder.py:
`sentence-transformers/stsb`, `squad`, `snli:validation`), or a hub name into a DatasetDict with
splits train/validation/test and columns "text", optional "text_pair", "label" (ClassLabel index
into task.label_names).
Each task kind (core/kinds) has its own columns and reads the sources it recognises: a token task
(brown-pos, wnut16-ner, .conll/.txt/CoNLL-like .tsv files, tables of word lists) has columns
"tokens" (Sequence of strings) and "tags" (Sequence of ClassLabel).
The first call stores the splits under <cache>/tasks/<name>-<source hash>-seed<seed>/; later
calls load them, so the test rows never change between runs, variants or machines.
"""
from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Sequence

import datasets

from shrinkbert.core import builtin
from shrinkbert.core.cache import default_cache_dir
from shrinkbert.core.data import builtin_data
from shrinkbert.core.data.tasks import BUILTIN_TASKS, Task
from shrinkbert.core.datafolder import data_file, find, searched, split_suffix, task_path
from shrinkbert.core.errors import ShrinkbertError
from shrinkbert.core.kinds import by_read_priority, kind_of
from shrinkbert.core.qa_data import QA_SUFFIXES, training_questions
from shrinkbert.core.userdata import (SPLIT_NAMES, check_utf8, first_line, is_conll, looks_like_path,
                                           quiet_datasets, read_conll, read_table, split_files)
from shrinkbert.core.verify import file_sha256

# Bump when the way stored splits are built changes, so stale stores are not reused.
STORE_VERSION = 2
MIN_ROWS_TO_SPLIT = 10
TASK_FILE = "task.json"


# ---------------------------------------------------------------------------------------------
# Splits


def _carve(table: datasets.Dataset, fraction: float, seed: int) -> tuple[datasets.Dataset, datasets.Dataset]:
    """Split off `fraction` of the rows, stratified by label where every class allows it (a token
    task's rows have no one label: a plain seeded split)."""
    if "label" not in table.column_names:
        parts = table.train_test_split(test_size=fraction, seed=seed)
        return parts["train"], parts["test"]
    try:
        parts = table.train_test_split(test_size=fraction, seed=seed, stratify_by_column="label")
    except ValueError:  # a class too small to stratify: a plain seeded shuffle split
        parts = table.train_test_split(test_size=fraction, seed=seed)
    return parts["train"], parts["test"]


def make_splits(splits: dict[str, datasets.Dataset], where: str, seed: int) -> datasets.DatasetDict:
    """Use the source's own splits; carve what is missing from train (80/10/10 when only train)."""
    train = splits["train"]
    with quiet_datasets():
        if "validation" not in splits and "test" not in splits:
            if len(train) < MIN_ROWS_TO_SPLIT:
                raise ShrinkbertError(f"{where} has only {len(train)} labelled rows; need at least "
                                      f"{MIN_ROWS_TO_SPLIT} to make train/validation/test splits")
            train, rest = _carve(train, 0.2, seed)
            validation, test = _carve(rest, 0.5, seed)
        else:
            validation, test = splits.get("validation"), splits.get("test")
            missing = [n for n, s in (("validation", validation), ("test", test)) if s is None]
            if missing and len(train) < MIN_ROWS_TO_SPLIT:
                raise ShrinkbertError(f"{where}: the train split has only {len(train)} rows, too few to carve "
                                      f"a {missing[0]} split from")
            if validation is None:
                train, validation = _carve(train, 0.1, seed)
            if test is None:
                train, test = _carve(train, 0.1, seed)
    result = datasets.DatasetDict(train=train, validation=validation, test=test)
    for name, split in result.items():
        if len(split) == 0:
            raise ShrinkbertError(f"{where}: the {name} split is empty")
    return result


# ---------------------------------------------------------------------------------------------
# Sources: built-in, user file or directory, hub


def _digest(*parts) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:12]


def _safe_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("._")[:60] or "task"


def _read_user_splits(path: Path, text_columns: Sequence[str],
                      options: dict) -> dict[str, tuple[datasets.Dataset, str, bool]]:
    """split -> (rows, the file they came from, whether it was read as CoNLL: {"tokens", "tags"})."""
    files = split_files(path) if path.is_dir() else {"train": path}
    read = {}
    for split, file in files.items():
        conll = is_conll(file, options["text_column"])
        read[split] = (read_conll(file, options["label_column"]) if conll
                       else read_table(file, text_columns, options.get("tsv_quoting", False)),
                       str(file), conll)
    return read


def _read_hub(name: str, cache_root: Path) -> dict[str, datasets.Dataset]:
    """A hub dataset's splits; with a :SPLIT suffix that split alone, as the rows to split."""
    base, wanted = split_suffix(name)
    hub_log = logging.getLogger("huggingface_hub")
    level = hub_log.level
    hub_log.setLevel(logging.CRITICAL)  # its retry warnings would bury the one line we raise
    try:
        with quiet_datasets():
            loaded = datasets.load_dataset(base, cache_dir=str(cache_root / "hub"))
    except Exception as err:  # offline, unknown name, gated, bad config: all one line for the user
        raise ShrinkbertError(f"cannot load '{name}': not a built-in task ({', '.join(BUILTIN_TASKS)}), not an "
                              f"existing file, not in the data folders ({searched()}), and not loadable from "
                              f"the hub ({first_line(err)})") from None
    finally:
        hub_log.setLevel(level)
    if wanted:
        found = next((alias for alias in SPLIT_NAMES[wanted] if alias in loaded), None)
        if found is None:
            raise ShrinkbertError(f"hub dataset '{base}' has no {wanted} split (splits: {', '.join(loaded)})")
        return {"train": loaded[found]}
    splits = {}
    for split, aliases in SPLIT_NAMES.items():
        for alias in aliases:
            if alias in loaded:
                splits[split] = loaded[alias]
                break
    if "train" not in splits:
        raise ShrinkbertError(f"hub dataset '{name}' has no train split (splits: {', '.join(loaded)})")
    return splits


def _drop_unlabelled(splits: dict[str, datasets.Dataset], label_column: str) -> dict[str, datasets.Dataset]:
    """Hub test splits often hide their labels as -1: such a split cannot measure anything."""
    kept = {}
    for name, split in splits.items():
        feature = split.features.get(label_column)
        if name != "train" and isinstance(feature, datasets.ClassLabel) and -1 in split.unique(label_column):
            continue
        kept[name] = split
    return kept


def _source(name_or_path: str) -> tuple[str, str, object, str]:
    """(origin: builtin, path or hub; display name; identity; what to read: the name, or the resolved
    path) of a source. The identity decides where its splits are stored: a path's is its files'
    hashes, so the same files reached by another path or data folder share one store."""
    if name_or_path in BUILTIN_TASKS:
        return "builtin", name_or_path, builtin.source_identity(name_or_path), name_or_path
    found = find(name_or_path)
    if found is not None:
        path = task_path(found, name_or_path)
        if path.is_dir():
            files = split_files(path)
            return "path", path.name, {s: file_sha256(f) for s, f in files.items()}, str(path)
        return "path", path.stem, file_sha256(path), str(path)
    if looks_like_path(name_or_path):
        raise ShrinkbertError(f"data file {Path(name_or_path).expanduser()} does not exist (nor in the data "
                              f"folders: {searched()})")
    return "hub", name_or_path, name_or_path, name_or_path


def _build(origin: str, name_or_path: str, display: str, options: dict, seed: int,
           cache_root: Path) -> tuple[Task, datasets.DatasetDict]:
    if origin == "builtin":
        task = BUILTIN_TASKS[name_or_path]
        splits = builtin_data.build(name_or_path, seed=seed, cache_dir=cache_root)
        labelled = {}
        for split_name, split in splits.items():
            features = kind_of(task).label_features(split.features.copy(), task)
            with quiet_datasets():
                labelled[split_name] = split.cast(features)
        return task, make_splits(labelled, name_or_path, seed)
    where = str(Path(name_or_path).expanduser()) if origin == "path" else f"hub dataset '{name_or_path}'"
    text_columns = [c for c in (options["text_column"], options["text_pair_column"]) if c]
    if origin == "path":
        read = _read_user_splits(Path(name_or_path).expanduser(), text_columns, options)
    else:
        hub = _drop_unlabelled(_read_hub(name_or_path, cache_root), options["label_column"])
        read = {split: (table, f"{where} ({split})", False) for split, table in hub.items()}
    for kind in by_read_priority():  # the first kind that recognises the data reads it
        found = kind.read_user_splits(read, where, {**options, "split_seed": seed})  # qa carves by article
        if found is not None:
            fields, splits = found
            task = Task(display, fields["label_names"], pair=bool(fields.get("pair", False)),
                        metrics=tuple(fields["metrics"]), kind=kind.name)
            return task, make_splits(splits, where, seed)
    raise ShrinkbertError(f"{where}: no task kind reads this data")


def _store(store: Path, task: Task, splits: datasets.DatasetDict, source: dict) -> None:
    """Write splits to a temporary sibling, then rename: a killed run leaves a whole store or none."""
    store.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".partial-{store.name}-", dir=store.parent))
    try:
        with quiet_datasets():
            splits.save_to_disk(str(tmp / "splits"))
        counts = {name: len(split) for name, split in splits.items()}
        (tmp / TASK_FILE).write_text(json.dumps({"task": task.to_dict(), "rows": counts, "source": source,
                                                 "store_version": STORE_VERSION}, indent=2, default=str))
        try:
            os.rename(tmp, store)
        except OSError:  # another process stored the same splits first: theirs are identical
            if not (store / TASK_FILE).is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _load_store(store: Path) -> tuple[Task, datasets.DatasetDict]:
    try:
        meta = json.loads((store / TASK_FILE).read_text())
        with quiet_datasets():
            splits = datasets.load_from_disk(str(store / "splits"))
    except Exception as err:
        raise ShrinkbertError(f"stored splits in {store} are unreadable ({first_line(err)}); delete that "
                              "directory to rebuild them") from None
    return Task.from_dict(meta["task"]), splits


def load_task(name_or_path: str, *, text_column: str = "text", text_pair_column: str | None = None,
              label_column: str = "label", split_seed: int = 0, cache_dir: str | None = None,
              max_rows: int | None = None, label_names: Sequence[str] | None = None,
              metrics: Sequence[str] | None = None, tsv_quoting: bool = False) -> tuple[Task, datasets.DatasetDict]:
    """The task and its train/validation/test splits (stored on first use, loaded after).

    name_or_path: a built-in task (movie-snippets, bbc-news, nyt-next-sentence, imdb, brown-pos,
    wnut16-ner), a .csv/.tsv/.jsonl/.json/.parquet file, a tagged file (.conll, .txt, or a .tsv that
    userdata.is_conll takes for CoNLL), a directory of train/validation/test files, a name found in
    the data folders of $SHRINKBERT_DATA (datafolder.py; NAME:SPLIT for one split's file), or a hub
    dataset.
    For a tagged file label_column picks the tag field: "label" the last, a number that 0-based field;
    a table whose text column holds word lists (or, at the default options, with list columns
    "tokens" and "tags") is a token task too. Its labels are the data's, "O" first, then sorted.
    split_seed: fixes which rows land in train/validation/test; it is the data's own setting, never
    the training seed, so runs with different training seeds share the same rows.
    label_names: the labels in index order (default: the sorted distinct labels of the data).
    max_rows: keep the first rows of each split (a prefix, so a quick run's test rows are the
    first test rows of the full run); 0 or None keeps all.
    tsv_quoting: read a .tsv's " as CSV quoting (default: no quote processing, as GLUE's files).
    """
    name_or_path = str(name_or_path)
    if max_rows is not None and max_rows < 0:
        raise ShrinkbertError(f"max_rows must be positive (0 or None: all rows), got {max_rows}")
    cache_root = Path(cache_dir).expanduser() if cache_dir else default_cache_dir()
    # "" and None mean the same (configs write ""); normalised so they share one store.
    options = {"text_column": text_column, "text_pair_column": text_pair_column or None, "label_column": label_column,
               "label_names": list(label_names) if label_names is not None else None,
               "metrics": list(metrics) if metrics else None}
    if tsv_quoting:  # only when set, so every store made before the option existed keeps its name
        options["tsv_quoting"] = True
    origin, display, identity, location = _source(name_or_path)
    # The store is named by content, not by path: the same file reached another way shares it.
    source = {"kind": origin, "name": display, "identity": identity,  # "kind": the key stored splits are named by
              "options": options if origin != "builtin" else {}, "store_version": STORE_VERSION}
    if split_seed is None or int(split_seed) < 0:
        raise ShrinkbertError(f"split_seed must be an integer >= 0, got {split_seed!r}")
    store = cache_root / "tasks" / f"{_safe_name(display)}-{_digest(source)}-seed{int(split_seed)}"
    if not (store / TASK_FILE).is_file():
        task, splits = _build(origin, location, display, options, int(split_seed), cache_root)
        _store(store, task, splits, source)
    task, splits = _load_store(store)
    if max_rows:
        splits = limit_rows(splits, max_rows, max_rows)
    return task, splits


def limit_rows(splits: datasets.DatasetDict, max_train_rows: int = 0, max_eval_rows: int = 0) -> datasets.DatasetDict:
    """The first rows of each split (a prefix, so a quick run's rows are the full run's first rows):
    max_train_rows for train, max_eval_rows for validation and test; 0 keeps all."""
    for name, limit in (("max_train_rows", max_train_rows), ("max_eval_rows", max_eval_rows)):
        if limit is not None and limit < 0:
            raise ShrinkbertError(f"{name} must be >= 0 (0: all rows), got {limit}")
    limits = {"train": max_train_rows, "validation": max_eval_rows, "test": max_eval_rows}
    return datasets.DatasetDict({name: split.select(range(min(limits.get(name) or len(split), len(split))))
                                 for name, split in splits.items()})


# ---------------------------------------------------------------------------------------------
# Tokenizing and corpora


def tokenize_task(dataset_dict: datasets.DatasetDict, tokenizer, task: Task,
                  max_length: int = 128, label_all_subtokens: bool = False, doc_stride: int = 0) -> datasets.DatasetDict:
    """input_ids, attention_mask, token_type_ids and "labels"; unpadded (the collator pads).

    Takes a DatasetDict from load_task (or one split of it, a Dataset) and returns the same kind.
    Tokenized once: the splits come memory-mapped from their store, so `datasets` writes the result
    beside them (cache-*.arrow) under a fingerprint of the split's rows, this function with the
    tokenizer's state, and max_length; every later stage or variant with the same tokenizer and
    max_length, in any process, loads it instead (measured on movie-snippets, all splits: 0.84 s to
    tokenize, 0.03 s to load).
    """
    kind = kind_of(task)
    if doc_stride and not kind.windowed:
        raise ShrinkbertError(f"doc_stride is for tasks read in overlapping windows (QA); task '{task.name}' is a "
                              f"{task.kind} task")
    windows = {"doc_stride": doc_stride} if doc_stride else {}  # only windowed kinds take it
    return kind.tokenize(dataset_dict, tokenizer, task, max_length, label_all_subtokens, **windows)


def load_corpus(names_or_paths: list[str] | str, max_lines: int | None = None, cache_dir=None) -> list[str]:
    """Raw text items (a paragraph or sentence each) for MLM: built-ins "sotu", "wordnet", "imdb",
    "rotten-tomatoes", names in the data folders (datafolder.py: "snli:validation", "stsb:train"),
    .txt files (one item per non-empty line) or folders of them, .csv files
    (every distinct cell of their text columns, CORPUS_CSV_COLUMNS: SNLI's premises and hypotheses),
    and SQuAD files (.json, .jsonl, .parquet: the questions of the training half of their articles,
    qa_data.article_half, so a retrieval measure on the other half searches articles never seen).

    With max_lines, each source gives an equal share (its first lines), so no source is crowded out.
    """
    if isinstance(names_or_paths, Path):
        names_or_paths = [names_or_paths]
    elif isinstance(names_or_paths, str):  # "sotu,wordnet" from a config flag
        names_or_paths = [part.strip() for part in names_or_paths.split(",") if part.strip()]
    if not names_or_paths:
        raise ShrinkbertError("no corpus given (use sotu, wordnet or .txt files)")
    share = math.ceil(max_lines / len(names_or_paths)) if max_lines else None
    lines: list[str] = []
    for source in names_or_paths:
        lines.extend(_corpus_lines(str(source), share, cache_dir))
    return lines[:max_lines] if max_lines else lines


CORPUS_CSV_COLUMNS = ("text", "text_pair", "sentence", "sentence1", "sentence2", "premise", "hypothesis", "question")


def _csv_texts(path: Path) -> list[str]:
    """The distinct non-empty cells of a CSV's text columns, row by row (a pair set's two sides in turn)."""
    import csv

    with open(path, encoding="utf-8-sig", newline="") as handle:
        reader = csv.DictReader(handle)
        columns = [c for c in reader.fieldnames or [] if c.strip().lower() in CORPUS_CSV_COLUMNS]
        if not columns:
            raise ShrinkbertError(f"corpus {path} has no text column (one of {', '.join(CORPUS_CSV_COLUMNS)})")
        cells = (" ".join((row[c] or "").split()) for row in reader for c in columns)
        return list(dict.fromkeys(cell for cell in cells if cell))


def _corpus_lines(source: str, limit: int | None, cache_dir=None) -> list[str]:
    if source in builtin_data.CORPORA:
        lines = builtin_data.corpus(source, cache_dir)
    else:
        path = find(source)
        if path is None:
            raise ShrinkbertError(f"corpus '{source}' is neither a built-in ({', '.join(builtin_data.CORPORA)}), "
                                  f"nor an existing file or folder, nor in the data folders ({searched()})")
        # a folder: its .txt files, else its one split file (a folder of several asks for NAME:SPLIT)
        files = (sorted(path.glob("*.txt")) or [data_file(source, "corpus")]) if path.is_dir() else [path]
        lines = []
        for file in files:
            check_utf8(file)
            if file.suffix.lower() == ".csv":
                lines.extend(_csv_texts(file))
                continue
            if file.suffix.lower() in QA_SUFFIXES:  # SQuAD: its training half's questions (query-like text)
                lines.extend(question for question, _ in training_questions(file))
                continue
            with open(file, encoding="utf-8-sig") as handle:
                lines.extend(line.strip() for line in handle if line.strip())
    return lines[:limit] if limit else lines
