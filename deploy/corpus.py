"""A bundle over a whole corpus: `shrinkbert predict` and `shrinkbert.predict_corpus`.

The input is streamed (deploy/corpus_input.py) and cut into shards of `shard_rows` rows in input order;
a shard is the unit of work, of output and of resume. Within a shard, rows are sorted by token count
in windows of `window` rows and run in batches of at most `batch_tokens` tokens (rows x the longest
row), so little is padding; the answers go back to input order. OUT/_manifest.json holds the bundle's
identity, the input files with their sizes and modification times, the options that decide the output, and
the shards done with their row ranges; it is written (to a temporary name, then renamed) before the first
shard and after each. Each shard is written as OUT/part-NNNNN.parquet through a temporary name in OUT that
is renamed when complete, then recorded.
Run again after a kill, the same command skips the shards the manifest records and writes the rest, so
every input row is in the output exactly once; a manifest of another bundle, input or options is refused.
On Dask (deploy/corpus_dask.py) each shard is one task; the output is the same.
"""
from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path
from typing import Iterator

import pyarrow as pa
import pyarrow.parquet as pq

from shrinkbert.core.errors import ShrinkbertError
from shrinkbert.core.progress import progress_bar
from shrinkbert.deploy.corpus_batches import BATCH_TOKENS, RunOptions, Streams, output_schema, predict_rows
from shrinkbert.deploy.corpus_input import InputFile, column_names, count_rows, open_inputs, read_chunks
from shrinkbert.deploy.corpus_kinds import bundle_identity, load_predictor, outputs_for

MANIFEST = "_manifest.json"
PART = "part-{:05d}.parquet"
TEMP_SUFFIX = ".tmp"  # ".part-NNNNN.parquet.tmp", "._manifest.json.tmp": being written; readers skip dot files


def host_threads() -> int:
    """The cores this process may run on: a corpus run keeps them all busy."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def shards(files: list[InputFile], options: RunOptions, id_column: str | None,
           shard_rows: int) -> Iterator[tuple[int, int, list[dict]]]:
    """(shard index, its first row's number in the whole input, its rows), in input order."""
    index, first, rows = 0, 0, []
    for chunk in read_chunks(files, list(options.columns), id_column, min(shard_rows, 8192)):
        rows.extend(chunk)
        while len(rows) >= shard_rows:
            yield index, first, rows[:shard_rows]
            index, first, rows = index + 1, first + shard_rows, rows[shard_rows:]
    if rows:
        yield index, first, rows


class ShardWriter:
    """Writes shards atomically into the output folder and records each in the manifest."""

    def __init__(self, out: Path, identity: dict, done: dict[int, dict]):
        self.out, self.identity, self.done = out, identity, done

    def write(self, index: int, first_row: int, table: pa.Table) -> None:
        if not (self.out / MANIFEST).is_file():  # the folder is the run's before any shard is in it
            self.out.mkdir(parents=True, exist_ok=True)
            self.save()
        name = PART.format(index)
        temp = self.out / f".{name}.tmp"
        pq.write_table(table, temp)
        _sync(temp)
        os.replace(temp, self.out / name)
        self.done[index] = {"index": index, "file": name, "first_row": first_row, "rows": table.num_rows}
        self.save()

    def save(self, **extra) -> None:
        body = {**self.identity, "shards": [self.done[i] for i in sorted(self.done)], **extra}
        temp = self.out / f".{MANIFEST}.tmp"
        temp.write_text(json.dumps(body, indent=1))
        _sync(temp)
        os.replace(temp, self.out / MANIFEST)


def predict_corpus(bundle: str | os.PathLike, inputs: str | list[str], output: str | os.PathLike, *,
                   text_column: str | None = None, text_pair_column: str | None = None, id_column: str | None = None,
                   batch_tokens: int = BATCH_TOKENS, window: int = 4096, shard_rows: int = 20000,
                   threads: int | None = None, streams: int | None = None, dtype: str = "float32",
                   cluster: str | None = None,
                   scheduler: str | None = None, progress: bool = True) -> Path:
    """Run a bundle over every row of `inputs` and write the answers as Parquet shards in `output`.

    Args:
        bundle: a bundle folder (`shrinkbert bundle`) of any kind.
        inputs: files or globs: .csv, .tsv, .jsonl, .parquet, or .txt (one text a line).
        output: a new or empty folder, or one holding this same run's shards (it resumes).
        text_column: the text column (default "text"; a QA bundle's question column, default "question"; a
            tagger's text or word-list column, default "text", else "tokens").
        text_pair_column: a pair classifier's second text, or a QA bundle's context (default "context").
        id_column: the input's id column, written as text; default: the file's name and the row's line.
        batch_tokens: most tokens a batch holds (rows x the longest row).
        window: rows sorted by length together; larger pads less and holds more in memory.
        shard_rows: rows a shard (an output file, a unit of resume and of Dask work) holds.
        threads: ONNX Runtime threads in all; default, every core of this process (one process), or of a Dask
            worker.
        streams: model calls run at once, each a Predictor of its own on threads / streams threads; default,
            one a thread (one-thread calls side by side keep the cores busier than one call on all of them).
        dtype: an embedding bundle's vectors, float32 or float16.
        cluster: "local:N" runs on a dask.distributed LocalCluster of N one-thread worker processes.
        scheduler: a Dask scheduler's address (tcp://HOST:8786); its workers must see the bundle at `bundle`.
        progress: a progress bar (rows/s and an ETA) on stderr.

    Returns:
        The output folder.

    Raises:
        ShrinkbertError: an unreadable input, a missing column, an empty input, an output folder that holds
            something else or another run; nothing is written outside the temporary shard.
    """
    inputs = [inputs] if isinstance(inputs, (str, os.PathLike)) else list(inputs)
    out = Path(output)
    for name, value in (("batch_tokens", batch_tokens), ("window", window), ("shard_rows", shard_rows),
                        ("streams", 1 if streams is None else streams)):
        if value < 1:
            raise ShrinkbertError(f"--{name.replace('_', '-')} must be 1 or more (got {value})")
    if cluster and scheduler:
        raise ShrinkbertError("give --cluster local:N or --scheduler ADDRESS, not both")
    done = existing_shards(out)
    on_dask = bool(cluster or scheduler)  # then the workers run the bundle: here it only answers what it is
    cores = threads or host_threads()
    streams = 1 if on_dask else min(streams or cores, cores)  # on Dask, each worker's threads are its streams
    predictor = load_predictor(bundle, 1 if on_dask else cores // streams)
    # the kind names the columns it reads (a tagger reads "tokens" where an input has word lists and no "text")
    columns = outputs_for(predictor, text_column, text_pair_column, dtype, first_input_columns(inputs)).columns
    options = RunOptions(str(Path(bundle).resolve()), (), columns[0], columns[1] if len(columns) > 1 else None, dtype,
                         batch_tokens, window, threads, streams)
    outputs = options.outputs(predictor)
    options = replace(options, columns=tuple(outputs.columns))
    files = open_inputs(inputs, outputs.columns, id_column)
    identity = run_identity(bundle, files, options, id_column, shard_rows)
    if done:
        check_same_run(out, done, identity)
    writer = ShardWriter(out, identity, {s["index"]: s for s in (done or {}).get("shards", [])})
    if (done or {}).get("complete"):
        return out
    schema = output_schema(outputs, identity["bundle"])
    total = sum(count_rows(f) for f in files)
    bar = progress_bar(total=total, unit="rows", desc="predict", dynamic_ncols=True, disable=not progress,
                       smoothing=0.05)
    try:
        pending = _pending(shards(files, options, id_column, shard_rows), writer, bar)
        if on_dask:
            from shrinkbert.deploy.corpus_dask import run_on_dask  # deferred: dask is imported only to use it

            run_on_dask(cluster or scheduler, options, schema, pending, writer, bar)
        else:
            running = Streams([outputs] + [options.outputs(load_predictor(bundle, cores // streams))
                                           for _ in range(streams - 1)])
            try:
                for index, first, rows in pending:
                    writer.write(index, first, predict_rows(running, rows, schema, window, batch_tokens, bar.update))
            finally:
                running.close()
        bar.total = bar.n  # the count of rows was an estimate (a header, blank lines)
    finally:
        bar.close()
    if not writer.done:
        raise ShrinkbertError(f"no rows in {', '.join(map(str, inputs))}: nothing to predict")
    _remove_temp(out)
    writer.save(complete=True, rows=sum(s["rows"] for s in writer.done.values()))
    return out


def run_identity(bundle, files: list[InputFile], options: RunOptions, id_column: str | None, shard_rows: int) -> dict:
    """What decides a run's output, which the manifest keeps and a resumed run must match: the bundle, the input
    files, and the options that choose a shard's rows and a row's columns (batching and threads only move the
    last digits of an int8 graph's floats, so they may change between two runs)."""
    return {"bundle": bundle_identity(bundle), "inputs": [f.identity() for f in files],
            "options": {"columns": list(options.columns), "id_column": id_column, "shard_rows": shard_rows,
                        "dtype": options.dtype}}


def _pending(stream, writer: ShardWriter, bar) -> Iterator[tuple[int, int, list[dict]]]:
    """The shards the manifest does not record yet (the rest count as done on the bar)."""
    for index, first, rows in stream:
        if index in writer.done:
            bar.update(len(rows))
            continue
        yield index, first, rows


def first_input_columns(inputs: list[str]) -> list[str]:
    """The column names of the first input file (what a kind's default columns are chosen from)."""
    return column_names(open_inputs(inputs, [], None)[0])


def existing_shards(out: Path) -> dict | None:
    """The output folder's manifest (a run to resume), {} for a folder to start in, None for none yet; one
    line where `out` is a file or a folder holding something else."""
    if out.exists() and not out.is_dir():
        raise ShrinkbertError(f"--output {out} is a file: name a folder (new, empty, or a run to resume)")
    if not out.is_dir():
        return None
    manifest = out / MANIFEST
    if manifest.is_file():
        try:
            return json.loads(manifest.read_text())
        except (OSError, json.JSONDecodeError) as err:
            raise ShrinkbertError(f"{manifest} cannot be read ({err}): not a corpus run's output") from err
    if any(not _is_temp(p) for p in out.iterdir()):
        raise ShrinkbertError(f"--output {out} holds other files and no {MANIFEST}: name a new or empty folder")
    return {}


def check_same_run(out: Path, manifest: dict, identity: dict) -> None:
    """One line where the output folder holds a run of another bundle (its content: a copy elsewhere is the
    same bundle), other inputs or other options."""
    old_bundle, new_bundle = (manifest.get("bundle") or {}).get("sha256", ""), identity["bundle"]["sha256"]
    if old_bundle != new_bundle:
        raise ShrinkbertError(f"--output {out} holds a run of another bundle (sha256 {old_bundle[:12]} there, "
                              f"{new_bundle[:12]} now): name another --output, or delete it to start again")
    for key, what in (("inputs", "of other inputs"), ("options", "with other options")):
        if manifest.get(key) != identity[key]:
            raise ShrinkbertError(f"--output {out} holds a run {what} ({_differs(manifest.get(key), identity[key])}): "
                                  "name another --output, or delete it to start again")


def _differs(old, new) -> str:
    if isinstance(old, dict) and isinstance(new, dict):
        keys = [k for k in new if old.get(k) != new.get(k)]
        return "; ".join(f"{k}: {old.get(k)} there, {new.get(k)} now" for k in keys[:2])
    if isinstance(old, list) and isinstance(new, list):
        changed = [n["path"] for n in new if n not in old] + [o["path"] for o in old if o not in new]
        return f"{', '.join(dict.fromkeys(changed[:2]))} changed, added or gone"
    return "it differs"


def _is_temp(path: Path) -> bool:
    return path.name.startswith(".") and path.name.endswith(TEMP_SUFFIX)


def _remove_temp(out: Path) -> None:
    for temp in out.iterdir():
        if _is_temp(temp):
            temp.unlink(missing_ok=True)


def _sync(path: Path) -> None:
    """The file's bytes on disk before it is renamed into place (a crash leaves the old name or the new, whole)."""
    with open(path, "rb") as handle:
        os.fsync(handle.fileno())
