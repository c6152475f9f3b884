"""A bundle's HTTP server: its Predictor behind the routes clients already speak, with dynamic batching.

Copied into every bundle as serve.py beside predict.py, so a bundle serves itself in its own venv
(`pip install -r requirements.txt -r requirements-serve.txt`), without torch and without the kit:

    python serve.py --port 8080                  # this folder's bundle on 127.0.0.1:8080
    python serve.py --bundle DIR --workers 2     # another bundle, two worker processes
    python serve.py --instances 2 --threads 1    # two model calls at once in one worker, a core each

Routes (each answers what the bundle's Predictor answers for a row):

    POST /v1/embeddings   OpenAI's embeddings (input, model, encoding_format float|base64, usage in tokens)
    POST /embed           text-embeddings-inference's (inputs, normalize, truncate)
    POST /predict         classifiers in text-embeddings-inference's form (inputs: a text, a list, or
                          pairs [[a, b], ...]; raw_scores, truncate); taggers and QA in the transformers
                          pipeline's output form (entity dicts; {score, start, end, answer})
    GET  /health          503 until the model answered a warm-up call, then 200
    GET  /info            kind, labels, max_length, the bundle's lineage and what it kept of its source
    GET  /metrics         Prometheus: requests and errors by route and code, latency and batch-size
                          histograms, queue depth, rows

Each worker process holds one Predictor, one asyncio batching queue and --instances threads that
each run one model call at a time: rows from many requests are gathered (up to --max-batch-rows rows
and --max-batch-tokens padded tokens, waiting at most --max-wait-ms for more), sorted by length so
long and short texts are not padded together, and run on a free instance's thread beside the event
loop, which keeps accepting meanwhile. Past --queue-size waiting rows (or --max-queue-ms of queueing) a
request gets 429 with Retry-After. The app is a plain ASGI callable on uvicorn (httptools, uvloop),
its JSON orjson's; the standard library, numpy, uvicorn, orjson and prometheus-client only, and the
bundle's own predict.py and token_ids.py: nothing of shrinkbert.
"""
from __future__ import annotations

import argparse
import asyncio
import base64
import dataclasses
import hmac
import importlib.util
import json
import math
import os
import signal
import socket
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import orjson
from uvicorn.protocols.http.auto import AutoHTTPProtocol

HERE = Path(__file__).resolve().parent
CONFIG_ENV = "SHRINKBERT_SERVE_CONFIG"  # how the supervisor hands the options to its worker processes
API_KEY_ENV = "SHRINKBERT_API_KEY"
ROUTES = ("/v1/embeddings", "/embed", "/predict", "/health", "/info", "/metrics")
OPEN_ROUTES = ("/health",)  # a load balancer's health check needs no key


@dataclasses.dataclass
class Options:
    """The server's options; each is a flag of `python serve.py` and a keyword of `shrinkbert.serve`."""
    bundle: str = str(HERE)
    host: str = "127.0.0.1"
    port: int = 8080
    workers: int = 0  # 0: one per core, each on one thread (on 2 cores, more rows/s than one worker on both)
    instances: int = 1  # model calls one worker runs at once, each on its own thread
    threads: int = 0  # ONNX Runtime intra-op threads per call; 0: the cores divided among workers x instances
    spin: bool = False  # threads that spin between batches take the CPU the event loop needs
    max_batch_rows: int = 32
    max_batch_tokens: int = 8192  # rows x their longest text, per model call
    max_wait_ms: float = 0.0  # 0: batch what queued while the model ran, never hold an idle client
    # rows waiting per worker (their wait: queue_size / rows/s); past it, 429. Four full batches: under overload
    # an accepted row waits about as long as with 128 clients a worker, none of whom is refused
    queue_size: int = 128
    max_queue_ms: float = 0.0  # past this much queueing (Batcher.queue_delay), 429; 0: off
    max_client_batch: int = 128  # inputs per request; past it, 413 (a request never holds more than the queue)
    max_input_chars: int = 100_000  # characters per text; past it, 413
    max_body_bytes: int = 4 << 20
    auto_truncate: bool = False  # truncate texts past max_length when a request does not say
    api_key: str = ""
    drain_timeout: float = 30.0  # seconds SIGTERM waits for accepted requests
    max_connections: int = 4096  # past it uvicorn answers 503 before reading a body
    access_log: bool = False


class Invalid(Exception):
    """A request refused before it reaches the model: its HTTP status, the message and the field."""

    def __init__(self, status: int, message: str, field: str | None = None, retry_after: int | None = None):
        super().__init__(message)
        self.status, self.message, self.field, self.retry_after = status, message, field, retry_after


# ------------------------------------------------------------------------------------------------
# The model: the bundle's own predict.py, and what a row of each kind becomes


def load_predict_module(root: Path):
    """The bundle's predict.py as a module (its helpers, bundle_files.py and the kind's file, beside it)."""
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    spec = importlib.util.spec_from_file_location("bundle_predict", root / "predict.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def check_bundle(root: Path) -> None:
    """Raise (the bundle's own BundleDamaged, or FileNotFoundError) where the bundle cannot be served."""
    if not (root / "predict.py").is_file():
        raise FileNotFoundError(f"{root} is not a bundle (no predict.py)")
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    spec = importlib.util.spec_from_file_location("bundle_files", root / "bundle_files.py")
    if spec is not None and (root / "bundle_files.py").is_file():
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        module.check_files(root)


class Model:
    """The bundle's Predictor and what the server asks of it: each row's group (rows of one group run
    in one call), its token count (for limits, usage and batching) and the call itself."""

    def __init__(self, root: Path, threads: int, spin: bool):
        from tokenizers import Tokenizer

        self.root = root
        module = load_predict_module(root)
        self.manifest = json.loads((root / "shrinkbert.json").read_text()) if (root / "shrinkbert.json").is_file() else {}
        if (root / "labels.json").is_file():
            self.meta = json.loads((root / "labels.json").read_text(encoding="utf-8"))
            self.kind = self.meta.get("kind", "sequence")
            self.max_length: int | None = int(self.meta.get("max_length", 128))
        else:  # an embedding bundle: a graph (embedding.json) or a static table
            meta_file = root / "embedding.json"
            self.meta = json.loads(meta_file.read_text()) if meta_file.is_file() else {}
            self.kind = "embedding"
            self.max_length = int(self.meta["max_length"]) if "max_length" in self.meta else None  # a mean has none
        self.predictor = module.Predictor(root, threads=threads or None, spin=spin)
        self.labels = list(getattr(self.predictor, "labels", []) or [])
        self.dim = getattr(self.predictor, "dim", None)  # an embedder's
        self.serving = SERVING[self.kind]()
        counter = Tokenizer.from_file(str(root / "tokenizer.json"))  # counts tokens: no padding, no cut
        counter.no_padding()
        counter.no_truncation()
        # a text's count from its words' cached ids (token_ids.py: encode's exactly, else encode itself),
        # plus the specials a text or a pair gets: an encode per request costs more than the rest of it
        try:
            from token_ids import WordIds  # the bundle's own, beside predict.py (load_predict_module's path)
            self.word_ids = WordIds(counter)
        except ImportError:  # a bundle written before it held token_ids.py
            self.word_ids = lambda text: counter.encode(text, add_special_tokens=False).ids
        self.specials = (counter.num_special_tokens_to_add(False), counter.num_special_tokens_to_add(True))

    def count(self, inputs: list) -> list[int]:
        """Tokens of each input (specials included): a text, a (text, text) pair, or QA's (question, context)."""
        ids = self.word_ids
        return [len(ids(i)) + self.specials[0] if isinstance(i, str)
                else len(ids(i[0])) + len(ids(i[1])) + self.specials[1] for i in inputs]

    def run(self, group: str, payloads: list) -> list:
        """One model call for rows of one group; one result per row."""
        return self.serving.run(self.predictor, group, payloads)

    def warm_up(self) -> None:
        """One call of the bundle's own kind, so the first client does not pay for ONNX Runtime's first run."""
        self.run(*self.serving.warm_up)

    def info(self) -> dict:
        metrics = self.manifest.get("metrics") or {}
        kept = {key: metrics[key] for key in ("vs_source", "vs_reference", "val_accuracy_bundle") if key in metrics}
        lineage = [{"stage": parent.get("stage", ""), "name": Path(parent.get("path", "")).name,
                    "hash": parent.get("hash", "")} for parent in self.manifest.get("parents") or []]
        return {"model": self.root.name, "kind": self.kind, "labels": self.labels, "max_length": self.max_length,
                "dim": self.dim, "hash": self.manifest.get("hash"), "created": self.manifest.get("created"),
                "lineage": lineage, "retention": kept}


# ------------------------------------------------------------------------------------------------
# What each kind of bundle serves: its routes, its rows' groups and model calls, /predict's answer


class Embedder:
    """An embedding bundle: texts to vectors, on OpenAI's and text-embeddings-inference's routes."""
    routes = ("/v1/embeddings", "/embed")
    warm_up = ("embed", ["warm up"])

    def run(self, p, group: str, payloads: list) -> list:
        return list(p.embed(payloads, batch_size=len(payloads)))

    async def predict(self, server: "Server", data: dict):
        raise Invalid(404, "an embedding bundle answers /v1/embeddings and /embed")


class Classifier:
    """A sequence classifier, of single texts or pairs: text-embeddings-inference's /predict."""
    routes = ("/predict",)
    warm_up = ("single", ["warm up"])

    def run(self, p, group: str, payloads: list) -> list:
        if group == "pair":
            return list(p.logits([a for a, _ in payloads], [b for _, b in payloads]))
        return list(p.logits(payloads))  # the Predictor's own softmax of these is its answer

    async def predict(self, server: "Server", data: dict):
        opts, value = server.opts, data["inputs"]
        truncate, raw = flag(data, "truncate", opts.auto_truncate), flag(data, "raw_scores", False)
        paired = isinstance(value, list) and bool(value) and all(isinstance(v, list) for v in value)
        if paired:
            for i, pair in enumerate(value):
                if len(pair) != 2 or not all(isinstance(t, str) for t in pair):
                    raise Invalid(422, f"inputs[{i}]: a pair is [text, text]", f"inputs[{i}]")
            server.texts([t for pair in value for t in pair], "inputs")  # the same limits on every text
            if len(value) > opts.max_client_batch:
                raise Invalid(413, f"inputs: {len(value)} inputs, more than the server's {opts.max_client_batch}",
                              "inputs")
            payloads, group = [tuple(pair) for pair in value], "pair"
        else:
            payloads, group = server.texts(value, "inputs"), "single"
        logits = await server.answer(group, payloads, server.limit_tokens(payloads, truncate, "inputs"))
        scored = [label_scores(row, server.model.labels, raw) for row in logits]
        return scored[0] if isinstance(value, str) else scored


class Tagger:
    """A token classifier: the token-classification pipeline's entities per text."""
    routes = ("/predict",)
    warm_up = ("tag", ["warm up"])

    def run(self, p, group: str, payloads: list) -> list:
        return p.predict(payloads, batch_size=len(payloads))

    async def predict(self, server: "Server", data: dict):
        texts = server.texts(data["inputs"], "inputs")
        truncate = flag(data, "truncate", server.opts.auto_truncate)
        results = await server.answer("tag", texts, server.limit_tokens(texts, truncate, "inputs"))
        entities = [entity_list(result, server.model.labels) for result in results]
        return entities[0] if isinstance(data["inputs"], str) else entities


class QuestionAnswerer:
    """An extractive QA bundle: the question-answering pipeline's span per {question, context}."""
    routes = ("/predict",)
    warm_up = ("qa", [("Who wrote it?", "It was written by someone.")])

    def run(self, p, group: str, payloads: list) -> list:
        return [p.answer(question, context) for question, context in payloads]  # its windows are its batch

    async def predict(self, server: "Server", data: dict):
        value, limit = data["inputs"], server.opts.max_client_batch
        items = [value] if isinstance(value, dict) else value
        if not isinstance(items, list) or not items:
            raise Invalid(422, "inputs: expected {\"question\", \"context\"} or a non-empty list of them", "inputs")
        if len(items) > limit:
            raise Invalid(413, f"inputs: {len(items)} inputs, more than the server's {limit}", "inputs")
        payloads = []
        for i, item in enumerate(items):
            if not isinstance(item, dict):
                raise Invalid(422, f"inputs[{i}]: expected {{\"question\", \"context\"}}", f"inputs[{i}]")
            for name in ("question", "context"):
                if not isinstance(item.get(name), str):
                    raise Invalid(422, f"inputs[{i}].{name}: expected a text", f"inputs[{i}].{name}")
            server.texts([item["question"], item["context"]], f"inputs[{i}]")
            payloads.append((item["question"], item["context"]))
        answers = await server.answer("qa", payloads, server.model.count(payloads))
        shaped = [{"score": a["score"], "start": a["start"], "end": a["end"], "answer": a["text"]} for a in answers]
        return shaped[0] if isinstance(value, dict) else shaped


SERVING = {"embedding": Embedder, "sequence": Classifier, "token": Tagger, "qa": QuestionAnswerer}  # by labels.json "kind"


# ------------------------------------------------------------------------------------------------
# Dynamic batching


class QueueFull(Exception):
    pass


@dataclasses.dataclass
class Row:
    payload: object
    tokens: int
    future: asyncio.Future
    arrived: float


class Batcher:
    """Rows from every request of one worker, gathered into model calls on `instances` threads.

    Each instance runs one call at a time (ONNX Runtime's session is shared: its Run is thread-safe),
    so rows queue while every instance is busy and the next free one takes them together. A call takes
    rows of one group, oldest first, up to max_batch_rows; they run sorted by length in sub-batches
    whose padded size (rows x longest) stays within max_batch_tokens and whose longest row is at most
    twice the shortest (plus 8 tokens), so short texts are not padded to long ones."""

    def __init__(self, model: Model, opts: Options, metrics: "Metrics"):
        self.model, self.opts, self.metrics = model, opts, metrics
        self.pending: dict[str, list[Row]] = {}
        self.waiting = 0
        self.wakeup: asyncio.Future | None = None  # resolved by the next submit
        self.executor = ThreadPoolExecutor(opts.instances, thread_name_prefix="model")
        self.free = asyncio.Semaphore(opts.instances)  # instances not running a call
        self.task: asyncio.Task | None = None
        self.calls: set[asyncio.Task] = set()
        self.rate: float | None = None  # rows/s, measured (measure())

    def submit(self, group: str, payloads: list, tokens: list[int]) -> list[asyncio.Future]:
        if self.waiting + len(payloads) > self.opts.queue_size:
            raise QueueFull()
        loop = asyncio.get_running_loop()
        now = loop.time()
        rows = [Row(p, t, loop.create_future(), now) for p, t in zip(payloads, tokens)]
        self.pending.setdefault(group, []).extend(rows)
        self.waiting += len(rows)
        self.metrics.queue.set(self.waiting)
        if self.wakeup is not None and not self.wakeup.done():
            self.wakeup.set_result(None)
        return [row.future for row in rows]

    def start(self) -> None:
        self.task = asyncio.get_running_loop().create_task(self.loop())

    async def stop(self) -> None:
        for task in [self.task, *self.calls]:
            if task is not None:
                task.cancel()
                try:
                    await task
                except asyncio.CancelledError:
                    pass
        self.executor.shutdown(wait=False)

    def _take(self) -> tuple[str, list[Row]]:
        group = min((g for g, rows in self.pending.items() if rows), key=lambda g: self.pending[g][0].arrived)
        rows = self.pending[group][:self.opts.max_batch_rows]
        del self.pending[group][:len(rows)]
        self.waiting -= len(rows)
        self.metrics.queue.set(self.waiting)
        return group, rows

    def split(self, rows: list[Row]) -> list[list[Row]]:
        """Sub-batches of rows sorted by length: within max_batch_tokens padded, lengths within 2x + 8."""
        batches: list[list[Row]] = []
        for row in sorted(rows, key=lambda r: r.tokens):
            current = batches[-1] if batches else None
            if current and ((len(current) + 1) * row.tokens <= self.opts.max_batch_tokens
                            and row.tokens <= 2 * current[0].tokens + 8):
                current.append(row)
            else:
                batches.append([row])
        return batches

    async def next_arrival(self, timeout: float | None) -> None:
        """Until the next submit (asyncio.TimeoutError after `timeout` seconds; None: no limit)."""
        self.wakeup = asyncio.get_running_loop().create_future()
        await asyncio.wait_for(self.wakeup, timeout)

    async def loop(self) -> None:
        loop = asyncio.get_running_loop()
        wait = self.opts.max_wait_ms / 1000.0
        while True:
            if not self.waiting:
                await self.next_arrival(None)
            if wait > 0 and self.waiting < self.opts.max_batch_rows:
                oldest = self.oldest_arrival()
                while self.waiting < self.opts.max_batch_rows and loop.time() < oldest + wait:
                    try:
                        await self.next_arrival(oldest + wait - loop.time())
                    except asyncio.TimeoutError:
                        break
            await self.free.acquire()  # rows go on gathering while every instance is busy
            group, rows = self._take()
            call = loop.create_task(self._run_all(loop, group, rows))
            self.calls.add(call)
            call.add_done_callback(self.calls.discard)

    def measure(self, rows: int, seconds: float) -> None:
        """The worker's rows/s (its instances' calls together), a moving average over recent calls."""
        rate = self.opts.instances * rows / max(seconds, 1e-6)
        self.rate = rate if self.rate is None else 0.9 * self.rate + 0.1 * rate

    def queued_seconds(self) -> float:
        """How long the rows now waiting take to run at the measured rate (0 before any call)."""
        return self.waiting / self.rate if self.rate else 0.0

    def oldest_arrival(self) -> float:
        """When the longest-waiting row arrived (loop time); some row must be waiting."""
        return min(rows[0].arrived for rows in self.pending.values() if rows)

    def queue_delay(self) -> float:
        """Seconds a row arriving now would queue: the longer of what the waiting rows take to run at the
        measured rate and how long the oldest has waited past --max-wait-ms. The rate is the model's calls
        alone; where the event loop's own work (HTTP, JSON) shares the cores it drains slower than that,
        and the oldest row's wait is what the queue really holds."""
        if not self.waiting:
            return 0.0
        waited = asyncio.get_running_loop().time() - self.oldest_arrival() - self.opts.max_wait_ms / 1000.0
        return max(self.queued_seconds(), waited)

    async def _run_all(self, loop, group: str, rows: list[Row]) -> None:
        """One instance's share: the taken rows' sub-batches one after another, then the instance is free."""
        try:
            for batch in self.split(rows):
                await self._run(loop, group, batch)
        finally:
            self.free.release()

    async def _run(self, loop, group: str, batch: list[Row]) -> None:
        live = [row for row in batch if not row.future.done()]  # a client that left is not computed for
        if not live:
            return
        began = loop.time()
        try:
            results = await loop.run_in_executor(self.executor, self.model.run, group, [r.payload for r in live])
        except Exception as err:  # the model failed on these rows: their requests get 500, the worker lives
            for row in live:
                if not row.future.done():
                    row.future.set_exception(err)
            return
        self.metrics.batch_rows.observe(len(live))
        self.metrics.rows.inc(len(live))
        self.measure(len(live), loop.time() - began)
        for row, result in zip(live, results):
            if not row.future.done():
                row.future.set_result(result)


# ------------------------------------------------------------------------------------------------
# Metrics


class Metrics:
    """prometheus-client's metrics of one worker; with several workers (PROMETHEUS_MULTIPROC_DIR set
    before the worker starts) every worker writes its own files and /metrics sums them."""

    def __init__(self):
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

        self.multiprocess = bool(os.environ.get("PROMETHEUS_MULTIPROC_DIR"))
        self.registry = None if self.multiprocess else CollectorRegistry()
        kw = {"registry": self.registry}
        self.requests = Counter("shrinkbert_requests", "HTTP requests answered, by route and status code",
                                ["route", "code"], **kw)
        self.errors = Counter("shrinkbert_request_errors", "HTTP requests answered with a 4xx or 5xx code",
                              ["route", "code"], **kw)
        self.latency = Histogram("shrinkbert_request_seconds", "time from a request's arrival to its answer",
                                 ["route"], buckets=(.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10),
                                 **kw)
        self.batch_rows = Histogram("shrinkbert_batch_rows", "rows per model call",
                                    buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256), **kw)
        self.rows = Counter("shrinkbert_rows", "rows run through the model (rate(): rows/s)", **kw)
        self.queue = Gauge("shrinkbert_queue_rows", "rows waiting for the model", multiprocess_mode="livesum", **kw)
        # each (route, code)'s children, looked up once: labels() takes a lock and builds a key per call
        self.answered: dict[tuple[str, int], tuple] = {}

    def observe(self, route: str, status: int, seconds: float) -> None:
        """One answered request: its count (and its error count), and its latency."""
        children = self.answered.get((route, status))
        if children is None:
            code = str(status)
            children = self.answered[(route, status)] = (
                self.requests.labels(route, code), self.errors.labels(route, code) if status >= 400 else None,
                self.latency.labels(route))
        children[0].inc()
        if children[1] is not None:
            children[1].inc()
        children[2].observe(seconds)

    def exposition(self) -> bytes:
        from prometheus_client import CollectorRegistry, generate_latest, multiprocess

        if not self.multiprocess:
            return generate_latest(self.registry)
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
        return generate_latest(registry)


# ------------------------------------------------------------------------------------------------
# Requests and answers: explicit checks, each naming its field


JSON = b"application/json"
ERROR_TYPES = {401: "Unauthorized", 404: "NotFound", 405: "NotFound", 413: "Validation", 422: "Validation",
               429: "Overloaded", 503: "Unhealthy"}


@dataclasses.dataclass
class Reply:
    """What a route answers: its status, its body's bytes, their media type and any further headers."""
    status: int
    body: bytes
    media_type: bytes = JSON
    headers: tuple = ()


def dumps(content) -> bytes:
    """JSON bytes; numpy arrays and scalars as they are (float32 vectors in float32's shortest digits)."""
    return orjson.dumps(content, option=orjson.OPT_SERIALIZE_NUMPY)


def error_reply(route: str, err: Invalid) -> Reply:
    """text-embeddings-inference's error body ({"error", "error_type"}); OpenAI's on /v1/ routes."""
    if route.startswith("/v1/"):
        body = {"error": {"message": err.message, "type": "invalid_request_error" if err.status < 500 else "server_error",
                          "param": err.field, "code": err.status}}
    else:
        body = {"error": err.message, "error_type": ERROR_TYPES.get(err.status, "Backend")}
    headers = ((b"retry-after", str(err.retry_after).encode()),) if err.retry_after else ()
    return Reply(err.status, dumps(body), JSON, headers)


def header(scope, name: bytes) -> bytes | None:
    for key, value in scope["headers"]:  # a handful of headers: a scan costs less than a dict
        if key == name:
            return value
    return None


async def read_json(scope, receive, limit: int) -> dict:
    """The request's body as a JSON object: 413 past `limit` bytes (declared or sent), 422 otherwise wrong."""
    declared = header(scope, b"content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise Invalid(413, f"body: {int(declared):,} bytes, more than the server's {limit:,}", "body")
    body, more = b"", True
    while more:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise Invalid(499, "the client left before sending its body")
        body += message.get("body", b"")
        more = message.get("more_body", False)
        if len(body) > limit:
            raise Invalid(413, f"body: more than the server's {limit:,} bytes", "body")
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError as err:
        raise Invalid(422, f"body: not valid JSON ({err})", "body") from None
    if not isinstance(data, dict):
        raise Invalid(422, "body: expected a JSON object", "body")
    return data


def flag(data: dict, name: str, default: bool) -> bool:
    value = data.get(name, default)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise Invalid(422, f"{name}: expected true or false, got {json.dumps(value)[:40]}", name)
    return value


class Server:
    """The routes of one worker: parse and check a request, queue its rows, shape the answer."""

    def __init__(self, opts: Options):
        self.opts = opts
        self.root = Path(opts.bundle).resolve()
        self.metrics = Metrics()
        self.model: Model | None = None
        self.batcher: Batcher | None = None
        self.ready = False
        self.failed: str | None = None

    # -- life cycle
    async def start(self) -> None:
        """Load the Predictor and answer a warm-up call on a thread; /health says 200 only after."""
        loop = asyncio.get_running_loop()
        threads = self.opts.threads or max(1, cpu_count() // max(1, self.opts.workers * self.opts.instances))
        try:
            self.model = await loop.run_in_executor(None, Model, self.root, threads, self.opts.spin)
            self.batcher = Batcher(self.model, self.opts, self.metrics)
            await loop.run_in_executor(self.batcher.executor, self.model.warm_up)
        except Exception as err:  # reported by /health; the worker stays up to say so
            self.failed = f"{type(err).__name__}: {err}"
            print(f"error: the bundle's model did not load: {self.failed}", file=sys.stderr)
            return
        self.batcher.start()
        self.ready = True

    # -- helpers
    def texts(self, value, field: str) -> list[str]:
        """A text or a non-empty list of texts, each within the server's limits."""
        items = [value] if isinstance(value, str) else value
        if not isinstance(items, list) or not items:
            raise Invalid(422, f"{field}: expected a text or a non-empty list of texts", field)
        if len(items) > self.opts.max_client_batch:
            raise Invalid(413, f"{field}: {len(items)} inputs, more than the server's {self.opts.max_client_batch}",
                          field)
        for i, text in enumerate(items):
            if not isinstance(text, str):
                raise Invalid(422, f"{field}[{i}]: expected a text, got {type(text).__name__}", f"{field}[{i}]")
            if len(text) > self.opts.max_input_chars:
                raise Invalid(413, f"{field}[{i}]: {len(text):,} characters, more than the server's "
                                   f"{self.opts.max_input_chars:,}", f"{field}[{i}]")
        return items

    def limit_tokens(self, inputs: list, truncate: bool, field: str) -> list[int]:
        """Each input's tokens; past max_length, 413 unless `truncate` (then max_length is what it runs)."""
        counts = self.model.count(inputs)
        limit = self.model.max_length
        if limit is None:
            return counts
        for i, n in enumerate(counts):
            if n > limit and not truncate:
                raise Invalid(413, f"{field}[{i}]: {n} tokens, more than the model's max_length {limit}; send "
                                   "truncate: true or a shorter text", f"{field}[{i}]")
        return [min(n, limit) for n in counts]

    def need(self, route: str) -> None:
        """503 while the model loads; 404 for a route the bundle's kind does not answer; 429 while the
        queue is full, before the body is read or tokenized: under overload a refusal costs little."""
        if not self.ready:
            raise Invalid(503, self.failed or "the model is loading", retry_after=1)
        if route not in self.model.serving.routes:
            raise Invalid(404, f"this bundle is a {self.model.kind} model: use {' or '.join(self.model.serving.routes)}")
        if (self.batcher.waiting >= self.opts.queue_size
                or 0 < self.opts.max_queue_ms < self.batcher.queue_delay() * 1000):
            raise self.full()

    def full(self) -> Invalid:
        return Invalid(429, f"the queue is full ({self.batcher.waiting} rows waiting, about "
                            f"{self.batcher.queue_delay() * 1000:.0f} ms of queueing); retry shortly", retry_after=1)

    async def answer(self, group: str, payloads: list, tokens: list[int]) -> list:
        if len(payloads) > self.opts.queue_size:  # could never be queued: no retry helps
            raise Invalid(413, f"inputs: {len(payloads)} rows, more than the server's queue of {self.opts.queue_size}")
        try:
            futures = self.batcher.submit(group, payloads, tokens)
        except QueueFull:
            raise self.full() from None
        try:
            if len(futures) == 1:  # most requests are one row: no gathering future for them
                return [await futures[0]]
            return await asyncio.gather(*futures)
        except asyncio.CancelledError:
            for future in futures:
                future.cancel()
            raise

    # -- routes: POST routes take the request's JSON object, GET routes nothing; each answers a Reply
    async def embeddings(self, data: dict) -> Reply:
        if "input" not in data:
            raise Invalid(422, "input: missing (a text or a list of texts)", "input")
        value = data["input"]
        if isinstance(value, list) and value and not isinstance(value[0], str):
            raise Invalid(422, "input: token-id arrays are not supported; send texts", "input")
        texts = self.texts(value, "input")
        fmt = data.get("encoding_format") or "float"
        if fmt not in ("float", "base64"):
            raise Invalid(422, f"encoding_format: expected 'float' or 'base64', got {json.dumps(fmt)[:40]}",
                          "encoding_format")
        model = data.get("model")
        if model is not None and not isinstance(model, str):
            raise Invalid(422, "model: expected a string", "model")
        dimensions = data.get("dimensions")
        if dimensions is not None and dimensions != self.model.dim:
            raise Invalid(422, f"dimensions: this model's vectors have {self.model.dim}", "dimensions")
        tokens = self.limit_tokens(texts, self.opts.auto_truncate, "input")
        vectors = await self.answer("embed", texts, tokens)
        rows = [{"object": "embedding", "index": i,
                 "embedding": (base64.b64encode(np.asarray(v, dtype="<f4").tobytes()).decode() if fmt == "base64"
                               else np.ascontiguousarray(v, dtype=np.float32))} for i, v in enumerate(vectors)]
        used = int(sum(tokens))
        return Reply(200, dumps({"object": "list", "data": rows, "model": model or self.root.name,
                                 "usage": {"prompt_tokens": used, "total_tokens": used}}))

    async def embed(self, data: dict) -> Reply:
        if "inputs" not in data:
            raise Invalid(422, "inputs: missing (a text or a list of texts)", "inputs")
        texts = self.texts(data["inputs"], "inputs")
        normalize = flag(data, "normalize", True)
        tokens = self.limit_tokens(texts, flag(data, "truncate", self.opts.auto_truncate), "inputs")
        vectors = np.stack(await self.answer("embed", texts, tokens)).astype(np.float32, copy=False)
        if normalize:  # a bundle's vectors are unit length where its model normalises: then this changes nothing
            vectors = vectors / np.maximum(np.linalg.norm(vectors, axis=-1, keepdims=True), 1e-12)
        return Reply(200, dumps(vectors))

    async def predict(self, data: dict) -> Reply:
        if "inputs" not in data:
            raise Invalid(422, "inputs: missing", "inputs")
        return Reply(200, dumps(await self.model.serving.predict(self, data)))

    async def health(self) -> Reply:
        if self.ready:
            return Reply(200, b'{"status":"ok"}')
        return Reply(503, dumps({"status": "failed" if self.failed else "loading", "error": self.failed}), JSON,
                     ((b"retry-after", b"1"),))

    async def info(self) -> Reply:
        if self.model is None:
            raise Invalid(503, self.failed or "the model is loading", retry_after=1)
        return Reply(200, dumps({**self.model.info(), "max_batch_rows": self.opts.max_batch_rows,
                                 "max_batch_tokens": self.opts.max_batch_tokens, "max_wait_ms": self.opts.max_wait_ms,
                                 "queue_size": self.opts.queue_size, "max_queue_ms": self.opts.max_queue_ms,
                                 "max_client_batch": self.opts.max_client_batch,
                                 "workers": self.opts.workers, "instances": self.opts.instances}))

    async def prometheus(self) -> Reply:
        return Reply(200, self.metrics.exposition(), b"text/plain; version=0.0.4; charset=utf-8")


def label_scores(logits, labels: list[str], raw: bool) -> list[dict]:
    """text-embeddings-inference's classifier answer: [{"label", "score"}], best first; probabilities
    (the bundle's softmax) unless raw_scores. Plain floats: a row's few labels cost numpy more than math."""
    values = [float(v) for v in logits]
    if not raw:
        top = max(values)
        exps = [math.exp(v - top) for v in values]
        total = sum(exps)
        values = [e / total for e in exps]
    order = sorted(range(len(values)), key=lambda i: -values[i])  # stable: ties keep the labels' order
    return [{"label": labels[i], "score": values[i]} for i in order]


def entity_list(result: dict, labels: list[str]) -> list[dict]:
    """The token-classification pipeline's answer for one text: its entities (B-/I- tags merged); a
    tag set without B-/I- tags (part of speech) answers one entry per word."""
    if any(label.startswith(("B-", "I-")) for label in labels):
        return result["entities"]
    return [{"entity_group": w["tag"], "score": w["score"], "word": w["word"], "start": w["start"], "end": w["end"]}
            for w in result["words"]]


def cpu_count() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


class App:
    """The ASGI app of one worker: its routes, the API key (constant-time compare), each request's
    count, code and latency, and the model's loading at startup. A plain ASGI callable on uvicorn:
    the framework layers a request would otherwise pass through cost more than the rest of the
    server's own work on a one-row request."""

    def __init__(self, opts: Options):
        self.opts = opts
        self.server = server = Server(opts)
        self.key = (opts.api_key or os.environ.get(API_KEY_ENV, "")).encode()
        # path -> (method, handler, whether it reads a JSON body)
        self.routes = {"/v1/embeddings": ("POST", server.embeddings, True), "/embed": ("POST", server.embed, True),
                       "/predict": ("POST", server.predict, True), "/health": ("GET", server.health, False),
                       "/info": ("GET", server.info, False), "/metrics": ("GET", server.prometheus, False)}
        self.loading: asyncio.Task | None = None

    def authorized(self, scope) -> bool:
        if not self.key or scope["path"] in OPEN_ROUTES:
            return True
        given = header(scope, b"authorization") or b""
        given = given[7:] if given[:7].lower() == b"bearer " else header(scope, b"x-api-key") or b""
        return hmac.compare_digest(given, self.key)

    async def __call__(self, scope, receive, send):
        if scope["type"] == "lifespan":
            return await self.lifespan(receive, send)
        if scope["type"] != "http":
            return
        start, path = time.perf_counter(), scope["path"]
        route = path if path in ROUTES else "other"
        try:
            reply = await self.respond(scope, receive, path)
        except Invalid as err:
            reply = error_reply(route, err)
        except Exception as err:  # a fault of the server's own: the request gets 500, the worker lives
            reply = error_reply(route, Invalid(500, f"{type(err).__name__}: {err}"))
        if reply.status != 499:  # a client that left is not answered
            await send({"type": "http.response.start", "status": reply.status,
                        "headers": [(b"content-type", reply.media_type),
                                    (b"content-length", str(len(reply.body)).encode()), *reply.headers]})
            await send({"type": "http.response.body", "body": reply.body})
        self.server.metrics.observe(route, reply.status, time.perf_counter() - start)

    async def respond(self, scope, receive, path: str) -> Reply:
        found = self.routes.get(path)
        if found is None:
            raise Invalid(404, f"no route {path}: the server answers {', '.join(ROUTES)}")
        if not self.authorized(scope):
            raise Invalid(401, "a valid API key is needed: Authorization: Bearer KEY")
        method, handler, reads_body = found
        if scope["method"] != method and not (method == "GET" and scope["method"] == "HEAD"):
            raise Invalid(405, f"{path} answers {method}")
        if not reads_body:
            return await handler()
        self.server.need(path)  # before the body is read: a refusal under overload costs little
        return await handler(await read_json(scope, receive, self.opts.max_body_bytes))

    async def lifespan(self, receive, send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                # One worker loads in the background, /health answering 503 meanwhile. One of several (a
                # new one replacing a worker that died) loads before it accepts: the others take its share.
                self.loading = asyncio.get_running_loop().create_task(self.server.start())
                if self.opts.workers > 1:
                    await self.loading
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                if self.loading is not None:
                    self.loading.cancel()
                if self.server.batcher is not None:
                    await self.server.batcher.stop()
                await send({"type": "lifespan.shutdown.complete"})
                return


def create_app(opts: Options | None = None) -> App:
    """The ASGI app of one worker (uvicorn's factory: the options come from the supervisor's environment)."""
    return App(opts or Options(**json.loads(os.environ[CONFIG_ENV])))

# ------------------------------------------------------------------------------------------------
# The command


class NoDelayHTTP(AutoHTTPProtocol):
    """uvicorn's HTTP protocol with Nagle's algorithm off on every connection. asyncio turns it off
    itself only for a socket it knows as TCP; a worker's socket, handed over from the supervisor,
    loses that, and a response written as headers then body then waits for the client's delayed ACK
    (Linux's delayed-ACK timer) on every keep-alive request."""

    def connection_made(self, transport) -> None:
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                pass
        super().connection_made(transport)


def run(opts: Options) -> int:
    """Check the bundle, then serve it until SIGTERM or Ctrl-C (accepted requests are answered first)."""
    import uvicorn

    root = Path(opts.bundle).resolve()
    try:
        check_bundle(root)
    except Exception as err:  # damaged or not a bundle: one line, nothing started
        print(f"error: {err}", file=sys.stderr)
        return 2
    opts = dataclasses.replace(opts, bundle=str(root), api_key=opts.api_key or os.environ.get(API_KEY_ENV, ""),
                               workers=opts.workers or cpu_count())
    # proxy_headers off: nothing here reads a client's address (an access log behind a proxy names the proxy)
    common = dict(host=opts.host, port=opts.port, log_level="warning", access_log=opts.access_log, proxy_headers=False,
                  timeout_graceful_shutdown=int(opts.drain_timeout), limit_concurrency=opts.max_connections)
    if opts.workers <= 1:
        # uvicorn drains on SIGTERM/SIGINT, then raises the signal again for the handler it found: a
        # quiet one here, so a drained server exits 0 instead of dying of the signal afterwards
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: None)
        uvicorn.run(create_app(opts), http=NoDelayHTTP, **common)
        return 0
    # Several workers: uvicorn's supervisor starts them from an import string (and starts a new one
    # where one dies); each reads the options from the environment and writes its metrics apart.
    if str(HERE) not in sys.path:
        sys.path.insert(0, str(HERE))
    with tempfile.TemporaryDirectory(prefix="shrinkbert-metrics-") as metrics_dir:
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = metrics_dir
        os.environ[CONFIG_ENV] = json.dumps(dataclasses.asdict(opts))
        uvicorn.run(f"{Path(__file__).stem}:create_app", factory=True, workers=opts.workers,
                    http=f"{Path(__file__).stem}:NoDelayHTTP", **common)
    return 0


def parser(prog: str = "serve.py", bundle_positional: bool = False) -> argparse.ArgumentParser:
    """The command's options; `bundle_positional`: the bundle is its first argument (`shrinkbert serve BUNDLE`)."""
    defaults = Options()
    p = argparse.ArgumentParser(prog=prog, description="Serve a bundle over HTTP: OpenAI's /v1/embeddings, "
                                "text-embeddings-inference's /embed and /predict, /health, /info and /metrics.")
    if bundle_positional:
        p.add_argument("bundle", metavar="BUNDLE", help="the bundle folder to serve")
    else:
        p.add_argument("--bundle", default=defaults.bundle, help="the bundle folder (default: the one holding this file)")
    p.add_argument("--host", default=defaults.host, help="address to bind (default 127.0.0.1: this machine only; "
                   "0.0.0.0 to accept from the network)")
    p.add_argument("--port", type=int, default=defaults.port, help="port to bind")
    p.add_argument("--workers", type=int, default=defaults.workers,
                   help="worker processes, each with its own model and queue; one that dies is replaced (default "
                        "0: one per core, each on one thread)")
    p.add_argument("--instances", type=int, default=defaults.instances,
                   help="model calls a worker runs at once, each on a thread of its own (one model in memory)")
    p.add_argument("--threads", type=int, default=defaults.threads,
                   help="ONNX Runtime threads per model call (0: the cores divided among workers x instances)")
    p.add_argument("--spin", action="store_true", help="let ONNX Runtime's threads spin between batches (faster "
                   "alone on a quiet machine; takes CPU from the event loop)")
    p.add_argument("--max-batch-rows", type=int, default=defaults.max_batch_rows, help="most rows per model call")
    p.add_argument("--max-batch-tokens", type=int, default=defaults.max_batch_tokens,
                   help="most padded tokens (rows x longest text) per model call")
    p.add_argument("--max-wait-ms", type=float, default=defaults.max_wait_ms,
                   help="how long a row waits for others to fill its batch (0: run what queued while the model ran)")
    p.add_argument("--max-queue-ms", type=float, default=defaults.max_queue_ms,
                   help="a request is refused (429) while a row would queue longer than this (the waiting rows "
                        "at the worker's measured rows/s, or the oldest one's wait so far): what an accepted "
                        "request waits under overload (0: no bound but --queue-size)")
    p.add_argument("--queue-size", type=int, default=defaults.queue_size,
                   help="rows waiting per worker; past it a request gets 429 with Retry-After")
    p.add_argument("--max-client-batch", type=int, default=defaults.max_client_batch,
                   help="inputs per request; past it 413")
    p.add_argument("--max-input-chars", type=int, default=defaults.max_input_chars,
                   help="characters per text; past it 413")
    p.add_argument("--max-body-bytes", type=int, default=defaults.max_body_bytes, help="request body size; past it 413")
    p.add_argument("--auto-truncate", action="store_true",
                   help="truncate texts past max_length when a request does not say (else 413)")
    p.add_argument("--api-key", default="", help=f"required as 'Authorization: Bearer KEY' on every route but "
                   f"/health (default: ${API_KEY_ENV}, else none)")
    p.add_argument("--drain-timeout", type=float, default=defaults.drain_timeout,
                   help="seconds SIGTERM waits for accepted requests before exiting")
    p.add_argument("--max-connections", type=int, default=defaults.max_connections,
                   help="open connections per worker; past it uvicorn answers 503")
    p.add_argument("--access-log", action="store_true", help="log every request (uvicorn's access log)")
    return p


def options_from(argv: list[str] | None = None, prog: str = "serve.py", bundle_positional: bool = False) -> Options:
    """Options from a command line, each bound checked (argparse's one `error:` line and exit 2 otherwise)."""
    command = parser(prog, bundle_positional)
    args = command.parse_args(argv)
    for name in ("instances", "max_batch_rows", "max_batch_tokens", "queue_size", "max_client_batch", "max_input_chars",
                 "max_body_bytes", "max_connections"):
        if getattr(args, name) < 1:
            command.error(f"--{name.replace('_', '-')} must be at least 1")
    if min(args.workers, args.threads, args.max_wait_ms, args.drain_timeout, args.max_queue_ms) < 0:
        command.error("--workers, --threads, --max-wait-ms, --max-queue-ms and --drain-timeout cannot be negative")
    return Options(**vars(args))


def main(argv: list[str] | None = None) -> int:
    return run(options_from(argv))


if __name__ == "__main__":
    sys.exit(main())
