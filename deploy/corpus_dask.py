"""A corpus run on Dask: a shard per task, each worker loading the bundle once.

The driver streams the input, as a run in one process does, and submits each shard's rows as one task
(at most two a worker in flight, so the driver's memory stays bounded); a worker runs the same
`predict_rows` on them with the bundle's Predictor it loaded on its first task, and the driver writes
the returned table as the shard, atomically, and records it in the manifest. The output is the
one-process run's, shard for shard. `local:N` starts a dask.distributed LocalCluster of N worker
processes of one thread each; any other address is an existing scheduler's (tcp://HOST:8786), whose
workers must reach the bundle at the same path (a copy on every machine, or a shared folder).
"""
from __future__ import annotations

from typing import Iterator

import pyarrow as pa

from shrinkbert.core.errors import ShrinkbertError
from shrinkbert.deploy.corpus_batches import RunOptions, predict_rows
from shrinkbert.deploy.corpus_kinds import load_predictor

TASKS_PER_WORKER = 2  # one running, one waiting: workers never idle, the driver holds few shards
_OUTPUTS: dict = {}  # per worker process: the loaded bundle's Outputs, by the run's options


def predict_shard(options: RunOptions, schema: pa.Schema, rows: pa.Table) -> pa.Table:
    """A worker's task: the shard's output table (the bundle loaded once per worker process and options).
    The rows travel as one Arrow table, which Dask sends as it is instead of walking a list of dicts."""
    from distributed import get_worker

    outputs = _OUTPUTS.get(options)
    if outputs is None:
        threads = options.threads or max(1, int(get_worker().state.nthreads))
        outputs = _OUTPUTS[options] = options.outputs(load_predictor(options.bundle, threads))
    return predict_rows(outputs, rows.to_pylist(), schema, options.window, options.batch_tokens)


def open_client(where: str):
    """A Client of a new LocalCluster ("local:N") or of the scheduler at `where`, and the cluster to close."""
    from distributed import Client, LocalCluster

    if where.startswith("local:"):
        try:
            workers = int(where.split(":", 1)[1])
        except ValueError:
            workers = 0
        if workers < 1:
            raise ShrinkbertError(f"--cluster {where}: give local:N, N the worker processes (1 or more)")
        cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None)
        return Client(cluster), cluster
    try:
        return Client(where, timeout="30s"), None
    except (OSError, TimeoutError) as err:
        raise ShrinkbertError(f"--scheduler {where}: cannot reach a Dask scheduler there ({err})") from err


def run_on_dask(where: str, options: RunOptions, schema: pa.Schema, pending: Iterator[tuple[int, int, list[dict]]],
                writer, bar) -> None:
    """Every pending shard as a task on the cluster at `where`; each result written by `writer` as it comes."""
    from distributed import as_completed

    client, cluster = open_client(where)
    try:
        workers = max(1, len(client.scheduler_info().get("workers", {})))
        running = as_completed()
        shards = {}

        def collect_one() -> None:
            future = next(running)
            index, first = shards.pop(future.key)
            table = future.result()  # a task's error is raised here, in the driver
            writer.write(index, first, table)
            bar.update(table.num_rows)

        for index, first, rows in pending:
            future = client.submit(predict_shard, options, schema, pa.Table.from_pylist(rows), pure=False)
            shards[future.key] = (index, first)
            running.add(future)
            while running.count() >= TASKS_PER_WORKER * workers:
                collect_one()
        while running.count():
            collect_one()
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
