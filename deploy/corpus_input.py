"""Reading a corpus run's input: csv, tsv, jsonl, parquet and plain text, streamed in chunks.

One home for turning `--input PATH...` (files or globs) into rows: each file is opened and its
columns checked before any work (`open_inputs`), then read in chunks of at most `chunk_rows` rows
(`read_chunks`), never whole: pyarrow's streaming CSV reader, a Parquet file's record batches, a
text or JSON-lines file line by line. A row is a dict of the columns asked for plus "id": the input's
own id column (as text) where one is named, else the file's name and the row's line number ("a.csv:2",
a CSV's header being line 1; a Parquet file's row number counting from 1), so the output joins back.
"""
from __future__ import annotations

import glob
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq

from shrinkbert.core.errors import ShrinkbertError

FORMATS = {".csv": "csv", ".tsv": "tsv", ".jsonl": "jsonl", ".ndjson": "jsonl", ".parquet": "parquet",
           ".txt": "text", ".text": "text"}
TEXT_COLUMN = "text"  # what a plain text file's lines are called
CSV_BLOCK_BYTES = 1 << 20  # pyarrow's streaming CSV reader parses this much at a time


@dataclass(frozen=True)
class InputFile:
    """One input file: where it is, how it is read, the name its ids carry, and its identity (size, mtime)."""
    path: Path
    format: str
    name: str
    size: int
    mtime_ns: int

    def identity(self) -> dict:
        return {"path": str(self.path.resolve()), "size": self.size, "mtime_ns": self.mtime_ns}


def expand_inputs(patterns: list[str]) -> list[Path]:
    """Files named by `patterns` (paths or globs), in the order given, each glob's matches sorted."""
    files: list[Path] = []
    for pattern in patterns:
        matches = sorted(glob.glob(pattern, recursive=True)) if glob.has_magic(pattern) else [pattern]
        if not matches:
            raise ShrinkbertError(f"--input {pattern}: no file matches it")
        for match in matches:
            path = Path(match)
            if path.is_dir():
                raise ShrinkbertError(f"--input {match} is a folder: name its files (a glob such as {match}/*.csv)")
            if not path.is_file():
                raise ShrinkbertError(f"--input {match}: no such file")
            if path.resolve() not in {f.resolve() for f in files}:
                files.append(path)
    if not files:
        raise ShrinkbertError("no --input given")
    return files


def open_inputs(patterns: list[str], columns: list[str], id_column: str | None) -> list[InputFile]:
    """The input files, each readable with the `columns` (and `id_column`) asked for: one line that names
    the file and the columns it has where one is missing or the file cannot be read."""
    paths = expand_inputs(patterns)
    root = Path(os.path.commonpath([str(p.resolve().parent) for p in paths]))
    files = []
    for path in paths:
        fmt = FORMATS.get(path.suffix.lower())
        if fmt is None:
            raise ShrinkbertError(f"{path}: unknown format '{path.suffix}' (read: {', '.join(sorted(FORMATS))})")
        stat = path.stat()
        files.append(InputFile(path, fmt, str(path.resolve().relative_to(root)), stat.st_size, stat.st_mtime_ns))
        present = column_names(files[-1])
        wanted = columns + ([id_column] if id_column else [])
        missing = [c for c in wanted if c not in present]
        if missing:
            raise ShrinkbertError(f"{path} has no column {', '.join(repr(c) for c in missing)} (its columns: "
                                  f"{', '.join(present) or 'none'}); name them with --text-column, "
                                  "--text-pair-column or --id-column")
    return files


def column_names(file: InputFile) -> list[str]:
    """The columns `file` holds (a plain text file: "text"), read from its head alone."""
    try:
        if file.format == "text":
            return [TEXT_COLUMN]
        if file.format == "parquet":
            return list(pq.ParquetFile(file.path).schema_arrow.names)
        if file.format == "jsonl":
            with open(file.path, encoding="utf-8") as handle:
                for number, line in enumerate(handle, 1):
                    if line.strip():
                        return list(_json_row(line, file, number))
            return []
        with _open_csv(file, None) as reader:
            return list(reader.schema.names)
    except (OSError, pa.ArrowException, UnicodeDecodeError) as err:
        raise ShrinkbertError(f"cannot read {file.path} as {file.format}: {_reason(err)}") from err


def count_rows(file: InputFile) -> int:
    """The rows `file` holds, for the progress bar: a Parquet file's metadata, else its newlines (a CSV's
    header and a text file's blank lines included: an estimate)."""
    if file.format == "parquet":
        return pq.ParquetFile(file.path).metadata.num_rows
    newlines, last = 0, b"\n"
    with open(file.path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            newlines += block.count(b"\n")
            last = block[-1:]
    rows = newlines + (last != b"\n")
    return max(0, rows - 1) if file.format in ("csv", "tsv") else rows


def read_chunks(files: list[InputFile], columns: list[str], id_column: str | None,
                chunk_rows: int) -> Iterator[list[dict]]:
    """Rows of every file in order, at most `chunk_rows` at a time; a text column's null reads as ""."""
    for file in files:
        try:
            yield from _file_chunks(file, columns, id_column, chunk_rows)
        except (OSError, pa.ArrowException, UnicodeDecodeError) as err:
            raise ShrinkbertError(f"cannot read {file.path} as {file.format}: {_reason(err)}") from err


def _file_chunks(file: InputFile, columns, id_column, chunk_rows) -> Iterator[list[dict]]:
    if file.format in ("text", "jsonl"):
        chunk = []
        with open(file.path, encoding="utf-8") as handle:
            for number, line in enumerate(handle, 1):
                if not line.strip():
                    continue  # a blank line is no row
                if file.format == "text":
                    row = {TEXT_COLUMN: line.rstrip("\r\n")}
                else:
                    row = _json_row(line, file, number)
                    missing = [c for c in columns + ([id_column] if id_column else []) if c not in row]
                    if missing:
                        raise ShrinkbertError(f"{file.path} line {number} has no {', '.join(map(repr, missing))} "
                                              f"(its keys: {', '.join(row) or 'none'})")
                chunk.append(_row(row, columns, id_column, f"{file.name}:{number}"))
                if len(chunk) == chunk_rows:
                    yield chunk
                    chunk = []
        if chunk:
            yield chunk
        return
    wanted = list(dict.fromkeys(columns + ([id_column] if id_column else [])))
    if file.format == "parquet":
        batches = pq.ParquetFile(file.path).iter_batches(batch_size=chunk_rows, columns=wanted)
        first_number = 1
    else:
        batches = _open_csv(file, wanted)
        first_number = 2  # line 1 is the header
    number, chunk = first_number, []
    for batch in batches:
        values = batch.to_pydict()
        for i in range(batch.num_rows):
            chunk.append(_row({c: values[c][i] for c in wanted}, columns, id_column, f"{file.name}:{number}"))
            number += 1
            if len(chunk) == chunk_rows:
                yield chunk
                chunk = []
    if chunk:
        yield chunk


def _row(row: dict, columns: list[str], id_column: str | None, where: str) -> dict:
    out = {c: ("" if row.get(c) is None else row[c]) for c in columns}
    out["id"] = str(row[id_column]) if id_column else where
    return out


def _json_row(line: str, file: InputFile, number: int) -> dict:
    try:
        row = json.loads(line)
    except json.JSONDecodeError as err:
        raise ShrinkbertError(f"{file.path} line {number} is not JSON: {err.msg}") from err
    if not isinstance(row, dict):
        raise ShrinkbertError(f"{file.path} line {number} is not a JSON object")
    return row


def _open_csv(file: InputFile, wanted: list[str] | None):
    """pyarrow's streaming reader over a csv or tsv file; the wanted columns read as text (a tsv's quotes are
    its text, as the kit reads a .tsv)."""
    tsv = file.format == "tsv"
    parse = pa_csv.ParseOptions(delimiter="\t" if tsv else ",", quote_char=False if tsv else '"',
                                newlines_in_values=not tsv)
    convert = pa_csv.ConvertOptions(include_columns=wanted, column_types={c: pa.string() for c in wanted or []},
                                    strings_can_be_null=False)
    return pa_csv.open_csv(file.path, read_options=pa_csv.ReadOptions(block_size=CSV_BLOCK_BYTES),
                           parse_options=parse, convert_options=convert)


def _reason(err: BaseException) -> str:
    return err.strerror if isinstance(err, OSError) and err.strerror else str(err).splitlines()[0]
