"""One shard's answers: its rows sorted by token count within windows, run in batches sized in tokens, and put
back in input order as an Arrow table; the same function in one process, on a Dask worker or in a Spark UDF.
"""
from __future__ import annotations

import json
import queue
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from typing import Callable, Iterator

import numpy as np
import pyarrow as pa

from shrinkbert.deploy.corpus_kinds import LENGTH_ROWS, Counted, Outputs, outputs_for

# Most padded tokens (rows x the longest row) a model call holds. Each stream's ONNX Runtime arena keeps
# the largest call's activations for the rest of the run, and attention's grow with rows x longest^2, so a
# small call keeps memory low; calls of a few thousand tokens still share their fixed cost over enough rows
# to run as fast as larger ones (bench/corpus_throughput.py --batch-tokens compares sizes).
BATCH_TOKENS = 2048


@dataclass(frozen=True)
class RunOptions:
    """What a shard needs to be computed anywhere: the columns, the batching and the runtime."""
    bundle: str
    columns: tuple[str, ...]
    text_column: str | None
    text_pair_column: str | None
    dtype: str = "float32"
    batch_tokens: int = BATCH_TOKENS
    window: int = 4096
    threads: int | None = None
    streams: int = 1

    def outputs(self, predictor) -> Outputs:
        return outputs_for(predictor, self.text_column, self.text_pair_column, self.dtype)


class Streams:
    """Model calls run at once on threads of their own, each through an Outputs (its own Predictor: a
    bundle's tokenizer is reconfigured by some kinds' calls, a QA bundle's windows, so none is shared).
    ONNX Runtime releases the GIL while it computes, so two one-thread calls keep two cores busy; on
    short rows that runs more rows/s than one two-thread call, whose threads wait on each other."""

    def __init__(self, outputs: list[Outputs]):
        self.outputs = outputs
        self.free: queue.SimpleQueue = queue.SimpleQueue()  # the Outputs no call holds
        for each in outputs:
            self.free.put(each)
        self.pool = ThreadPoolExecutor(len(outputs), thread_name_prefix="stream") if len(outputs) > 1 else None

    @property
    def first(self) -> Outputs:
        return self.outputs[0]

    def count(self, rows: list[dict]) -> Counted:
        """Each row's token count and encoding (Outputs.count), its share of the rows counted on each stream at
        once: the tokenizer releases the GIL, and a count on one thread would leave the other streams idle."""
        if self.pool is None:
            return self.first.count(rows)
        share = max(LENGTH_ROWS, -(-len(rows) // len(self.outputs)))
        parts = [(rows[start:start + share],) for start in range(0, len(rows), share)]
        return sum(self.pool.map(partial(self._on_free_stream, "count"), parts), Counted([], []))

    def predict(self, batches: list[tuple[list[dict], list | None]]) -> list[dict[str, pa.Array]]:
        """Each batch's output columns (a batch: its rows and their encodings, or None), in the order of `batches`."""
        if self.pool is None:
            return [self.first.predict(*batch) for batch in batches]
        return list(self.pool.map(partial(self._on_free_stream, "predict"), batches))

    def _on_free_stream(self, method: str, arguments: tuple):
        """Outputs.<method>(*arguments) on a stream no other call holds, given back when done."""
        outputs = self.free.get()
        try:
            return getattr(outputs, method)(*arguments)
        finally:
            self.free.put(outputs)

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown()


def token_batches(lengths: list[int], order: list[int], batch_tokens: int) -> Iterator[list[int]]:
    """Runs of `order` (row indices sorted by length) whose padded size, rows x the longest, stays within
    `batch_tokens` (a row longer than that runs alone)."""
    batch, longest = [], 0
    for index in order:
        size = max(longest, lengths[index])
        if batch and size * (len(batch) + 1) > batch_tokens:
            yield batch
            batch, size = [], lengths[index]
        batch.append(index)
        longest = size
    if batch:
        yield batch


def predict_rows(outputs: Outputs | Streams, rows: list[dict], schema: pa.Schema, window: int, batch_tokens: int,
                 advance: Callable[[int], None] = lambda n: None) -> pa.Table:
    """The output table of `rows` (one shard), in their order: each window of rows sorted by length and run
    in batches of at most `batch_tokens` tokens (on several streams at once where `outputs` is a Streams)."""
    streams = outputs if isinstance(outputs, Streams) else Streams([outputs])
    tables = []
    for start in range(0, len(rows), window):
        part = rows[start:start + window]
        counted = streams.count(part)
        order = sorted(range(len(part)), key=counted.lengths.__getitem__)
        batches = list(token_batches(counted.lengths, order, batch_tokens))
        encodings = counted.encodings
        pieces = streams.predict([([part[i] for i in batch], None if encodings is None else [encodings[i] for i in batch])
                                  for batch in batches])
        done = [i for batch in batches for i in batch]
        back = pa.array(np.argsort(np.asarray(done), kind="stable"))  # sorted position of each row in input order
        columns = {"id": pa.array([r["id"] for r in part], pa.string())}
        for name in pieces[0]:
            columns[name] = pa.concat_arrays([piece[name] for piece in pieces]).take(back)
        tables.append(pa.Table.from_pydict(columns, schema=schema))
        advance(len(part))
    return pa.concat_tables(tables)


def output_schema(outputs: Outputs, bundle: dict) -> pa.Schema:
    fields = [pa.field("id", pa.string())] + outputs.fields()
    return pa.schema(fields, metadata={"shrinkbert.bundle": json.dumps(bundle), **outputs.metadata()})
