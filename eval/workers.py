"""The report's timing workers: one process per variant, started and driven from here.

`start_workers(specs, threads, attention)` starts a `python -m shrinkbert.eval.worker` per
variant (all at once: most of their start-up is importing libraries) and returns a
WorkerProcess per name that opened its variant, with an error line for the others. It is
`launch_workers` (start them and send each its variant; returns at once) then `ready_workers`
(wait for each one's answer): the report launches them before its accuracy pass, so their imports
overlap it, and each worker measures its variant's memory on the way (`memory_of`: the spec's
"memory" flag, then one batch of the largest shape). A WorkerProcess is a timer for
eval.latency.measure_interleaved: `load(key, batches)` sends it the tokenized inputs once,
`time(key, indices)` runs a burst of calls there and returns their milliseconds. Only one worker
runs at a time; the others wait on their pipe, idle.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from typing import Any

from shrinkbert.core.errors import ShrinkbertError
from shrinkbert.eval.latency import host_array
from shrinkbert.eval.worker import from_json, to_json


class WorkerProcess:
    def __init__(self, name: str):
        self.name = name
        self.stderr = tempfile.TemporaryFile()  # a file, not a pipe: a chatty library cannot fill it and block
        env = {**os.environ, "TOKENIZERS_PARALLELISM": os.environ.get("TOKENIZERS_PARALLELISM", "false")}
        self.process = subprocess.Popen([sys.executable, "-m", "shrinkbert.eval.worker"], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=self.stderr, env=env)
        self.pid = self.process.pid
        self.timed_with: dict[str, Any] = {}
        self.opened: str | None = None  # None until the worker answers "open"; then "ok" or its error line

    def send(self, op: str, **fields) -> None:
        try:
            line = json.dumps({"op": op, **fields}, default=to_json).encode() + b"\n"
            self.process.stdin.write(line)
            self.process.stdin.flush()
        except (BrokenPipeError, OSError):
            raise ShrinkbertError(f"the timing worker stopped: {self._last_error()}") from None

    def receive(self) -> dict[str, Any]:
        try:
            line = self.process.stdout.readline()
            if not line:
                raise EOFError
            reply = json.loads(line, object_hook=from_json)
        except (EOFError, ValueError, OSError):
            raise ShrinkbertError(f"the timing worker stopped: {self._last_error()}") from None
        if "error" in reply:
            raise ShrinkbertError(reply["error"])
        return reply

    def request(self, op: str, **fields) -> dict[str, Any]:
        self.send(op, **fields)
        return self.receive()

    def wait_opened(self) -> str:
        """Wait for the worker's answer to "open" (once): "ok", or the error line it gave."""
        if self.opened is None:
            try:
                self.timed_with = self.receive()["timed_with"]
                self.opened = "ok"
            except ShrinkbertError as err:
                self.opened = str(err)
        return self.opened

    def memory_of(self, batch: dict) -> dict[str, Any]:
        """Peak RSS growth from loading the variant and one call on `batch` (opened with memory: true)."""
        if self.wait_opened() != "ok":
            raise ShrinkbertError(self.opened)
        return self.request("memory", batch={name: host_array(value) for name, value in batch.items()})

    # -- the timer interface of eval.latency -------------------------------------------------
    def load(self, key: str, batches: list) -> None:
        arrays = [{name: host_array(value) for name, value in batch.items()} for batch in batches]
        self.request("inputs", key=key, batches=arrays)

    def time(self, key: str, indices: list[int]) -> list[float]:
        return self.request("time", key=key, indices=list(indices))["ms"]

    def close(self) -> None:
        if self.process.poll() is None:
            try:
                self.send("close")
                self.process.wait(timeout=30)
            except (ShrinkbertError, subprocess.TimeoutExpired):
                self.process.kill()
                self.process.wait()
        for stream in (self.process.stdin, self.process.stdout, self.stderr):
            stream.close()

    def _last_error(self) -> str:
        self.process.poll()
        self.stderr.seek(0)
        lines = [line for line in self.stderr.read().decode(errors="replace").splitlines() if line.strip()]
        return lines[-1] if lines else f"exit status {self.process.returncode}"


def launch_workers(specs: dict[str, dict[str, Any]], threads: int,
                   attention: str = "eager") -> dict[str, WorkerProcess]:
    """Start a worker per variant and send each its "open" request, without waiting for the answers.
    specs: {name: {"path", "kind", "manifest", "options" (the loader's own, optional), "memory" (optional)}}."""
    started = {name: WorkerProcess(name) for name in specs}
    for name, worker in started.items():
        spec = specs[name]
        try:
            worker.send("open", path=str(spec["path"]), kind=spec["kind"], threads=threads, attention=attention,
                        manifest=spec.get("manifest") or {}, options=spec.get("options") or {},
                        memory=bool(spec.get("memory")))
        except ShrinkbertError as err:
            worker.opened = str(err)
    return started


def ready_workers(started: dict[str, WorkerProcess]) -> tuple[dict[str, WorkerProcess], dict[str, str]]:
    """({name: worker} for the variants that opened, {name: error line} for those that did not, closed)."""
    errors = {name: worker.wait_opened() for name, worker in started.items() if worker.wait_opened() != "ok"}
    for name in errors:
        started[name].close()
    return {name: worker for name, worker in started.items() if name not in errors}, errors


def start_workers(specs: dict[str, dict[str, Any]], threads: int,
                  attention: str = "eager") -> tuple[dict[str, WorkerProcess], dict[str, str]]:
    """({name: worker} for the variants that opened, {name: error line} for those that did not)."""
    return ready_workers(launch_workers(specs, threads, attention))
