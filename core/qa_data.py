"""Extractive QA data (SQuAD style): one home for reading, checking and splitting it by article.

Rows come out in the layout of the hub's `squad` dataset, whatever the source:
    id, title, context, question, answers {text: [...], answer_start: [...]}
Sources: SQuAD v1.1/v2.0 JSON (the official nested format), flat .jsonl/.json/.parquet files in
the hub layout, a directory of train/validation/test files, or the hub's `squad`/`squad_v2`.

Every row is checked before anything is stored; a bad one ends as one ShrinkbertError line naming
the file and the question id: an answer whose text is not at its answer_start, a missing context
or question, an unanswerable question in a file read as v1.1, a duplicate id.

One file is split by article (`title`, else by paragraph) with the split seed, never by
question: a test question's paragraph must not have been trained on. Questions used as distillation
text (an embedding student's query-like corpus) come from one half of the articles and the
retrieval measure can search the other (`article_half`): the half is a hash of the title, so the same
article falls on the same side in every file that holds it (SQuAD v1.1, v2.0 and XQuAD share them).
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Iterable

import datasets
import numpy as np
from sklearn.model_selection import GroupShuffleSplit

from shrinkbert.core.datafolder import find, task_path
from shrinkbert.core.errors import ShrinkbertError
from shrinkbert.core.userdata import check_utf8, first_line, quiet_datasets, read_table, split_files

FEATURES = datasets.Features({
    "id": datasets.Value("string"), "title": datasets.Value("string"), "context": datasets.Value("string"),
    "question": datasets.Value("string"),
    "answers": datasets.Sequence({"text": datasets.Value("string"), "answer_start": datasets.Value("int32")}),
})
QA_SUFFIXES = (".json", ".jsonl", ".parquet")
HUB_DATASETS = ("squad", "squad_v2")
SPLIT_FRACTIONS = (0.8, 0.1, 0.1)  # train / validation / test, counted in articles


# ---------------------------------------------------------------------------------------------
# Reading


def _nested_squad(path: Path) -> dict | None:
    """The parsed file when it is official SQuAD JSON ({"version", "data": [articles]}), else None."""
    if path.suffix.lower() != ".json":
        return None
    try:
        with open(path, encoding="utf-8-sig") as handle:
            parsed = json.load(handle)
    except json.JSONDecodeError:
        return None  # JSON lines, or a broken file: the flat reader says which
    if isinstance(parsed, dict) and isinstance(parsed.get("data"), list) and parsed["data"] \
            and isinstance(parsed["data"][0], dict) and "paragraphs" in parsed["data"][0]:
        return parsed
    return None


def _flatten_nested(parsed: dict, where: str) -> list[dict[str, Any]]:
    rows = []
    for article in parsed["data"]:
        title = str(article.get("title") or "")
        for paragraph in article.get("paragraphs") or []:
            context = paragraph.get("context")
            for qa in paragraph.get("qas") or []:
                answers = qa.get("answers") or []
                if not isinstance(answers, list) or not all(isinstance(a, dict) for a in answers):
                    raise ShrinkbertError(f"{where}: question {qa.get('id')!r} has answers that are not "
                                          "{text, answer_start} objects")
                rows.append({"id": qa.get("id"), "title": title, "context": context, "question": qa.get("question"),
                             "answers": {"text": [a.get("text") for a in answers],
                                         "answer_start": [a.get("answer_start") for a in answers]},
                             "is_impossible": bool(qa.get("is_impossible", False))})
    return rows


def _flat_rows(table: datasets.Dataset, where: str) -> list[dict[str, Any]]:
    missing = [c for c in ("id", "context", "question", "answers") if c not in table.column_names]
    if missing:
        raise ShrinkbertError(f"{where} has no {', '.join(missing)} column(s) (columns: "
                              f"{', '.join(table.column_names)}); expected the hub `squad` layout: id, title, "
                              "context, question, answers{text, answer_start}, or official SQuAD JSON")
    rows = []
    for row in table:
        answers = row["answers"]
        if isinstance(answers, list):  # a list of {text, answer_start} objects, as some exports write it
            answers = {"text": [a.get("text") for a in answers], "answer_start": [a.get("answer_start") for a in answers]}
        if not isinstance(answers, dict) or "text" not in answers or "answer_start" not in answers:
            raise ShrinkbertError(f"{where}: question {row['id']!r} has no answers{{text, answer_start}}")
        rows.append({"id": row["id"], "title": row.get("title") or "", "context": row["context"],
                     "question": row["question"], "answers": answers, "is_impossible": False})
    return rows


def read_qa_file(path: str | Path, version_2_with_negative: bool | None = None) -> datasets.Dataset:
    """One SQuAD-style file as checked rows in the hub `squad` layout.

    version_2_with_negative (run_qa's option): True reads SQuAD v2.0 (questions may have no answer);
    None takes the version a nested file declares, and v1.1 for a flat file.
    """
    path = Path(path).expanduser()
    if not path.is_file():
        raise ShrinkbertError(f"data file {path} does not exist" if not path.exists() else f"{path} is not a file")
    if path.suffix.lower() not in QA_SUFFIXES:
        raise ShrinkbertError(f"{path}: a QA file must be {', '.join(QA_SUFFIXES)} (SQuAD JSON or the hub `squad` layout)")
    where = str(path)
    if path.suffix.lower() != ".parquet":
        check_utf8(path)
    nested = _nested_squad(path)
    if nested is not None:
        rows = _flatten_nested(nested, where)
        declared_v2 = str(nested.get("version", "")).lstrip("v").startswith("2")
        version_2 = declared_v2 if version_2_with_negative is None else version_2_with_negative
    else:
        rows = _flat_rows(read_table(path), where)
        version_2 = bool(version_2_with_negative)
    check_rows(rows, where, version_2)
    return to_dataset(rows)


def read_qa_table(table: datasets.Dataset, where: str, version_2_with_negative: bool = False) -> datasets.Dataset:
    """A table already read (a hub split) in the hub `squad` layout, checked."""
    rows = _flat_rows(table, where)
    check_rows(rows, where, version_2_with_negative)
    return to_dataset(rows)


def looks_like_qa(table: datasets.Dataset) -> bool:
    """Whether a table as `datasets` read it holds SQuAD-style questions: the hub layout's columns,
    or official SQuAD JSON (read as one row of "version" and "data")."""
    columns = set(table.column_names)
    return {"context", "question", "answers"} <= columns or columns == {"version", "data"}


def to_dataset(rows: Iterable[dict[str, Any]]) -> datasets.Dataset:
    columns = {name: [] for name in FEATURES}
    for row in rows:
        for name in FEATURES:
            columns[name].append(row[name])
    return datasets.Dataset.from_dict(columns, features=FEATURES)


# ---------------------------------------------------------------------------------------------
# Checking


def check_rows(rows: list[dict[str, Any]], where: str, version_2: bool) -> None:
    """Every way a question can be wrong, as one line naming the file and the question id."""
    if not rows:
        raise ShrinkbertError(f"{where} holds no questions")
    seen: set[str] = set()
    for number, row in enumerate(rows, 1):
        qid = row.get("id")
        if qid is None or not str(qid).strip():
            raise ShrinkbertError(f"{where}: question {number} has no id")
        qid = row["id"] = str(qid)
        name = f"{where}: question {qid!r}"
        if qid in seen:
            raise ShrinkbertError(f"{name} appears twice (ids must be unique)")
        seen.add(qid)
        for field in ("context", "question"):
            if not isinstance(row.get(field), str) or not row[field].strip():
                raise ShrinkbertError(f"{name} has no {field}")
        texts, starts = row["answers"]["text"], row["answers"]["answer_start"]
        if len(texts) != len(starts):
            raise ShrinkbertError(f"{name}: {len(texts)} answer texts for {len(starts)} answer_start values")
        if not texts:
            if not version_2:
                raise ShrinkbertError(f"{name} has no answer, but the file is read as SQuAD v1.1 (pass "
                                      "version_2_with_negative=true for SQuAD v2.0 data with unanswerable questions)")
            continue
        if row.get("is_impossible"):
            raise ShrinkbertError(f"{name} is marked is_impossible but has answers")
        context = row["context"]
        for text, start in zip(texts, starts):
            if not isinstance(text, str) or not text.strip():
                raise ShrinkbertError(f"{name} has an empty answer text")
            if isinstance(start, bool) or not isinstance(start, (int, np.integer)):
                raise ShrinkbertError(f"{name}: answer_start {start!r} is not a character offset")
            if context[start:start + len(text)] != text or start < 0:
                found = context[max(start, 0):max(start, 0) + len(text)]
                raise ShrinkbertError(f"{name}: answer {text!r} is not at answer_start {start} (the context "
                                      f"has {found!r} there)")


# ---------------------------------------------------------------------------------------------
# Splitting

TRAINING_HALF, HELD_OUT_HALF = "training", "held-out"


def article_half(title: str) -> str:
    """Which half of a SQuAD file's articles `title` belongs to: questions of the training half may
    be distilled on, the held-out half is searched (eval --retrieval-articles held-out). A hash of the
    title, not a seeded draw, so it is the same in every file and for every --seed."""
    return TRAINING_HALF if hashlib.sha256(title.encode("utf-8")).digest()[0] % 2 == 0 else HELD_OUT_HALF


def training_questions(path: str | Path) -> list[tuple[str, str]]:
    """(question, its paragraph) for every distinct question of the training half of a SQuAD file's
    articles (answerable or not: a SQuAD v2.0 file's unanswerable questions are queries too)."""
    table = read_qa_file(path)
    pairs = {}
    for article, question, context in zip(article_groups(table), table["question"], table["context"]):
        if article_half(article) == TRAINING_HALF:
            pairs.setdefault(" ".join(question.split()), context)
    if not pairs:
        raise ShrinkbertError(f"{path}: no article of the training half (qa_data.article_half) holds a question")
    return list(pairs.items())


def article_groups(table: datasets.Dataset) -> list[str]:
    """The unit a split keeps together: the article title, or the paragraph where titles are missing."""
    titles, contexts = table["title"], table["context"]
    return [title if title else f"context:{context}" for title, context in zip(titles, contexts)]


def carve_articles(table: datasets.Dataset, where: str, fraction: float,
                   seed: int) -> tuple[datasets.Dataset, datasets.Dataset]:
    """(kept, carved): about `fraction` of the articles (at least one, never all) carved off, seeded."""
    groups = np.asarray(article_groups(table))
    distinct = len(set(groups.tolist()))
    if distinct < 2:
        raise ShrinkbertError(f"{where} holds {distinct} article(s); splitting by article needs more (give "
                              "train/validation/test files instead)")
    carved_articles = min(max(round(fraction * distinct), 1), distinct - 1)
    splitter = GroupShuffleSplit(n_splits=1, test_size=carved_articles, random_state=seed)
    kept, carved = next(splitter.split(np.zeros(len(groups)), groups=groups))
    return table.select(sorted(kept)), table.select(sorted(carved))


def split_by_article(table: datasets.Dataset, where: str, seed: int) -> dict[str, datasets.Dataset]:
    """train/validation/test carved by article (80/10/10 counted in articles), seeded."""
    train_share, validation_share, test_share = SPLIT_FRACTIONS
    if len(set(article_groups(table))) < 3:
        raise ShrinkbertError(f"{where} holds fewer than 3 articles; splitting by article needs at least 3 (give "
                              "train/validation/test files instead)")
    train, rest = carve_articles(table, where, validation_share + test_share, seed)
    if len(set(article_groups(rest))) < 2:  # too few articles held out to share: take one more from train
        train, extra = carve_articles(train, where, 0.0, seed)
        rest = datasets.concatenate_datasets([rest, extra])
    validation, test = carve_articles(rest, where, test_share / (validation_share + test_share), seed)
    return {"train": train, "validation": validation, "test": test}


def carve_missing(splits: dict[str, datasets.Dataset], where: str, seed: int) -> datasets.DatasetDict:
    """The source's own splits; what is missing is carved from train by article."""
    if "validation" not in splits and "test" not in splits:
        return datasets.DatasetDict(split_by_article(splits["train"], where, seed))
    result = dict(splits)
    for missing in ("validation", "test"):
        if missing not in result:
            result["train"], result[missing] = carve_articles(result["train"], f"{where} (train)", 0.1, seed)
    return datasets.DatasetDict({name: result[name] for name in ("train", "validation", "test")})


def _read_hub(name: str, version_2: bool | None) -> dict[str, datasets.Dataset]:
    try:
        with quiet_datasets():
            loaded = datasets.load_dataset(name)
    except Exception as err:  # offline, unknown name: one line for the user
        raise ShrinkbertError(f"cannot load hub dataset '{name}' ({first_line(err)})") from None
    v2 = (name == "squad_v2") if version_2 is None else version_2
    splits = {}
    for split, table in loaded.items():
        splits[split] = read_qa_table(table, f"hub dataset '{name}' ({split})", v2)
    return splits


def check_unique_across(splits: dict[str, datasets.Dataset], where: str) -> None:
    seen: dict[str, str] = {}
    for split, table in splits.items():
        for qid in table["id"]:
            if qid in seen:
                raise ShrinkbertError(f"{where}: question {qid!r} is in both the {seen[qid]} and the {split} split")
            seen[qid] = split


def read_qa_splits(source: str | Path, seed: int = 0,
                   version_2_with_negative: bool | None = None) -> datasets.DatasetDict:
    """train/validation/test of a QA source: a file (split by article), a directory of split files,
    a name in the data folders of $SHRINKBERT_DATA (datafolder.py), or the hub's squad/squad_v2 (where
    a hub is reachable). Rows checked; ids unique across splits."""
    found = find(str(source))
    path = task_path(found, str(source)) if found is not None else Path(str(source)).expanduser()
    if path.is_dir():
        splits = {split: read_qa_file(file, version_2_with_negative) for split, file in split_files(path).items()}
    elif path.exists() or str(source) not in HUB_DATASETS:
        splits = {"train": read_qa_file(path, version_2_with_negative)}
    else:
        splits = _read_hub(str(source), version_2_with_negative)
        splits = {("validation" if name in ("dev", "valid") else name): table for name, table in splits.items()}
    where = str(path) if path.exists() else f"hub dataset '{source}'"
    check_unique_across(splits, where)
    return carve_missing(splits, where, seed)
