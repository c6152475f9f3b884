"""User data files (.csv .tsv .jsonl .json .parquet) read through `datasets` into the task shape,
and tagged files (.conll .txt, CoNLL-like .tsv, tables of word lists) into the token-task shape.

Every way a file can be wrong (missing, empty, not UTF-8, bad quoting, missing columns,
unknown labels) ends as one ShrinkbertError line naming the file and what to do.
"""
from __future__ import annotations

import codecs
import contextlib
import csv
import math
import re
import tempfile
from pathlib import Path
from typing import Callable, Iterator, Sequence

import datasets

from shrinkbert.core.errors import ShrinkbertError

LOADERS = {".csv": ("csv", {}), ".tsv": ("csv", {"delimiter": "\t"}), ".jsonl": ("json", {}),
           ".json": ("json", {}), ".parquet": ("parquet", {})}
CONLL_SUFFIXES = (".conll", ".txt")  # one word per line; .tsv too when it looks so (is_conll)
DATA_SUFFIXES = (*LOADERS, *CONLL_SUFFIXES)
SPLIT_NAMES = {"train": ("train",), "validation": ("validation", "valid", "val", "dev"), "test": ("test",)}
VERSION_MARK = re.compile(r"(?<![A-Za-z0-9])v(\d+(?:\.\d+)*)(?![A-Za-z0-9])")  # "v1.1" in dev-v1.1.json


@contextlib.contextmanager
def quiet_datasets() -> Iterator[None]:
    """No progress bars or logged errors from `datasets` (we raise our own); restored afterwards."""
    was_enabled, verbosity = datasets.is_progress_bar_enabled(), datasets.logging.get_verbosity()
    datasets.disable_progress_bars()
    datasets.logging.set_verbosity(datasets.logging.CRITICAL)
    try:
        yield
    finally:
        datasets.logging.set_verbosity(verbosity)
        if was_enabled:
            datasets.enable_progress_bars()


def first_line(err: BaseException) -> str:
    """The most telling line of an error: `datasets` wraps the parser's error in its own."""
    while isinstance(err, datasets.exceptions.DatasetGenerationError) and (err.__cause__ or err.__context__):
        err = err.__cause__ or err.__context__
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    return lines[0] if lines else type(err).__name__


# ---------------------------------------------------------------------------------------------
# Reading user files


def looks_like_path(name: str) -> bool:
    return Path(name).suffix.lower() in DATA_SUFFIXES or name.startswith(("/", ".", "~"))


def check_utf8(path: Path) -> None:
    """Fail on the first byte that is not UTF-8, and on a file with no visible content."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    seen_content, offset = False, 0
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            try:
                text = decoder.decode(block)
            except UnicodeDecodeError as err:
                raise ShrinkbertError(f"{path} is not UTF-8 text (byte {block[err.start]:#04x} at offset "
                                      f"{offset + err.start}); re-save it as UTF-8") from None
            if "\x00" in text:
                raise ShrinkbertError(f"{path} holds NUL bytes: it is not a text file")
            seen_content = seen_content or bool(text.strip().lstrip("\ufeff"))
            offset += len(block)
        try:
            decoder.decode(b"", final=True)
        except UnicodeDecodeError:
            raise ShrinkbertError(f"{path} is not UTF-8 text (it ends inside a multi-byte character); "
                                  "re-save it as UTF-8") from None
    if not seen_content:
        raise ShrinkbertError(f"{path} is empty")


def check_tab_fields(path: Path) -> None:
    """An unquoted .tsv is one row per line (CRLF or LF): every non-blank line must split into as many
    fields as the header. Checked here because pandas would pad a short row with empty cells."""
    expected = None
    with open(path, encoding="utf-8-sig", newline="") as handle:  # newline="": \r\n, \n and \r all end a line
        for number, line in enumerate(handle, 1):
            line = line.rstrip("\r\n")
            if not line.strip():
                continue
            count = line.count("\t") + 1
            if expected is None:
                expected = count
            elif count != expected:
                raise ShrinkbertError(f"{path} line {number}: {count} tab-separated fields, expected {expected} as in "
                                      "its header (a tab inside a text, or a missing cell?)")


def parser_error(path: Path, suffix: str, err: BaseException) -> str:
    """pandas' tokenizer error as one line naming the file, the line and the field counts."""
    line = first_line(err)
    found = re.search(r"Expected (\d+) fields in line (\d+), saw (\d+)", line)
    if not found:
        return f"cannot read {path} as {suffix[1:]}: {line}"
    expected, number, seen = found.groups()
    hint = (" (read with quoting, --tsv-quoting: a \" opens a quoted field that runs to the next \")"
            if suffix == ".tsv" else " (a comma inside a text must be in a \"quoted\" field)")
    return f"{path} line {number}: {seen} fields, expected {expected}{hint}"


def read_table(path: str | Path, text_columns: Sequence[str] = (), tsv_quoting: bool = False) -> datasets.Dataset:
    """One user file as a Dataset (in memory), or one clear ShrinkbertError.

    In CSV/TSV, text columns are read verbatim: pandas would otherwise turn "01" into 1 and
    "NA", "null" or "n/a" (real answers in real data) into missing values. A .tsv is read with no
    quote processing, as GLUE's files are written and its loaders read them (a " inside a sentence
    is a character); tsv_quoting=True reads it with CSV quoting instead. A UTF-8 BOM before the
    header is dropped and CRLF line ends read as LF (pandas does both; tests/test_userfiles.py).
    """
    path = Path(path).expanduser()
    if not path.exists():
        raise ShrinkbertError(f"data file {path} does not exist")
    if not path.is_file():
        raise ShrinkbertError(f"{path} is not a file")
    suffix = path.suffix.lower()
    if suffix not in LOADERS:
        raise ShrinkbertError(f"{path}: unsupported file type '{suffix}' (use one of {', '.join(DATA_SUFFIXES)})")
    if path.stat().st_size == 0:
        raise ShrinkbertError(f"{path} is empty")
    if suffix != ".parquet":
        check_utf8(path)
    builder, options = LOADERS[suffix]
    if builder == "csv":
        options = {**options, "keep_default_na": False, "converters": {c: str for c in text_columns}}
        if suffix == ".tsv" and not tsv_quoting:
            check_tab_fields(path)
            options["quoting"] = csv.QUOTE_NONE
    # datasets' own cache is throwaway here: the rows we keep are stored by load_task.
    with tempfile.TemporaryDirectory(prefix="shrinkbert-read-") as tmp, quiet_datasets():
        try:
            table = datasets.load_dataset(builder, data_files=str(path), split="train", cache_dir=tmp,
                                          keep_in_memory=True, **options)
        except Exception as err:  # the loaders raise many types (pandas, pyarrow, json) for bad bytes
            if "corresponds to no data" in str(err):  # datasets' words for a header with no rows
                raise ShrinkbertError(f"{path} has no data rows") from None
            raise ShrinkbertError(parser_error(path, suffix, err)) from None
    if len(table) == 0:
        raise ShrinkbertError(f"{path} has no data rows")
    return table


def _version(stem: str) -> tuple[int, ...] | None:
    """The version a file name carries ('squad-dev-v1.1' -> (1, 1)), or None."""
    found = VERSION_MARK.search(stem)
    return tuple(int(part) for part in found.group(1).split(".")) if found else None


def _one_per_split(directory: Path, found: dict[str, list[Path]]) -> dict[str, Path]:
    """One file per split; several files of one split that differ only in their version mark
    ('dev-v1.1.json', 'dev-v2.0.json') give the lowest version, anything else is refused."""
    chosen = {}
    for split in (split for split in SPLIT_NAMES if split in found):  # train, validation, test
        candidates = found[split]
        if len(candidates) > 1:
            unversioned = {VERSION_MARK.sub("", p.stem).lower() for p in candidates}
            if len(unversioned) > 1 or any(_version(p.stem) is None for p in candidates):
                raise ShrinkbertError(f"{directory} holds several {split} files: "
                                      f"{', '.join(p.name for p in candidates)}")
            candidates = sorted(candidates, key=lambda p: _version(p.stem))
        chosen[split] = candidates[0]
    return chosen


def files_by_split(directory: Path) -> dict[str, Path]:
    """{split: file} of a folder's data files: those named after a split (train.csv, validation.json,
    dev.tsv, test.parquet); in a folder with none of those, those whose name holds a split's name
    as a word (SQuAD's train-v1.1.json and dev-v1.1.json, squad-dev-v1.1.json). Files that name no
    split are not read. Several versions of one split: the lowest (see _one_per_split)."""
    files = [p for p in sorted(directory.iterdir()) if p.is_file() and p.suffix.lower() in DATA_SUFFIXES]
    exact: dict[str, list[Path]] = {}
    worded: dict[str, list[Path]] = {}
    for file in files:
        words = [w for w in re.split(r"[-_.\s]+", file.stem.lower()) if w]
        named = [split for split, aliases in SPLIT_NAMES.items() if any(alias in words for alias in aliases)]
        if len(named) != 1:  # no split, or several ("train-test.csv"): not read as a split
            continue
        in_name = exact if file.stem.lower() in SPLIT_NAMES[named[0]] else worded
        in_name.setdefault(named[0], []).append(file)
    return _one_per_split(directory, exact or worded)


def split_files(directory: Path) -> dict[str, Path]:
    """{split: file} of a directory of split files (files_by_split); it must hold a train file."""
    found = files_by_split(directory)
    if "train" not in found:
        raise ShrinkbertError(f"{directory} holds no train file (expected train.csv/.tsv/.jsonl/.json/.parquet/"
                              ".conll/.txt, or a name such as train-v1.1.json, and optionally validation.* and "
                              "test.*)")
    return found


# ---------------------------------------------------------------------------------------------
# Columns and labels


def standardize(table: datasets.Dataset, where: str, text_column: str, text_pair_column: str | None,
                 label_column: str) -> datasets.Dataset:
    """Keep and rename the task's columns to text/text_pair/label; texts become strings."""
    if text_column == "text" and "text" not in table.column_names and "sentence" in table.column_names:
        text_column = "sentence"  # the default also finds GLUE's name, so later stages need no column options
    wanted = {text_column: "text", label_column: "label"}
    if text_pair_column:
        wanted[text_pair_column] = "text_pair"
    columns = table.column_names
    for column, role in wanted.items():
        if column not in columns:
            hint = {"text": "text_column", "text_pair": "text_pair_column", "label": "label_column"}[role]
            raise ShrinkbertError(f"{where} has no {role} column '{column}' (columns: {', '.join(map(str, columns))}); "
                                  f"pass {hint}=...")
    for column in wanted:
        feature = table.features[column]
        if not isinstance(feature, (datasets.Value, datasets.ClassLabel)):
            raise ShrinkbertError(f"{where}: column '{column}' holds {type(feature).__name__} values, not plain text or labels")
    table = table.select_columns(list(wanted)).rename_columns({k: v for k, v in wanted.items() if k != v})
    text_columns = [c for c in ("text", "text_pair") if c in table.column_names]

    def to_strings(batch, indices):
        for column in text_columns:
            for value, index in zip(batch[column], indices):
                if value is None:
                    raise ShrinkbertError(f"{where}: data row {index + 1} has no {column}")
            batch[column] = [str(v) for v in batch[column]]
        return batch

    features = table.features.copy()
    for column in text_columns:
        features[column] = datasets.Value("string")
    with quiet_datasets():
        return table.map(to_strings, batched=True, with_indices=True, features=features)


def _label_key(value):
    """Labels compare by value: 1 and 1.0, "pos" and "pos ", are spellings of the same label."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, str):  # "pos " and "pos" are one label; an empty CSV cell is none
        return value.strip() or None
    if isinstance(value, float):
        if math.isnan(value):
            return None
        if value.is_integer():
            return int(value)
    return value


def label_lookup(values: set, where: str, label_names: Sequence[str] | None, noun: str,
                 order: Callable[[set], list]) -> tuple[tuple[str, ...], dict]:
    """(label names, {raw value: index}) for the raw labels (or tags) of a dataset: the given names
    (ints that are not themselves names are indices into them), else the values in `order`."""
    kinds = {type(v) for v in values}
    if len(kinds) > 1:
        raise ShrinkbertError(f"{where}: {noun}s mix numbers and names ({sorted(map(str, values))[:6]})")
    if label_names is None:
        ordered = order(values)
        return tuple(str(v) for v in ordered), {v: i for i, v in enumerate(ordered)}
    label_names = tuple(str(n) for n in label_names)
    if kinds == {int} and not set(label_names) >= {str(v) for v in values}:
        bad = sorted(v for v in values if not 0 <= v < len(label_names))
        if bad:
            raise ShrinkbertError(f"{where}: {noun} {bad[0]} is not an index into the given label names "
                                  f"{list(label_names)}")
        return label_names, {v: v for v in values}
    bad = sorted(str(v) for v in values if str(v) not in label_names)
    if bad:
        raise ShrinkbertError(f"{where}: {noun} '{bad[0]}' is not one of the given label names {list(label_names)}")
    return label_names, {v: label_names.index(str(v)) for v in values}


def encode_labels(splits: dict[str, datasets.Dataset], where: str,
                   label_names: Sequence[str] | None) -> tuple[tuple[str, ...], dict[str, datasets.Dataset]]:
    """Turn raw label values (strings or ints) into ClassLabel indices; names sorted or given."""
    feature = splits["train"].features["label"]
    if isinstance(feature, datasets.ClassLabel) and label_names is None:
        label_names = feature.names  # a hub dataset that already names its labels
    values = set()
    for split in splits.values():
        split_feature = split.features["label"]
        raw = split.unique("label")
        if isinstance(split_feature, datasets.ClassLabel):
            raw = [split_feature.names[v] if v is not None and 0 <= v < split_feature.num_classes else v for v in raw]
        values.update(_label_key(v) for v in raw)
    if None in values:
        raise ShrinkbertError(f"{where} has rows with no label")
    fractional = sorted(v for v in values if isinstance(v, float))
    if fractional:
        raise ShrinkbertError(f"{where}: label {fractional[0]} is not a class (labels must be names or whole "
                              "numbers; regression is not supported)")
    label_names, lookup = label_lookup(values, where, label_names, "label", sorted)
    if len(label_names) < 2:
        raise ShrinkbertError(f"{where} has only one label value ({label_names[0]!r}); a classifier needs at least 2")

    encoded = {}
    for name, split in splits.items():
        split_feature = split.features["label"]
        names = split_feature.names if isinstance(split_feature, datasets.ClassLabel) else None

        def to_index(batch, names=names):
            batch["label"] = [lookup[_label_key(names[v] if names else v)] for v in batch["label"]]
            return batch

        features = split.features.copy()
        features["label"] = datasets.ClassLabel(names=list(label_names))
        with quiet_datasets():
            encoded[name] = split.map(to_index, batched=True, features=features)
    return label_names, encoded


# ---------------------------------------------------------------------------------------------
# Tagged words (token tasks): CoNLL files and tables of word lists, as {"tokens": [...], "tags": [...]}


def _existing_file(path: str | Path) -> Path:
    path = Path(path).expanduser()
    if not path.exists():
        raise ShrinkbertError(f"data file {path} does not exist")
    if not path.is_file():
        raise ShrinkbertError(f"{path} is not a file")
    return path


def is_conll(path: str | Path, text_column: str = "text") -> bool:
    """Whether a user file is read as CoNLL (one word per line) rather than as a table.

    .conll and .txt files always are. A .tsv is when a blank line separates its rows, or when its
    first line is not a header naming the text column (text_column; for the default "text" also
    "sentence"); a .tsv whose header names the text column, with no blank line between rows, stays a
    classification table."""
    path = Path(path).expanduser()
    suffix = path.suffix.lower()
    if suffix in CONLL_SUFFIXES:
        return True
    if suffix != ".tsv" or not path.is_file():
        return False
    names = {text_column} | ({"sentence"} if text_column == "text" else set())
    header, blank = None, False
    with open(path, encoding="utf-8-sig", errors="replace") as handle:
        for line in handle:
            if not line.strip():
                blank = header is not None
            elif header is None:
                header = line
                if not {field.strip() for field in line.rstrip("\r\n").split("\t")} & names:
                    return True
            elif blank:
                return True
    return False


def _tag_field(label_column: str, path: Path) -> int | None:
    """The 0-based field holding the tag (None: the last field) from the label_column option."""
    label_column = str(label_column or "label").strip()
    if label_column == "label":
        return None
    if not label_column.isdigit():
        raise ShrinkbertError(f"{path} is read as CoNLL, whose fields have no names: label_column must be a "
                              f"0-based field number or 'label' (the last field), got {label_column!r}")
    if int(label_column) == 0:
        raise ShrinkbertError(f"{path}: label_column 0 is the word itself; the tag is another field")
    return int(label_column)


def read_conll(path: str | Path, label_column: str = "label") -> datasets.Dataset:
    """A CoNLL-style file as rows {"tokens": [word, ...], "tags": [tag, ...]} (tags as written).

    One word per line, whitespace-separated fields, the word first; a blank line ends a sentence;
    -DOCSTART- lines are skipped. The tag is the last field, or field number `label_column` (0-based)
    when that is a number. Every word line must have as many fields as the first one."""
    path = _existing_file(path)
    check_utf8(path)
    column = _tag_field(label_column, path)
    hint = ("; read as CoNLL (one word per line): a .tsv table needs a header naming its text column "
            "(text_column)") if path.suffix.lower() == ".tsv" else ""
    sentences, sentence_tags, words, tags, expected = [], [], [], [], None
    with open(path, encoding="utf-8-sig") as handle:
        for number, line in enumerate(handle, 1):
            fields = line.split()
            if not fields or fields[0] == "-DOCSTART-":  # a sentence (or document) ends
                if words:
                    sentences.append(words)
                    sentence_tags.append(tags)
                words, tags = [], []
                continue
            if expected is None:
                expected = len(fields)
                if expected < 2:
                    raise ShrinkbertError(f"{path} line {number}: 1 field, expected a word and its tag{hint}")
                if column is not None and column >= expected:
                    raise ShrinkbertError(f"{path}: label_column {column} is past the {expected} fields of line "
                                          f"{number} (fields count from 0)")
            elif len(fields) != expected:
                raise ShrinkbertError(f"{path} line {number}: {len(fields)} fields, expected {expected}{hint}")
            words.append(fields[0])
            tags.append(fields[-1 if column is None else column])
    if words:
        sentences.append(words)
        sentence_tags.append(tags)
    if not sentences:
        raise ShrinkbertError(f"{path} holds no tagged words")
    return datasets.Dataset.from_dict({"tokens": sentences, "tags": sentence_tags})


def _is_list(feature) -> bool:
    return isinstance(feature, (datasets.Sequence, datasets.LargeList, list))


def token_columns(table: datasets.Dataset, text_column: str, label_column: str) -> tuple[str, str] | None:
    """(words column, tags column) of a table that holds a list of words per row; None for a table
    of texts. With the options at their defaults ("text", "label"), a list column "tokens" is the
    words, and "tags" (else "label") their tags."""
    features = table.features
    if (text_column, label_column) == ("text", "label") and _is_list(features.get("tokens")):
        return "tokens", "tags" if "tags" in features else label_column
    if _is_list(features.get(text_column)):
        return text_column, label_column
    return None


def standardize_tokens(table: datasets.Dataset, where: str, tokens_column: str, tags_column: str) -> datasets.Dataset:
    """A table's word lists and tag lists as {"tokens", "tags"} rows, checked row by row: a list of
    non-empty words without whitespace, and exactly one tag (a name or a whole number) per word."""
    columns = table.column_names
    if tags_column not in columns:
        raise ShrinkbertError(f"{where} has no tags column '{tags_column}' (columns: {', '.join(map(str, columns))}); "
                              "pass label_column=...")
    feature = table.features[tags_column]
    if isinstance(feature, (datasets.Value, datasets.ClassLabel)):
        raise ShrinkbertError(f"{where}: column '{tags_column}' holds one {type(feature).__name__} per row, not a "
                              f"list of tags (one per word of '{tokens_column}')")
    inner = getattr(feature, "feature", None)
    names = inner.names if isinstance(inner, datasets.ClassLabel) else None
    all_words, all_tags, kinds = [], [], set()
    for index, (words, tags) in enumerate(zip(table[tokens_column], table[tags_column])):
        row = f"{where} row {index + 1}"
        if not isinstance(words, list):
            raise ShrinkbertError(f"{row}: '{tokens_column}' is not a list of words")
        if not words:
            raise ShrinkbertError(f"{row}: empty list of words")
        if not isinstance(tags, list):
            raise ShrinkbertError(f"{row}: '{tags_column}' is not a list of tags")
        if len(tags) != len(words):
            raise ShrinkbertError(f"{row}: {len(tags)} tags for {len(words)} words")
        clean = []
        for position, word in enumerate(words, 1):
            word = "" if word is None or isinstance(word, (bool, list, dict)) else str(word).strip()
            if not word or len(word.split()) != 1:
                raise ShrinkbertError(f"{row}: word {position} ({words[position - 1]!r}) is empty or holds "
                                      "whitespace; give one word per list item")
            clean.append(word)
        keys = []
        for position, tag in enumerate(tags, 1):
            if names is not None and isinstance(tag, int) and 0 <= tag < len(names):
                tag = names[tag]  # a ClassLabel list (a hub or saved dataset): its names are the tags
            key = _label_key(tag)
            if key is None or isinstance(key, (float, list, dict)):
                problem = "has no tag" if key is None else f"has tag {tag!r}, neither a name nor a whole number"
                raise ShrinkbertError(f"{row}: word {position} {problem}")
            kinds.add(type(key))
            keys.append(key)
        if len(kinds) > 1:
            raise ShrinkbertError(f"{row}: tags mix numbers and names")
        all_words.append(clean)
        all_tags.append(keys)
    if not all_words:
        raise ShrinkbertError(f"{where} has no data rows")
    return datasets.Dataset.from_dict({"tokens": all_words, "tags": all_tags})


def _tag_order(values: set) -> list:
    """"O" first when present, then the others sorted (numbers by value)."""
    return sorted(values, key=lambda v: (v != "O", v))


def encode_tags(splits: dict[str, datasets.Dataset], where: str, label_names: Sequence[str] | None = None
                ) -> tuple[tuple[str, ...], dict[str, datasets.Dataset]]:
    """Tags as indices into the label names: given, or the data's own ("O" first if present, then
    sorted). Columns become tokens: Sequence(Value("string")), tags: Sequence(ClassLabel(names))."""
    values = set()
    for split in splits.values():
        for row in split["tags"]:
            values.update(row)
    label_names, lookup = label_lookup(values, where, label_names, "tag", _tag_order)
    if len(label_names) < 2:
        raise ShrinkbertError(f"{where} has only one tag value ({label_names[0]!r}); a tagger needs at least 2")
    features = datasets.Features({"tokens": datasets.Sequence(datasets.Value("string")),
                                  "tags": datasets.Sequence(datasets.ClassLabel(names=list(label_names)))})
    encoded = {}
    for name, split in splits.items():
        rows = split.to_dict()
        encoded[name] = datasets.Dataset.from_dict(
            {"tokens": rows["tokens"], "tags": [[lookup[v] for v in row] for row in rows["tags"]]}, features=features)
    return label_names, encoded


def tag_metrics(label_names: Sequence[str]) -> tuple[str, ...]:
    """seqeval's entity scores and word accuracy when the tags are BIO (every tag but O starts with
    B- or I-), else word accuracy alone."""
    if all(name == "O" or name.startswith(("B-", "I-")) for name in label_names):
        return "seqeval", "accuracy"
    return ("accuracy",)
