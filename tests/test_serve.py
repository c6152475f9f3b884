"""The bundle's HTTP server (deploy/serve.py, copied into every bundle as serve.py): a real server in a
subprocess on 127.0.0.1 and real HTTP (httpx, and the openai client), for every kind of bundle.

What a client gets equals the bundle's own Predictor on the same rows, alone and batched with other
clients' rows: labels, tags and spans exactly; probabilities and vectors within BATCH_TOLERANCE
(dynamic int8 quantizes a batch's activations together, padding included). Bad requests get their
code and a message naming the field; a full queue 429; SIGTERM drains; a damaged bundle refuses to
start; the API key is enforced. The tiny bundles are built once per module (about 40 s on 2 cores).
"""
from __future__ import annotations

import base64
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import httpx
import numpy as np
import pytest
from fixtures import import_blocker, make_decisive, make_int8_embedding_graph, make_tiny_qa

# Largest |difference| allowed between a row's scores (or vector entries) served in a batch and the
# same row run alone: dynamic int8 computes each batch's activation scale over the whole batch.
BATCH_TOLERANCE = 0.02
TEXTS = ["a warm and clever film", "the plot was dull and tedious", "fine", "good good good movie",
         "it was a very boring and clumsy story but the actor was brilliant and funny", "bad"]
ENV = {**os.environ, "TOKENIZERS_PARALLELISM": "false", "OMP_NUM_THREADS": "1"}


def build(model: Path, out: Path, **options) -> Path:
    """The bundle stage with its runtime set, not timed (seconds saved per bundle)."""
    from shrinkbert.compress import bundle

    return bundle.run(bundle.Config(model=str(model), output_dir=str(out), threads="1", spin="off", **options))


def int8_of(model: Path, root: Path, **options) -> Path:
    from shrinkbert.compress import export, quantize

    fp32 = export.run(export.Config(model=str(model), output_dir=str(root / "fp32"), parity_rows=8, **options))
    return quantize.run(quantize.Config(model=str(fp32), output_dir=str(root / "int8"), **options))


def static_student(root: Path) -> Path:
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers

    from shrinkbert.students.static import StaticEmbedder

    vocab = {"[UNK]": 0, "good": 1, "movie": 2, "bad": 3, "plot": 4, "great": 5, "film": 6}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.Lowercase()
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    table = np.random.default_rng(0).normal(size=(len(vocab), 6)).astype(np.float32)
    StaticEmbedder(table, tokenizer).save(root / "student")
    return root / "student"


def make_bundles(root: Path) -> dict[str, Path]:
    """One tiny bundle of every kind under `root`."""
    return {
        "sequence": build(int8_of(make_decisive(root / "seq" / "model"), root / "seq"), root / "seq" / "bundle",
                          parity_rows=8),
        "token": build(int8_of(make_decisive(root / "tok" / "model", token=True), root / "tok"),
                       root / "tok" / "bundle", parity_rows=8),
        "qa": build(int8_of(make_tiny_qa(root / "qa" / "model"), root / "qa", max_length=64), root / "qa" / "bundle",
                    parity_rows=4, max_length=64),
        "embedding": build(make_int8_embedding_graph(root / "emb"), root / "emb" / "bundle"),
        "static": build(static_student(root / "static"), root / "static" / "bundle"),
    }


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Running:
    """A `python BUNDLE/serve.py` subprocess on 127.0.0.1 and an httpx client to it."""

    def __init__(self, bundle: Path, *args: str, env: dict | None = None, kit: bool = False,
                 command: list[str] | None = None):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        command = command or ([sys.executable, "-m", "shrinkbert.cli", "serve", str(bundle)] if kit
                              else [sys.executable, str(bundle / "serve.py")])
        self.process = subprocess.Popen([*command, "--port", str(self.port), *args], cwd=str(bundle),
                                        env=env or ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.client = httpx.Client(base_url=self.url, timeout=60)

    def wait_ready(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"the server exited {self.process.returncode}: {self.process.stderr.read()}")
            try:
                if self.client.get("/health").status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        raise AssertionError("the server did not become ready")

    def stop(self) -> None:
        self.client.close()
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)


@contextmanager
def serving(bundle: Path, *args: str, env: dict | None = None, kit: bool = False, command: list[str] | None = None):
    server = Running(bundle, *args, env=env, kit=kit, command=command)
    try:
        server.wait_ready()
        yield server
    finally:
        server.stop()


def predictor(bundle: Path):
    """The bundle's own Predictor (its predict.py), as a user of the bundle calls it."""
    import importlib.util

    sys.path.insert(0, str(bundle))
    try:
        spec = importlib.util.spec_from_file_location(f"predict_{bundle.parent.name}", bundle / "predict.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module.Predictor(bundle, threads=1)
    finally:
        sys.path.remove(str(bundle))


@pytest.fixture(scope="module")
def bundles(tmp_path_factory) -> dict[str, Path]:
    return make_bundles(tmp_path_factory.mktemp("serve"))


def metric(server: Running, name: str) -> float:
    """The sum of one Prometheus sample's values over its labels, read from /metrics."""
    lines = server.client.get("/metrics").text.splitlines()
    return sum(float(line.rsplit(" ", 1)[1]) for line in lines if line.startswith(name + "{") or line.startswith(name + " "))


def concurrently(calls: list, clients: int = 20) -> list:
    """Each call (a function of no arguments) on one of `clients` threads, results in order."""
    with ThreadPoolExecutor(clients) as pool:
        return list(pool.map(lambda call: call(), calls))


def batched(server: Running) -> bool:
    """Whether the server ran at least one model call of more than one row."""
    lines = server.client.get("/metrics").text.splitlines()
    one = [float(line.rsplit(" ", 1)[1]) for line in lines if line.startswith('shrinkbert_batch_rows_bucket{le="1.0"}')]
    return metric(server, "shrinkbert_batch_rows_count") > sum(one)


def post(server: Running, route: str, body) -> object:
    response = httpx.post(server.url + route, json=body, timeout=60)
    assert response.status_code == 200, response.text
    return response.json()


def test_a_classifier_answers_as_its_predictor_alone_and_batched_with_20_clients(bundles):
    bundle = bundles["sequence"]
    own = predictor(bundle)
    pairs = list(zip(TEXTS, reversed(TEXTS)))
    expected = own.predict(TEXTS, batch_size=1)
    expected_pairs = own.predict([a for a, _ in pairs], [b for _, b in pairs], batch_size=1)
    with serving(bundle, "--max-wait-ms", "20") as server:
        alone = [post(server, "/predict", {"inputs": text}) for text in TEXTS]
        together = concurrently([lambda t=t: post(server, "/predict", {"inputs": t}) for t in TEXTS * 4])
        listed = post(server, "/predict", {"inputs": TEXTS})
        paired = post(server, "/predict", {"inputs": [list(pair) for pair in pairs]})
        raw = post(server, "/predict", {"inputs": TEXTS[0], "raw_scores": True})
        assert batched(server)
    gap = 0.0
    for got, want in zip(alone + together + listed + paired, (expected + expected * 4 + expected + expected_pairs)):
        assert got[0]["label"] == want["label"]
        assert [s["score"] for s in got] == sorted((s["score"] for s in got), reverse=True)
        gap = max(gap, max(abs(s["score"] - want["scores"][s["label"]]) for s in got))
    for got, want in zip(alone, expected):  # alone: the Predictor's own numbers
        assert all(abs(s["score"] - want["scores"][s["label"]]) < 1e-6 for s in got)
    assert gap <= BATCH_TOLERANCE, gap
    logits = own.logits([TEXTS[0]])[0]
    assert {s["label"]: s["score"] for s in raw} == pytest.approx(dict(zip(own.labels, logits.tolist())), abs=1e-5)


def test_two_model_instances_in_one_worker_answer_as_the_predictor(bundles):
    bundle = bundles["sequence"]
    expected = predictor(bundle).predict(TEXTS, batch_size=1)
    with serving(bundle, "--instances", "2", "--threads", "1") as server:
        together = concurrently([lambda t=t: post(server, "/predict", {"inputs": t}) for t in TEXTS * 4])
        info = server.client.get("/info").json()
        calls = metric(server, "shrinkbert_batch_rows_count")
    assert info["instances"] == 2
    assert 1 <= calls <= len(TEXTS) * 4
    for got, want in zip(together, expected * 4):
        assert got[0]["label"] == want["label"]
        assert max(abs(s["score"] - want["scores"][s["label"]]) for s in got) <= BATCH_TOLERANCE


def decisive(own, text: str) -> bool:
    """Whether every word of `text` has its tag by more than 2 x BATCH_TOLERANCE over the runner-up,
    alone: a closer tie is one int8's batch-wide rounding may decide either way."""
    encoding = own.encode([text])
    probs = np.sort(own.probabilities(encoding)[0], axis=-1)
    return bool(all(probs[i, -1] - probs[i, -2] > 2 * BATCH_TOLERANCE
                    for i, word in enumerate(encoding[0].word_ids) if word is not None))


def test_a_tagger_answers_the_pipelines_entities_as_its_predictor(bundles):
    bundle = bundles["token"]
    own = predictor(bundle)
    expected = own.predict(TEXTS, batch_size=1)
    with serving(bundle, "--max-wait-ms", "20") as server:
        alone = [post(server, "/predict", {"inputs": text}) for text in TEXTS]
        together = concurrently([lambda t=t: post(server, "/predict", {"inputs": t}) for t in TEXTS * 4])
        assert batched(server)
    spans = [[(e["entity_group"], e["word"], e["start"], e["end"]) for e in row] for row in alone + together]
    wanted = [[(e["entity_group"], e["word"], e["start"], e["end"]) for e in row["entities"]] for row in expected * 5]
    assert spans[:len(TEXTS)] == wanted[:len(TEXTS)]  # alone: the Predictor's own answer
    sure = [decisive(own, text) for text in TEXTS] * 5
    assert sum(sure[:len(TEXTS)]) >= 2
    for got, want, text_is_decisive in zip(spans, wanted, sure):
        assert got == want or not text_is_decisive
    for got, want in zip(alone, expected):
        assert all(abs(g["score"] - w["score"]) < 1e-6 for g, w in zip(got, want["entities"]))


def test_a_qa_bundle_answers_the_pipelines_spans_as_its_predictor(bundles):
    bundle = bundles["qa"]
    own = predictor(bundle)
    context = "The novel was written by Jane Austen in 1813 and published in London. " * 6
    questions = ["Who wrote the novel?", "When was it written?", "Where was it published?"]
    expected = [own.answer(q, context) for q in questions]
    with serving(bundle) as server:
        one = post(server, "/predict", {"inputs": {"question": questions[0], "context": context}})
        together = concurrently([lambda q=q: post(server, "/predict", {"inputs": [{"question": q, "context": context}]})
                                 for q in questions * 3])
    assert one == {"score": expected[0]["score"], "start": expected[0]["start"], "end": expected[0]["end"],
                   "answer": expected[0]["text"]}
    for got, want in zip(together, expected * 3):
        assert got[0]["answer"] == want["text"] and got[0]["start"] == want["start"]
        assert got[0]["score"] == pytest.approx(want["score"], abs=1e-6)


@pytest.mark.parametrize("name", ["embedding", "static"])
def test_an_embedder_answers_openai_and_tei_clients_as_its_predictor(bundles, name):
    import openai

    bundle = bundles[name]
    expected = predictor(bundle).embed(TEXTS, batch_size=1)
    with serving(bundle, "--max-wait-ms", "20") as server:
        client = openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0)
        through_openai = client.embeddings.create(input=TEXTS, model="any")  # base64 on the wire
        floats = post(server, "/v1/embeddings", {"input": TEXTS[0], "model": "m", "encoding_format": "float"})
        tei = post(server, "/embed", {"inputs": TEXTS})
        together = concurrently([lambda t=t: post(server, "/embed", {"inputs": t}) for t in TEXTS * 4])
        if name == "embedding":
            assert batched(server)
    got = np.asarray([row.embedding for row in through_openai.data], dtype=np.float32)
    tokens = sum(len(predictor_tokens) for predictor_tokens in token_counts(bundle, TEXTS))
    assert through_openai.usage.prompt_tokens == tokens and through_openai.model == "any"
    assert floats["object"] == "list" and floats["data"][0]["index"] == 0
    gap = max(float(np.abs(got - expected).max()), float(np.abs(np.asarray(tei) - expected).max()),
              float(np.abs(np.asarray([row[0] for row in together]) - np.tile(expected, (4, 1))).max()))
    assert np.abs(np.asarray(floats["data"][0]["embedding"]) - expected[0]).max() < 1e-6  # alone: the Predictor's own
    assert gap <= BATCH_TOLERANCE, gap


def token_counts(bundle: Path, texts: list[str]) -> list[list[int]]:
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(bundle / "tokenizer.json"))
    tokenizer.no_padding()
    tokenizer.no_truncation()
    return [e.ids for e in tokenizer.encode_batch(texts)]


def test_bad_requests_get_their_code_and_a_message_naming_the_field_and_the_key_is_enforced(bundles):
    long_text = "good " * 200  # past the bundle's 128 tokens
    with serving(bundles["sequence"], "--api-key", "s3cret", "--max-body-bytes", "4000", "--max-client-batch", "4",
                 "--max-input-chars", "1500") as server:
        key = {"Authorization": "Bearer s3cret"}

        def ask(body=None, content=None, route="/predict", headers=key):
            response = httpx.post(server.url + route, json=body, content=content, headers=headers, timeout=30)
            return response.status_code, response.json()

        assert server.client.get("/health").status_code == 200  # a load balancer's check needs no key
        assert ask({"inputs": "fine"}, headers={})[0] == 401
        assert ask({"inputs": "fine"}, headers={"Authorization": "Bearer wrong"})[0] == 401
        assert server.client.get("/info").status_code == 401
        assert ask({"inputs": "fine"}, headers={"X-API-Key": "s3cret"})[0] == 200
        cases = [
            (ask(content=b'{"inputs": '), 422, "body: not valid JSON"),
            (ask(content=b'[1, 2]'), 422, "body: expected a JSON object"),
            (ask({"text": "fine"}), 422, "inputs: missing"),
            (ask({"inputs": 3}), 422, "inputs: expected a text"),
            (ask({"inputs": ["fine", 3]}), 422, "inputs[1]: expected a text"),
            (ask({"inputs": "fine", "raw_scores": "yes"}), 422, "raw_scores: expected true or false"),
            (ask({"inputs": [["a", "b", "c"]]}), 422, "inputs[0]: a pair is [text, text]"),
            (ask({"inputs": ["fine"] * 5}), 413, "inputs: 5 inputs, more than the server's 4"),
            (ask({"inputs": "x" * 1600}), 413, "inputs[0]: 1,600 characters"),
            (ask(content=b'{"inputs": "' + b"a" * 5000 + b'"}'), 413, "body: "),
            (ask({"inputs": long_text}), 413, "more than the model's max_length 128"),
            (ask({"inputs": "fine"}, route="/embed"), 404, "this bundle is a sequence model: use /predict"),
        ]
        for (status, body), code, message in cases:
            assert status == code and message in body["error"], (code, message, body)
        status, body = ask({"inputs": long_text, "truncate": True})
        assert status == 200 and body[0]["label"] in ("negative", "positive")
        server.client.headers.update(key)
        assert metric(server, "shrinkbert_request_errors_total") >= len(cases) + 3
        assert server.client.get("/health").status_code == 200  # nothing above took the worker down
    with serving(bundles["embedding"]) as server:  # OpenAI's route answers in OpenAI's error form
        response = httpx.post(server.url + "/v1/embeddings", json={"input": "a", "encoding_format": "hex"}, timeout=30)
        assert response.status_code == 422 and response.json()["error"]["param"] == "encoding_format"
        info = server.client.get("/info").json()
        assert info["kind"] == "embedding" and info["dim"] == 32 and info["lineage"][0]["hash"]


@pytest.mark.parametrize("limit", [("--queue-size", "4"), ("--max-queue-ms", "0.5")], ids=["rows", "time"])
def test_a_full_queue_answers_429_with_retry_after_and_nothing_else_fails(bundles, limit):
    text = " ".join(TEXTS * 3)
    with serving(bundles["sequence"], *limit, "--max-batch-rows", "1", "--workers", "1") as server:
        post(server, "/predict", {"inputs": text})  # one call measures the worker's rows/s
        responses = concurrently([lambda: httpx.post(server.url + "/predict", json={"inputs": [text] * 4}, timeout=60)
                                  for _ in range(40)], clients=20)
        too_many = httpx.post(server.url + "/predict", json={"inputs": [text] * 5}, timeout=60)
    codes = [r.status_code for r in responses]
    assert set(codes) <= {200, 429} and 429 in codes and 200 in codes, codes
    assert all(r.headers["retry-after"] == "1" for r in responses if r.status_code == 429)
    assert all("ms of queueing" in r.json()["error"] for r in responses if r.status_code == 429)
    if limit[0] == "--queue-size":
        assert too_many.status_code == 413  # more rows than the queue holds: no retry would help


def test_the_default_limits_take_any_request_the_queue_can_hold_and_no_more():
    from shrinkbert.deploy.serve import Options

    defaults = Options()
    # a request within --max-client-batch is never refused as larger than the queue (413), and the queue
    # holds at least one full batch
    assert defaults.max_batch_rows <= defaults.queue_size
    assert defaults.max_client_batch == defaults.queue_size


def test_shrinkbert_serve_writes_the_servers_own_defaults():
    import dataclasses
    import inspect

    from shrinkbert.deploy.launch import serve
    from shrinkbert.deploy.serve import Options

    # serve()'s signature repeats Options' defaults in writing (help() reads it without loading the server)
    server = {field.name: field.default for field in dataclasses.fields(Options)}
    written = {name: p.default for name, p in inspect.signature(serve).parameters.items()
               if name in server and p.default is not inspect.Parameter.empty}
    assert "queue_size" in written and written == {name: server[name] for name in written}


def test_a_queue_bound_counts_the_oldest_rows_wait_where_the_measured_rate_says_less():
    import asyncio

    from shrinkbert.deploy.serve import Batcher, Metrics, Options

    async def delays() -> tuple[float, float, float]:
        batcher = Batcher(None, Options(max_queue_ms=25, max_wait_ms=10), Metrics())
        batcher.rate = 1e6  # the model's calls alone: a row would run in a microsecond
        batcher.submit("single", ["a", "b"], [3, 3])
        fresh = batcher.queue_delay()
        batcher.pending["single"][0].arrived -= 0.05  # the oldest row has waited 50 ms, 10 of them by design
        aged = batcher.queue_delay()
        batcher.pending["single"].clear()
        batcher.waiting = 0
        return fresh, aged, batcher.queue_delay()
    fresh, aged, empty = asyncio.run(delays())
    assert fresh < 0.001 and 0.039 < aged < 0.045 and empty == 0.0


def test_sigterm_answers_what_was_accepted_then_exits_0(bundles):
    server = Running(bundles["sequence"], "--max-wait-ms", "1500")
    try:
        server.wait_ready()
        results: list = []
        clients = [threading.Thread(target=lambda: results.append(
            httpx.post(server.url + "/predict", json={"inputs": TEXTS}, timeout=30).status_code)) for _ in range(5)]
        for client in clients:
            client.start()
        deadline = time.monotonic() + 20
        while metric(server, "shrinkbert_queue_rows") < 5 * len(TEXTS) and time.monotonic() < deadline:
            time.sleep(0.02)  # until all five are accepted, waiting in the queue for max_wait
        server.process.send_signal(signal.SIGTERM)
        for client in clients:
            client.join(timeout=30)
        assert server.process.wait(timeout=30) == 0
        assert results == [200] * 5
    finally:
        server.stop()


def test_a_damaged_bundle_refuses_to_start_in_one_line(bundles, tmp_path):
    import shutil

    damaged = Path(shutil.copytree(bundles["sequence"], tmp_path / "damaged"))
    graph = bytearray((damaged / "model.onnx").read_bytes())
    graph[len(graph) // 2] ^= 0xFF
    (damaged / "model.onnx").write_bytes(bytes(graph))
    done = subprocess.run([sys.executable, str(damaged / "serve.py"), "--port", str(free_port())], cwd=str(damaged),
                          env=ENV, capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "model.onnx" in lines[0], done.stderr


def test_the_server_binds_this_machine_only_unless_told(bundles):
    sys.path.insert(0, str(bundles["static"]))
    try:
        import importlib.util

        spec = importlib.util.spec_from_file_location("bundle_serve", bundles["static"] / "serve.py")
        module = sys.modules[spec.name] = importlib.util.module_from_spec(spec)  # its dataclass looks itself up
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(bundles["static"]))
    assert module.options_from([]).host == "127.0.0.1"
    assert module.options_from(["--host", "0.0.0.0"]).host == "0.0.0.0"


def workers_of(pid: int) -> list[int]:
    """The worker processes uvicorn's supervisor `pid` started (not multiprocessing's resource tracker)."""
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return [int(c) for c in children if b"spawn_main" in Path(f"/proc/{c}/cmdline").read_bytes()]


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads worker processes from /proc")
def test_two_workers_share_the_metrics_and_a_killed_one_is_replaced(bundles):
    with serving(bundles["sequence"], "--workers", "2") as server:
        for _ in range(8):
            post(server, "/predict", {"inputs": TEXTS[0]})
        assert metric(server, "shrinkbert_rows_total") == 8  # both workers' counts, summed
        before = workers_of(server.process.pid)
        assert len(before) == 2
        os.kill(before[0], signal.SIGKILL)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and (len(workers_of(server.process.pid)) < 2
                                               or before[0] in workers_of(server.process.pid)):
            time.sleep(0.1)
        after = workers_of(server.process.pid)
        assert len(after) == 2 and before[0] not in after
        assert all(post(server, "/predict", {"inputs": text})[0]["label"] for text in TEXTS)
        server.process.send_signal(signal.SIGTERM)
        assert server.process.wait(timeout=30) == 0


def test_the_kits_command_serves_a_bundle_with_the_bundles_own_server_and_its_api_key_from_the_environment(bundles):
    bundle = bundles["static"]
    with serving(bundle, kit=True, env={**ENV, "SHRINKBERT_API_KEY": "k"}) as server:
        assert server.client.get("/info").status_code == 401
        server.client.headers["Authorization"] = "Bearer k"
        info = server.client.get("/info").json()
        vector = server.client.post("/embed", json={"inputs": "good movie"}).json()[0]
    assert info["kind"] == "embedding" and info["max_length"] is None
    np.testing.assert_allclose(vector, predictor(bundle).embed(["good movie"])[0], atol=1e-6)
    done = subprocess.run([sys.executable, "-m", "shrinkbert.cli", "serve", str(bundle / "missing")], env=ENV,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and done.stderr.strip().startswith("error: ") and len(done.stderr.splitlines()) == 1


def test_the_bundles_server_needs_neither_torch_nor_transformers_nor_the_kit(bundles):
    """serve.py and the Predictor it loads run with torch, transformers, optimum and shrinkbert blocked."""
    bundle = bundles["sequence"]
    script = import_blocker() + "import runpy, sys\nsys.argv[0] = 'serve.py'\nrunpy.run_path('serve.py', run_name='__main__')"
    env = {k: v for k, v in ENV.items() if k != "PYTHONPATH"}
    with serving(bundle, command=[sys.executable, "-c", script], env=env) as server:
        answer = post(server, "/predict", {"inputs": TEXTS[0]})
    assert answer[0]["label"] == predictor(bundle).predict([TEXTS[0]])[0]["label"]
    assert {"serve.py", "requirements-serve.txt"} <= {p.name for p in bundle.iterdir()}
    assert {line.split(">=")[0] for line in (bundle / "requirements-serve.txt").read_text().splitlines()} == \
           {"uvicorn", "orjson", "prometheus-client", "httptools", "uvloop"}


def test_the_servers_token_count_is_the_tokenizers_for_texts_pairs_and_text_it_cannot_split_by_words(bundles):
    """Limits, usage and batching read a count from cached word ids (token_ids.py): it must be encode's."""
    from tokenizers import Tokenizer

    bundle = bundles["sequence"]
    sys.path.insert(0, str(bundle))
    try:
        import importlib.util

        spec = importlib.util.spec_from_file_location("bundle_serve_count", bundle / "serve.py")
        module = sys.modules[spec.name] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        model = module.Model(bundle, threads=1, spin=False)
    finally:
        sys.path.remove(str(bundle))
    tokenizer = Tokenizer.from_file(str(bundle / "tokenizer.json"))
    tokenizer.no_padding()
    tokenizer.no_truncation()
    inputs = [*TEXTS, "Café naïve — déjà vu", "tab\tand\x0bvertical tab", "  spaced   out  ", "",
              ["a warm film", "the plot was dull"], ["Ünïcode here", "and plain there"]]
    want = [len(tokenizer.encode(*i).ids) if isinstance(i, list) else len(tokenizer.encode(i).ids) for i in inputs]
    assert model.count(inputs) == want
    assert model.count(inputs) == want  # the second time from the cache
