"""User data files (.csv .tsv .jsonl .json .parquet) read through `datasets` into the task shape.

Every way a file can be wrong (missing, empty, not UTF-8, bad quoting, missing columns,
unknown labels) ends as one ShrinkbertError line naming the file and what to do.
"""
from __future__ import annotations

import codecs
import contextlib
import math
import tempfile
from pathlib import Path
from typing import Iterator, Sequence

import datasets

from shrinkbert.core.errors import ShrinkbertError

LOADERS = {".csv": ("csv", {}), ".tsv": ("csv", {"delimiter": "\t"}), ".jsonl": ("json", {}),
           ".json": ("json", {}), ".parquet": ("parquet", {})}
SPLIT_NAMES = {"train": ("train",), "validation": ("validation", "valid", "val", "dev"), "test": ("test",)}


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
    return Path(name).suffix.lower() in LOADERS or name.startswith(("/", ".", "~"))


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


def read_table(path: str | Path, text_columns: Sequence[str] = ()) -> datasets.Dataset:
    """One user file as a Dataset (in memory), or one clear ShrinkbertError.

    In CSV/TSV, text columns are read verbatim: pandas would otherwise turn "01" into 1 and
    "NA", "null" or "n/a" (real answers in real data) into missing values.
    """
    path = Path(path).expanduser()
    if not path.exists():
        raise ShrinkbertError(f"data file {path} does not exist")
    if not path.is_file():
        raise ShrinkbertError(f"{path} is not a file")
    suffix = path.suffix.lower()
    if suffix not in LOADERS:
        raise ShrinkbertError(f"{path}: unsupported file type '{suffix}' (use one of {', '.join(LOADERS)})")
    if path.stat().st_size == 0:
        raise ShrinkbertError(f"{path} is empty")
    if suffix != ".parquet":
        check_utf8(path)
    builder, options = LOADERS[suffix]
    if builder == "csv":
        options = {**options, "keep_default_na": False, "converters": {c: str for c in text_columns}}
    # datasets' own cache is throwaway here: the rows we keep are stored by load_task.
    with tempfile.TemporaryDirectory(prefix="shrinkbert-read-") as tmp, quiet_datasets():
        try:
            table = datasets.load_dataset(builder, data_files=str(path), split="train", cache_dir=tmp,
                                          keep_in_memory=True, **options)
        except Exception as err:  # the loaders raise many types (pandas, pyarrow, json) for bad bytes
            if "corresponds to no data" in str(err):  # datasets' words for a header with no rows
                raise ShrinkbertError(f"{path} has no data rows") from None
            raise ShrinkbertError(f"cannot read {path} as {suffix[1:]}: {first_line(err)}") from None
    if len(table) == 0:
        raise ShrinkbertError(f"{path} has no data rows")
    return table


def split_files(directory: Path) -> dict[str, Path]:
    found = {}
    for split, aliases in SPLIT_NAMES.items():
        candidates = [p for alias in aliases for p in sorted(directory.glob(f"{alias}.*"))
                      if p.suffix.lower() in LOADERS]
        if len(candidates) > 1:
            raise ShrinkbertError(f"{directory} holds several {split} files: {', '.join(p.name for p in candidates)}")
        if candidates:
            found[split] = candidates[0]
    if "train" not in found:
        raise ShrinkbertError(f"{directory} holds no train file (expected train.csv/.tsv/.jsonl/.json/.parquet, "
                              "and optionally validation.* and test.*)")
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
    kinds = {type(v) for v in values}
    if len(kinds) > 1:
        raise ShrinkbertError(f"{where}: labels mix numbers and names ({sorted(map(str, values))[:6]})")
    if label_names is not None:
        label_names = tuple(str(n) for n in label_names)
        if kinds == {int} and not set(label_names) >= {str(v) for v in values}:
            # ints that are not themselves the given names are indices into them
            bad = sorted(v for v in values if not 0 <= v < len(label_names))
            if bad:
                raise ShrinkbertError(f"{where}: label {bad[0]} is not an index into the given label names "
                                      f"{list(label_names)}")
            lookup = {v: v for v in values}
        else:
            bad = sorted(str(v) for v in values if str(v) not in label_names)
            if bad:
                raise ShrinkbertError(f"{where}: label '{bad[0]}' is not one of the given label names {list(label_names)}")
            lookup = {v: label_names.index(str(v)) for v in values}
    else:
        ordered = sorted(values)
        label_names = tuple(str(v) for v in ordered)
        lookup = {v: i for i, v in enumerate(ordered)}
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
