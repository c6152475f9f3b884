"""Load on `shrinkbert serve`: rows/s and latency under closed and open loops, against the bundle's own
Predictor offline, the same server unbatched, and infinity-emb on the same model, in one run.

    python bench/serve_load.py                                   # the demo's classifier, the embeddings recipe's bundle
    python bench/serve_load.py --bundle runs/demo/bundle --clients 1 8 32 128 --seconds 20
    python bench/serve_load.py --soak 600                        # also a locust soak at 70% of the measured maximum
    python bench/serve_load.py --bundle runs/demo/bundle --soak 600 --soak-only   # the soak alone
    python bench/serve_load.py --bundle DIR --smoke              # a few seconds a point: the plumbing, no figures

For each bundle (all on 127.0.0.1, the load generator beside the server on the same cores: wrk for the
closed loops where it is installed, else a keep-alive HTTP/1.1 client on asyncio; --generator; with --split-cores
the server runs on the first half of the cores and every generator and probe on the other half, so the load's
own CPU is not taken from the server, at the cost of half the cores: give --layouts that fit its half):

- offline: the bundle's Predictor in this process, batch 1 (p50 of one row's call) and its best
  rows/s over batch sizes, at its runtime defaults and on one thread (the ceiling a server adds its cost to);
- closed loop at each --clients count, one row a request, against each server: `shrinkbert serve` at
  each --layouts workers x threads, the same server with --max-batch-rows 1 (the plain loop: one model
  call per request, unbatched), and infinity-emb 0.0.78 (embedders and classifiers: /embeddings, /classify;
  its own venv, --infinity-venv, skipped with the reason printed where it is absent or does not start);
- open loop on the first layout at --rates, fractions of its maximum (2.0 is the overload: refused requests
  must be 429s, never 5xx; each point's accepted p99 is also given over the first layout's p99 at the most
  closed-loop clients, the heaviest load it holds without refusing): from h2load (Debian's nghttp2-client; --open-generator) on 512 connections at
  a fixed rate each, the median-length row, latency from each request's send; else from the asyncio client
  at fractions of what it holds itself at 32 clients, latency from each request's scheduled time; then the
  seconds after the load stops until three probes in a row (one request every 50 ms) are answered within 1.5x
  of the same probe's p50 on the idle server; --queue-size ROWS... and --max-queue-ms MS...: the first layout
  again with each bound on its queued work, its closed loops and its open loops at the same rates;
- --kill: two workers under 32 clients, one killed with SIGKILL halfway: the seconds until requests are
  answered again, and the requests that failed;
- --soak SECONDS: locust (its own venv, --locust-venv) at 70% of the best rows/s: errors, the first and last
  minute's p99, and the server's resident memory growth.

Printed per point: rows/s, p50/p95/p99 ms, errors, and the host; recorded in bench/results/serving.jsonl
(bench/record.py) unless --smoke or --no-record.
"""
from __future__ import annotations

import argparse
import asyncio
import csv
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def bundle_label(bundle: Path) -> str:
    """A bundle's folder with its parent (demo/bundle, embeddings/bundle): the name alone is often "bundle"."""
    return f"{bundle.parent.name}/{bundle.name}"
sys.path.insert(0, str(Path(__file__).resolve().parent))
from record import host, host_label, record  # noqa: E402  (bench/ is scripts, not a package)

DEFAULT_BUNDLES = [ROOT / "runs/demo/bundle", ROOT / "runs/embeddings/bundle"]
INFINITY_VENV = Path("/tmp/infinity-venv")
LOCUST_VENV = Path("/tmp/locust-venv")
LOCUSTFILE = Path(__file__).resolve().with_name("serve_locustfile.py")
ENV = {**os.environ, "TOKENIZERS_PARALLELISM": "false", "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
# the cores each side runs on (--split-cores): "server" for servers and the offline Predictor, "load" for the
# generators, the probes and this process otherwise; None: every core, both sides together
PLACEMENT: dict[str, set[int] | None] = {"server": None, "load": None}
MACHINE_CORES = set(os.sched_getaffinity(0))  # what the host record names, whatever this process runs on


def split_cores() -> None:
    """Servers on the first half of this process's cores, the load (and this process) on the rest."""
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < 2:
        raise SystemExit("error: --split-cores needs at least 2 cores")
    PLACEMENT.update(server=set(cores[:len(cores) // 2]), load=set(cores[len(cores) // 2:]))
    os.sched_setaffinity(0, PLACEMENT["load"])


def on_cores(side: str):
    """A child's preexec_fn that puts it on `side`'s cores (None: not split, no change)."""
    cores = PLACEMENT[side]
    return (lambda: os.sched_setaffinity(0, cores)) if cores else None


def machine() -> dict:
    """The host record (bench/record.py) with the machine's cores, not this process's half of them."""
    return {**host(), "cores": len(MACHINE_CORES)}


def server_cores() -> int:
    return len(PLACEMENT["server"] or os.sched_getaffinity(0))


def placement_note() -> str:
    if PLACEMENT["server"] is None:
        return "the load generator beside the server on the same cores"
    def named(cores: set[int]) -> str:
        return ",".join(str(c) for c in sorted(cores))
    return (f"the server on core(s) {named(PLACEMENT['server'])}, the load generator and probes on "
            f"core(s) {named(PLACEMENT['load'])} (--split-cores)")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def bundle_kind(bundle: Path) -> str:
    labels = bundle / "labels.json"
    return json.loads(labels.read_text()).get("kind", "sequence") if labels.is_file() else "embedding"


def texts_for(args) -> list[str]:
    """The rows sent: --texts FILE (one a line), else the kit's built-in sentences."""
    if args.texts:
        return [line.strip() for line in Path(args.texts).read_text(encoding="utf-8").splitlines() if line.strip()]
    from shrinkbert.compress.common import BUILTIN_SENTENCES

    return list(BUILTIN_SENTENCES)


QUESTION = "What is it about?"  # a QA bundle's rows ask it of each text
# Per kind of bundle: (route, body) of one row, the Predictor's call on rows offline, and infinity-emb's
# (route, body) for one row of its model id (None: infinity-emb serves no such model).
KINDS = {
    "sequence": (lambda t: ("/predict", {"inputs": t, "truncate": True}),
                 lambda p, rows: p.predict(rows, batch_size=len(rows)),
                 lambda model, t: ("/classify", {"model": model, "input": [t]})),
    "token": (lambda t: ("/predict", {"inputs": t, "truncate": True}),
              lambda p, rows: p.predict(rows, batch_size=len(rows)), None),
    "qa": (lambda t: ("/predict", {"inputs": {"question": QUESTION, "context": t}}),
           lambda p, rows: [p.answer(QUESTION, row) for row in rows], None),
    "embedding": (lambda t: ("/embed", {"inputs": t, "truncate": True}),
                  lambda p, rows: p.embed(rows, batch_size=len(rows)),
                  lambda model, t: ("/embeddings", {"model": model, "input": [t]})),
}


def request_for(kind: str, text: str) -> tuple[str, dict]:
    """(route, body) of one row for a bundle of `kind`."""
    return KINDS[kind][0](text)


def summary(latencies: list[float], errors: dict, seconds: float, rows_per_request: int = 1) -> dict:
    ms = np.asarray(latencies) * 1000 if latencies else np.asarray([np.nan])
    return {"rows_s": round(len(latencies) * rows_per_request / seconds, 1), "p50_ms": round(float(np.percentile(ms, 50)), 2),
            "p95_ms": round(float(np.percentile(ms, 95)), 2), "p99_ms": round(float(np.percentile(ms, 99)), 2),
            "ok": len(latencies), "errors": sum(errors.values()), "codes": dict(sorted(errors.items()))}


# ------------------------------------------------------------------------------------------------
# Servers


class Server:
    """A server subprocess on 127.0.0.1: its command, readiness by a GET, and SIGTERM."""

    def __init__(self, name: str, command: list[str], health: str = "/health", cwd: Path | None = None):
        self.name, self.port = name, free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = tempfile.NamedTemporaryFile("w+", prefix="serve-load-", suffix=".log")
        self.process = subprocess.Popen([part.replace("{port}", str(self.port)) for part in command], cwd=cwd,
                                        env=ENV, stdout=self.log, stderr=subprocess.STDOUT,
                                        preexec_fn=on_cores("server"))
        self.health = health

    def wait_ready(self, timeout: float) -> str | None:
        """None once ready, else why not (the log's last line)."""
        import httpx

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                break
            try:
                if httpx.get(self.url + self.health, timeout=2).status_code == 200:
                    return None
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        self.log.seek(0)
        lines = [line for line in self.log.read().splitlines() if line.strip()]
        return lines[-1] if lines else f"not ready within {timeout:.0f} s"

    def pids(self) -> list[int]:
        """The server and its worker processes (for resident memory)."""
        children = Path(f"/proc/{self.process.pid}/task/{self.process.pid}/children")
        return [self.process.pid] + ([int(c) for c in children.read_text().split()] if children.is_file() else [])

    def rss_mb(self) -> float:
        total = 0.0
        for pid in self.pids():
            try:
                for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1]) / 1024
            except OSError:
                continue
        return total

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=30)
        self.log.close()


SETTLE_S = 1.0  # seconds between closed-loop points: what the last one left queued runs first
QUEUE_BOUNDS = ("--queue-size", "--max-queue-ms")  # the server's flags that bound its queue, named in an arm's name


def shrinkbert_server(bundle: Path, workers: int, threads: int, *extra: str, instances: int = 1) -> Server:
    """`serve.py` at workers x threads (workers x instances x threads where instances > 1)."""
    layout = f"{workers}x{instances}x{threads}" if instances > 1 else f"{workers}x{threads}"
    bounds = "".join(f" {flag} {extra[extra.index(flag) + 1]}" for flag in QUEUE_BOUNDS if flag in extra)
    name = f"shrinkbert {layout}" + (" unbatched" if "--max-batch-rows" in extra else "") + bounds
    return Server(name, [sys.executable, str(bundle / "serve.py"), "--port", "{port}", "--workers", str(workers),
                         "--instances", str(instances), "--threads", str(threads), *extra], cwd=bundle)


def infinity_model(bundle: Path) -> Path | None:
    """The folder infinity-emb loads for this bundle: the nearest ancestor (by the manifests' parents)
    that holds a transformers model with weights (its torch engine) or *.onnx beside a config (optimum)."""
    seen, queue = set(), [bundle]
    while queue:
        folder = queue.pop(0)
        if folder in seen or not folder.is_dir():
            continue
        seen.add(folder)
        if folder != bundle and (folder / "config.json").is_file() and any(folder.glob("*.safetensors")):
            return folder
        manifest = folder / "shrinkbert.json"
        if manifest.is_file():
            queue += [Path(p["path"]) for p in json.loads(manifest.read_text()).get("parents") or []]
    return None


def infinity_server(args, bundle: Path) -> tuple[Server | None, str]:
    """infinity-emb on the bundle's model, or (None, why not)."""
    binary = Path(args.infinity_venv) / "bin" / "infinity_emb"
    if not binary.is_file():
        return None, f"infinity-emb skipped: {binary} is absent (python3 -m venv {args.infinity_venv} && " \
                     f"{args.infinity_venv}/bin/pip install 'infinity-emb[optimum,server,torch]==0.0.78')"
    model = Path(args.infinity_model) if args.infinity_model else infinity_model(bundle)
    if model is None:
        return None, "infinity-emb skipped: no model folder among the bundle's ancestors (give --infinity-model)"
    engine = "optimum" if any(model.glob("*.onnx")) else "torch"
    server = Server(f"infinity-emb {engine}", [str(binary), "v2", "--model-id", str(model), "--engine", engine,
                                                "--device", "cpu", "--host", "127.0.0.1", "--port", "{port}",
                                                "--batch-size", "32"])
    return server, f"{model} ({engine} engine)"


# ------------------------------------------------------------------------------------------------
# Load: a keep-alive HTTP/1.1 client on asyncio's protocol layer. Each request's bytes are built once
# before the clock starts, so a request costs the generator one write and one parse of a response
# head: a fraction of an HTTP library's cost, which on shared cores would be taken from the server.


class Connection(asyncio.Protocol):
    """One keep-alive connection: one request at a time, the answer framed by its Content-Length."""

    def __init__(self):
        self.buffer, self.waiter, self.end, self.status = bytearray(), None, None, 0
        self.transport = None

    def connection_made(self, transport):
        self.transport = transport

    def data_received(self, data: bytes):
        self.buffer += data
        if self.end is None:
            head_end = self.buffer.find(b"\r\n\r\n")
            if head_end < 0:
                return
            lines = bytes(self.buffer[:head_end]).decode("latin-1").split("\r\n")
            self.status = int(lines[0].split(" ", 2)[1])
            length = next((int(line.split(":", 1)[1]) for line in lines[1:]
                           if line.lower().startswith("content-length:")), 0)
            self.end = head_end + 4 + length
        if len(self.buffer) >= self.end:
            del self.buffer[:self.end]
            self.end = None
            if self.waiter is not None and not self.waiter.done():
                self.waiter.set_result(self.status)

    def connection_lost(self, exc):
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_exception(ConnectionResetError("the server closed the connection"))

    async def send(self, data: bytes) -> int:
        if self.transport is None or self.transport.is_closing():  # the server closed it while it sat idle
            raise ConnectionResetError("the server closed the connection")
        self.waiter = asyncio.get_running_loop().create_future()
        self.transport.write(data)
        return await self.waiter


def encoded(url: str, requests: list[tuple[str, dict]]) -> list[bytes]:
    """Each (route, body) as the bytes of one POST."""
    host = url.split("//", 1)[1]
    out = []
    for route, body in requests:
        payload = json.dumps(body).encode()
        out.append(f"POST {route} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
                   f"Content-Length: {len(payload)}\r\n\r\n".encode() + payload)
    return out


class Pool:
    """Connections to one server, reused; a broken one is dropped and replaced on the next request."""

    def __init__(self, url: str):
        host, port = url.split("//", 1)[1].split(":")
        self.host, self.port, self.free = host, int(port), []

    async def post(self, data: bytes):
        """One request's status code, or the exception's name where none came back."""
        while self.free and self.free[-1].transport.is_closing():  # closed by the server while idle
            self.free.pop()
        try:
            conn = self.free.pop() if self.free else (
                await asyncio.get_running_loop().create_connection(Connection, self.host, self.port))[1]
            status = await asyncio.wait_for(conn.send(data), 60)
        except (OSError, RuntimeError, asyncio.TimeoutError) as err:  # RuntimeError: uvloop's write on a closed one
            return type(err).__name__
        self.free.append(conn)
        return status

    def close(self):
        for conn in self.free:
            conn.transport.close()


async def closed_loop(url: str, requests: list[tuple[str, dict]], clients: int, seconds: float) -> dict:
    """`clients` tasks, each sending its next request as soon as the last is answered, for `seconds`."""
    latencies, errors, pool, data = [], {}, Pool(url), encoded(url, requests)
    stop = time.perf_counter() + seconds

    async def one(worker: int):
        i = worker
        while time.perf_counter() < stop:
            start = time.perf_counter()
            code = await pool.post(data[i % len(data)])
            i += clients
            if code == 200:
                latencies.append(time.perf_counter() - start)
            else:
                errors[str(code)] = errors.get(str(code), 0) + 1
    began = time.perf_counter()
    await asyncio.gather(*(one(w) for w in range(clients)))
    pool.close()
    return summary(latencies, errors, time.perf_counter() - began)


WRK_SCRIPT = """
local bodies, paths, i = {}, {}, 0
%s
request = function()
  i = i + 1
  local k = (i %% #bodies) + 1
  return wrk.format("POST", paths[k], {["Content-Type"] = "application/json"}, bodies[k])
end
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format('WRK {"requests": %%d, "seconds": %%f, "status": %%d, "connect": %%d, "read": %%d, ' ..
    '"write": %%d, "timeout": %%d, "p50": %%f, "p95": %%f, "p99": %%f}\\n', summary.requests,
    summary.duration / 1e6, e.status, e.connect, e.read, e.write, e.timeout, latency:percentile(50) / 1000,
    latency:percentile(95) / 1000, latency:percentile(99) / 1000))
end
"""


def wrk_closed_loop(url: str, requests: list[tuple[str, dict]], clients: int, seconds: float) -> dict:
    """The same closed loop from wrk (Debian's `wrk`, one thread, `clients` keep-alive connections): a
    generator in C, which takes less of the shared cores from the server than the asyncio one."""
    lines = []
    for route, body in requests:
        payload = json.dumps(body)
        level = "=" * (payload.count("=") + 1)  # a long bracket, [==[ ... ]==], that nothing in the payload closes
        lines.append(f"table.insert(bodies, [{level}[{payload}]{level}]); table.insert(paths, {json.dumps(route)})")
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as script:
        script.write(WRK_SCRIPT % "\n".join(lines))
    try:
        done = subprocess.run(["wrk", "-t1", f"-c{clients}", f"-d{seconds:.0f}s", "--timeout", "60s", "-s", script.name,
                               url], capture_output=True, text=True, timeout=seconds + 60,
                              preexec_fn=on_cores("load"))
    finally:
        os.unlink(script.name)
    found = next((line[4:] for line in done.stdout.splitlines() if line.startswith("WRK ")), None)
    if found is None:
        raise RuntimeError(f"wrk gave no summary: {done.stdout[-300:]} {done.stderr[-300:]}")
    w = json.loads(found)
    failed = {("non-2xx" if k == "status" else k): w[k]
              for k in ("status", "connect", "read", "write", "timeout") if w[k]}
    ok = w["requests"] - w["status"] - w["read"] - w["write"] - w["timeout"]
    return {"rows_s": round(ok / w["seconds"], 1), "p50_ms": round(w["p50"], 2), "p95_ms": round(w["p95"], 2),
            "p99_ms": round(w["p99"], 2), "ok": ok, "errors": sum(failed.values()), "codes": failed}


async def open_loop(url: str, requests: list[tuple[str, dict]], rate: float, seconds: float) -> dict:
    """Requests at `rate` a second on a fixed schedule, whatever the answers; latency from the scheduled time."""
    latencies, errors, pool, data = [], {}, Pool(url), encoded(url, requests)
    began = time.perf_counter()

    async def one(i: int, due: float):
        code = await pool.post(data[i % len(data)])
        if code == 200:
            latencies.append(time.perf_counter() - due)
        else:
            errors[str(code)] = errors.get(str(code), 0) + 1
    tasks, n = [], int(rate * seconds)
    for i in range(n):
        due = began + i / rate
        await asyncio.sleep(max(0.0, due - time.perf_counter()))
        tasks.append(asyncio.create_task(one(i, due)))
    await asyncio.gather(*tasks)
    pool.close()
    return {"rate": round(rate, 1), **summary(latencies, errors, seconds)}


def h2load_open_loop(url: str, requests: list[tuple[str, dict]], rate: float, seconds: float,
                     connections: int = 512) -> dict:
    """Requests at `rate` a second from h2load (Debian's nghttp2-client, in C): `connections` keep-alive HTTP/1.1
    connections, each sending rate/connections a second whatever the others' answers. One request is in flight on
    a connection, so a send falls due late only while its own connection's answer is late: the rate sent is
    printed beside the rate asked. h2load sends one body, so the load is one row (the median-length one)."""
    route, body = median_request(requests)
    with tempfile.TemporaryDirectory(prefix="h2load-") as work:
        data, log = Path(work) / "body.json", Path(work) / "requests.log"
        data.write_text(json.dumps(body))
        # the connections open one by one over one send period, so their sends interleave instead of all
        # falling due at once (a burst of `connections` requests each period)
        period_ms = max(1, round(1000 / rate))  # h2load's periods are whole milliseconds
        opened = max(1, round(rate * period_ms / 1000))  # connections opened a period: all of them in 1/rate s each
        command = ["h2load", "--h1", "-t1", f"-c{connections}", f"--rps={rate / connections:.4f}", f"-r{opened}",
                   f"--rate-period={period_ms}ms", f"-n{int(rate * seconds)}",
                   "-d", str(data), "-H", "content-type: application/json", f"--log-file={log}", url + route]
        done = subprocess.run(command, capture_output=True, text=True, timeout=seconds + 60,
                              preexec_fn=on_cores("load"))
        if done.returncode != 0 or not log.is_file():
            raise RuntimeError(f"h2load failed: {done.stdout[-300:]} {done.stderr[-300:]}")
        entries = np.loadtxt(log, dtype=np.int64, ndmin=2)  # start (us since the epoch), status, duration (us)
    started, codes, took = entries[:, 0], entries[:, 1], entries[:, 2] / 1e6
    sent_for = max((started.max() - started.min()) / 1e6, 1e-6)
    errors = {str(code): int((codes == code).sum()) for code in np.unique(codes) if code != 200}
    return {"rate": round(rate, 1), "sent_s": round(len(codes) / sent_for, 1),
            **summary(list(took[codes == 200]), errors, sent_for)}


def median_request(requests: list[tuple[str, dict]]) -> tuple[str, dict]:
    """The request whose body is of median length."""
    return sorted(requests, key=lambda r: len(json.dumps(r[1])))[len(requests) // 2]


PROBE_GAP_S = 0.05  # between probes: a probe finds the server as an idle client does, its threads asleep


async def probe_latencies(pool: "Pool", data: bytes, count: int) -> list[float]:
    """`count` requests one at a time, PROBE_GAP_S apart: each one's ms (None where it was not a 200)."""
    out = []
    for _ in range(count):
        start = time.perf_counter()
        ok = await pool.post(data) == 200
        out.append((time.perf_counter() - start) * 1000 if ok else None)
        await asyncio.sleep(PROBE_GAP_S)
    return out


def idle_probe_ms(url: str, request: tuple[str, dict], count: int = 40) -> float:
    """The median latency of the recovery probe on the idle server: what "back to idle" is measured against
    (a closed loop's p50 is lower: its requests find the model's threads awake)."""

    async def run() -> float:
        pool = Pool(url)
        try:
            latencies = [ms for ms in await probe_latencies(pool, encoded(url, [request])[0], count) if ms is not None]
        finally:
            pool.close()
        return float(np.median(latencies)) if latencies else float("inf")
    return asyncio.run(run())


def recovery_seconds(url: str, request: tuple[str, dict], idle_ms: float, limit: float = 30.0,
                     in_a_row: int = 3) -> float | None:
    """Seconds from now until the first of `in_a_row` probes in a row answered within 1.5x of `idle_ms`
    (None: not within `limit`)."""

    async def probe() -> float | None:
        pool, data = Pool(url), encoded(url, [request])[0]
        began, streak = time.perf_counter(), []
        try:
            while time.perf_counter() - began < limit:
                sent = time.perf_counter() - began
                ms = (await probe_latencies(pool, data, 1))[0]
                streak = streak + [sent] if ms is not None and ms <= 1.5 * idle_ms else []
                if len(streak) == in_a_row:
                    return round(streak[0], 2)
            return None
        finally:
            pool.close()
    return asyncio.run(probe())


def offline(bundle: Path, texts: list[str], kind: str, seconds: float) -> dict:
    """The bundle's Predictor in this process: p50 of one row alone (its own runtime defaults), and its
    best rows/s over batch sizes and over its defaults and one thread (a small model's short rows often
    run faster on one thread than on two)."""
    import importlib.util

    sys.path.insert(0, str(bundle))
    spec = importlib.util.spec_from_file_location("bench_bundle_predict", bundle / "predict.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    predictors = {"defaults": module.Predictor(bundle), "1 thread": module.Predictor(bundle, threads=1)}
    sys.path.remove(str(bundle))

    def rate(predictor, batch: int) -> float:
        done, stop = 0, time.perf_counter() + seconds
        began = time.perf_counter()
        while time.perf_counter() < stop:
            KINDS[kind][1](predictor, [texts[(done + j) % len(texts)] for j in range(batch)])
            done += batch
        return done / (time.perf_counter() - began)
    single, stop, i = [], time.perf_counter() + seconds, 0
    while time.perf_counter() < stop:
        start = time.perf_counter()
        KINDS[kind][1](predictors["defaults"], [texts[i % len(texts)]])
        single.append(time.perf_counter() - start)
        i += 1
    best = {"batch": 1, "runtime": "defaults", "rows_s": 0.0}
    for runtime, predictor in predictors.items():
        for batch in (1, 8, 32, 64):
            measured = rate(predictor, batch)
            if measured > best["rows_s"]:
                best = {"batch": batch, "runtime": runtime, "rows_s": measured}
    return {"p50_ms_b1": round(float(np.median(single)) * 1000, 3), "best_batch": best["batch"],
            "best_runtime": best["runtime"], "best_rows_s": round(best["rows_s"], 1)}


# ------------------------------------------------------------------------------------------------
# Phases


def kill_phase(args, bundle: Path, requests, threads: int) -> dict:
    """Two workers under 32 clients; one killed with SIGKILL halfway: failures and seconds until served again."""
    server = shrinkbert_server(bundle, 2, threads)
    try:
        why = server.wait_ready(args.start_timeout)
        if why:
            return {"error": why}
        workers = [pid for pid in server.pids()[1:] if b"spawn_main" in Path(f"/proc/{pid}/cmdline").read_bytes()]
        killed_at: list[float] = []

        def kill():
            time.sleep(args.seconds / 2)
            os.kill(workers[0], signal.SIGKILL)
            killed_at.append(time.perf_counter())
        threading.Thread(target=kill, daemon=True).start()
        result = asyncio.run(closed_loop(server.url, requests, 32, args.seconds))
        served_again = recovery_seconds(server.url, requests[0], idle_ms=1e9, in_a_row=1)
        return {"failed": result["errors"], "codes": result["codes"], "served_again_s": served_again,
                "rows_s": result["rows_s"]}
    finally:
        server.stop()


def soak_phase(args, bundle: Path, kind: str, rate: float, threads: int) -> dict:
    """locust at `rate` requests/s for --soak seconds: errors, first and last minute's p99, memory growth."""
    locust = Path(args.locust_venv) / "bin" / "locust"
    if not locust.is_file():
        return {"skipped": f"{locust} is absent (python3 -m venv {args.locust_venv} && "
                           f"{args.locust_venv}/bin/pip install locust)"}
    server = shrinkbert_server(bundle, args.soak_workers, threads)
    try:
        why = server.wait_ready(args.start_timeout)
        if why:
            return {"error": why}
        users = 32
        out = Path(tempfile.mkdtemp(prefix="serve-soak-"))
        env = {**ENV, "SERVE_LOAD_KIND": kind, "SERVE_LOAD_RATE": str(rate / users),
               "SERVE_LOAD_TEXTS": json.dumps(texts_for(args)[:200])}
        rss = []
        window = min(60.0, args.soak / 4)

        def sample():
            time.sleep(window)
            rss.append(server.rss_mb())
        threading.Thread(target=sample, daemon=True).start()
        subprocess.run([str(locust), "-f", str(LOCUSTFILE), "--headless", "-u", str(users), "-r", str(users),
                        "-t", f"{int(args.soak)}s", "--host", server.url, "--csv", str(out / "soak"),
                        "--csv-full-history", "--only-summary"], env=env, capture_output=True, text=True,
                       timeout=args.soak + 120, preexec_fn=on_cores("load"))
        rss.append(server.rss_mb())
        return {"rate": round(rate, 1), "seconds": args.soak, **locust_figures(out / "soak", window),
                "rss_mb_first": round(rss[0], 1), "rss_mb_last": round(rss[-1], 1),
                "rss_growth": f"{(rss[-1] / rss[0] - 1) * 100:.1f}%" if rss[0] else None}
    finally:
        server.stop()


def locust_figures(prefix: Path, window: float) -> dict:
    """From locust's CSVs: requests, failures, and the p99 of the first and of the last `window` seconds."""
    with open(f"{prefix}_stats.csv") as handle:
        total = next(row for row in csv.DictReader(handle) if row["Name"] == "Aggregated")
    with open(f"{prefix}_stats_history.csv") as handle:
        history = [row for row in csv.DictReader(handle) if row["Name"] == "Aggregated" and row["99%"] not in ("N/A", "")]
    stamps = [int(row["Timestamp"]) for row in history]

    def p99(rows):
        return float(np.median([float(row["99%"]) for row in rows])) if rows else None
    first = [r for r, t in zip(history, stamps) if t < stamps[0] + window] if history else []
    last = [r for r, t in zip(history, stamps) if t > stamps[-1] - window] if history else []
    return {"requests": int(total["Request Count"]), "failures": int(total["Failure Count"]),
            "p99_ms_first": p99(first), "p99_ms_last": p99(last)}


def soak_only(args, bundle: Path, kind: str, requests, cores: int) -> list[dict]:
    """The soak alone: the maximum from 32 closed-loop clients for --seconds, then locust at 70% of it."""
    workers = args.soak_workers
    server = shrinkbert_server(bundle, workers, max(1, cores // workers))
    try:
        why = server.wait_ready(args.start_timeout)
        if why:
            print(f"{server.name} did not start: {why}")
            return []
        best_rate = asyncio.run(closed_loop(server.url, requests, 32, args.seconds))["rows_s"]
    finally:
        server.stop()
    soaked = soak_phase(args, bundle, kind, 0.7 * best_rate, max(1, cores // workers))
    print(f"soak at 70% of {best_rate} rows/s: {soaked}")
    return [{"bundle": bundle_label(bundle), "max_rows_s": best_rate, **soaked}] if "requests" in soaked else []


def run_bundle(args, bundle: Path) -> dict[str, list[dict]]:
    """Every phase on one bundle: the rows of each figure recorded ("serve-load", "serve-kill", "serve-soak")."""
    kind, texts = bundle_kind(bundle), texts_for(args)
    requests = [request_for(kind, text) for text in texts]
    cores = server_cores()
    print(f"\n== {bundle} ({kind}) on {host_label(machine())}; {placement_note()}")
    if args.soak_only:
        return {"serve-soak": soak_only(args, bundle, kind, requests, cores)}
    passes = []
    for repeat in range(args.repeats):  # every server and the offline ceiling once a pass: drifts of the host
        if args.repeats > 1:            # fall on all of them alike
            print(f"-- pass {repeat + 1} of {args.repeats}")
        passes.append(load_pass(args, bundle, kind, texts, requests, cores))
    rows, best_rate = merged([rows for rows, _ in passes]), float(np.median([rate for _, rate in passes]))
    figures = {"serve-load": rows}
    if args.kill:
        killed = kill_phase(args, bundle, requests, max(1, cores // 2))
        print(f"kill -9 of one of two workers: {killed}")
        if "error" not in killed:
            figures["serve-kill"] = [{"bundle": bundle_label(bundle), "failed": killed["failed"],
                                      "served_again_s": killed["served_again_s"], "rows_s": killed["rows_s"]}]
    if args.soak:
        soaked = soak_phase(args, bundle, kind, 0.7 * best_rate, max(1, cores // args.soak_workers))
        print(f"soak: {soaked}")
        if "requests" in soaked:
            figures["serve-soak"] = [{"bundle": bundle_label(bundle), **soaked}]
    return figures


def load_pass(args, bundle: Path, kind: str, texts: list[str], requests, cores: int) -> tuple[list[dict], float]:
    """One pass over the offline ceiling and every server: its rows and the best rows/s of `shrinkbert serve`."""
    if PLACEMENT["server"]:  # the ceiling on the cores the servers get
        os.sched_setaffinity(0, PLACEMENT["server"])
    try:
        base = offline(bundle, texts, kind, args.seconds)
    finally:
        if PLACEMENT["load"]:
            os.sched_setaffinity(0, PLACEMENT["load"])
    print(f"offline Predictor: b1 p50 {base['p50_ms_b1']} ms; best {base['best_rows_s']} rows/s at batch "
          f"{base['best_batch']} ({base['best_runtime']})")
    rows = [{"bundle": bundle_label(bundle), "kind": kind, "server": "Predictor offline",
             "mode": f"batch {base['best_batch']}, {base['best_runtime']}",
             "clients": 0, "rows_s": base["best_rows_s"], "p50_ms": base["p50_ms_b1"], "p95_ms": None,
             "p99_ms": None, "errors": 0}]
    # (make a server, whether its closed loops set the maximum, whether it runs the open loops): each layout,
    # the first one again with each queue bound (its open loops at the default's rates), the unbatched loop
    arms = []
    for n, layout in enumerate(args.layouts):
        parts = [int(x) for x in layout.split("x")]
        workers, instances, threads = parts if len(parts) == 3 else (parts[0], 1, parts[1])
        arms.append((lambda w=workers, i=instances, t=threads: shrinkbert_server(bundle, w, t, instances=i), True, n == 0))
        if n == 0:
            bounds = [("--queue-size", str(rows)) for rows in args.queue_size]
            bounds += [("--max-queue-ms", f"{ms:g}") for ms in args.max_queue_ms]
            arms += [(lambda w=workers, i=instances, t=threads, b=bound: shrinkbert_server(bundle, w, t, *b, instances=i),
                      False, True) for bound in bounds]
    arms.append((lambda: shrinkbert_server(bundle, 1, cores, "--max-batch-rows", "1"), False, False))
    if KINDS[kind][2]:
        arms.append((lambda: infinity_server(args, bundle), False, False))
    best_rate = reference = heaviest_p99 = 0.0  # heaviest_p99: the first layout's p99 at the most closed-loop clients
    for make, sets_maximum, runs_open_loops in arms:
        made = make()
        server, what = made if isinstance(made, tuple) else (made, "")
        if server is None:
            print(what)
            continue
        why = server.wait_ready(args.start_timeout)
        if why:
            print(f"{server.name} did not start: {why}")
            server.stop()
            continue
        try:
            if server.name.startswith("infinity"):
                model = json.loads(__import__("httpx").get(server.url + "/models", timeout=10).text)["data"][0]["id"]
                load = [KINDS[kind][2](model, t) for t in texts]
                print(f"{server.name}: {what}")
            else:
                load = requests
            for clients in args.clients:
                # wrk drops its connections at the end of a point with their requests still queued; the server
                # runs them anyway, so the next point starts once they have run (else its first requests meet a
                # queue holding the last point's clients, and a closed loop's refused clients retry at once)
                time.sleep(SETTLE_S)
                point = (wrk_closed_loop(server.url, load, clients, args.seconds) if args.generator == "wrk"
                         else asyncio.run(closed_loop(server.url, load, clients, args.seconds)))
                print(f"{server.name:<26} closed {clients:>4} clients: {point['rows_s']:>8} rows/s  p50 {point['p50_ms']:>7} "
                      f"p95 {point['p95_ms']:>7} p99 {point['p99_ms']:>7} ms  errors {point['errors']} {point['codes']}")
                rows.append({"bundle": bundle_label(bundle), "kind": kind, "server": server.name, "mode": "closed",
                             "clients": clients, **{k: point[k] for k in ("rows_s", "p50_ms", "p95_ms", "p99_ms",
                                                                          "errors")}})
                if sets_maximum:
                    best_rate = max(best_rate, point["rows_s"])
                if runs_open_loops and not reference and clients == max(args.clients):
                    heaviest_p99 = point["p99_ms"]
            if runs_open_loops and best_rate:
                if reference:  # a bounded queue's arm: the rates of the default's
                    print(f"{server.name:<26} open loops at the default's rates ({reference} rows/s: 1.0x)")
                elif args.open_generator == "h2load":  # a generator in C, as wrk: the rates are fractions of the maximum
                    reference = best_rate
                    print(f"{server.name:<26} maximum {reference} rows/s: the open loops' 1.0x")
                else:  # the asyncio generator takes more of the shared cores: its rates are fractions of what this
                    # server holds with it beside (32 clients)
                    reference = asyncio.run(closed_loop(server.url, load, 32, args.seconds))["rows_s"]
                    print(f"{server.name:<26} closed   32 clients (asyncio generator): {reference} rows/s: the open "
                          "loops' 1.0x")
                probe = median_request(load)
                idle_ms = idle_probe_ms(server.url, probe)
                print(f"{server.name:<26} idle probe (one request every {PROBE_GAP_S * 1000:.0f} ms): p50 "
                      f"{idle_ms:.2f} ms")
                for fraction in args.rates:
                    point = (h2load_open_loop(server.url, load, fraction * reference, args.seconds)
                             if args.open_generator == "h2load" else
                             asyncio.run(open_loop(server.url, load, fraction * reference, args.seconds)))
                    back = recovery_seconds(server.url, probe, idle_ms)
                    p99_ratio = (round(point["p99_ms"] / heaviest_p99, 2)
                                 if heaviest_p99 and point["p99_ms"] is not None else None)
                    print(f"{server.name:<26} open {point['rate']:>7}/s ({fraction}x, sent {point.get('sent_s')}/s): "
                          f"{point['rows_s']} rows/s p50 {point['p50_ms']} p99 {point['p99_ms']} ms "
                          f"({p99_ratio}x the p99 at {max(args.clients)} clients), codes {point['codes']}, back to idle in {back} s")
                    rows.append({"bundle": bundle_label(bundle), "kind": kind, "server": server.name,
                                 "mode": f"open {fraction}x ({args.open_generator})", "clients": 0,
                                 **{k: point[k] for k in ("rows_s", "p50_ms", "p95_ms", "p99_ms", "errors")},
                                 "p99_x_heaviest_closed": p99_ratio,
                                 "refused_429": point["codes"].get("429", 0), "back_to_idle_s": back,
                                 "idle_probe_ms": round(idle_ms, 2),
                                 "asked_s": point["rate"], "sent_s": point.get("sent_s")})
        finally:
            server.stop()
    return rows, best_rate


def merged(passes: list[list[dict]]) -> list[dict]:
    """One row per point over the passes: each number the median of the passes', rows/s's range beside it."""
    if len(passes) == 1:
        return passes[0]
    points: dict[tuple, list[dict]] = {}
    for rows in passes:
        for row in rows:
            mode = "" if row["server"] == "Predictor offline" else row["mode"]  # its best batch may differ
            points.setdefault((row["server"], mode, row["clients"]), []).append(row)
    out = []
    for same in points.values():
        row = dict(same[0])
        for key, value in row.items():
            values = [r.get(key) for r in same if isinstance(r.get(key), (int, float)) and not isinstance(r.get(key), bool)]
            if values and key != "clients":
                row[key] = round(float(np.median(values)), 2)
        rates = [r["rows_s"] for r in same]
        row.update(mode=" / ".join(dict.fromkeys(r["mode"] for r in same)), repeats=len(same), rows_s_range=f"{min(rates):g}-{max(rates):g}")
        out.append(row)
    return out


def main(argv: list[str] | None = None) -> int:
    import uvloop  # the server's own loop: the generator's cost per request is smaller on it too

    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bundle", action="append", help="a bundle to load (repeatable; default: the demo's and the "
                   "embeddings recipe's)")
    p.add_argument("--texts", help="a file of rows, one a line (default: the kit's built-in sentences)")
    p.add_argument("--clients", type=int, nargs="+", default=[1, 8, 32, 128], help="closed-loop client counts")
    p.add_argument("--rates", type=float, nargs="+", default=[0.5, 0.9, 2.0],
                   help="open-loop rates as fractions of the first layout's rows/s at 32 clients (2.0: overload)")
    p.add_argument("--layouts", nargs="+", default=["2x1", "1x2", "1x2x1"],
                   help="workers x threads (or workers x instances x threads) of `shrinkbert serve`")
    p.add_argument("--max-queue-ms", type=float, nargs="*", default=[],
                   help="also the first layout with each of these --max-queue-ms bounds: its closed loops, and its "
                        "open loops at the default's rates")
    p.add_argument("--queue-size", type=int, nargs="*", default=[],
                   help="also the first layout with each of these --queue-size bounds (rows waiting per worker): its "
                        "closed loops, and its open loops at the default's rates")
    p.add_argument("--seconds", type=float, default=20.0, help="seconds per point")
    p.add_argument("--repeats", type=int, default=1, help="passes over the offline ceiling and every server, one "
                   "after the other; each point's median is recorded, its rows/s range beside it")
    p.add_argument("--generator", choices=["wrk", "asyncio"], default="wrk" if shutil.which("wrk") else "asyncio",
                   help="the closed loop's load generator: wrk (apt-get install wrk; the default where it is found) "
                        "or the asyncio client here")
    p.add_argument("--open-generator", choices=["h2load", "asyncio"],
                   default="h2load" if shutil.which("h2load") else "asyncio",
                   help="the open loops' generator: h2load (apt-get install nghttp2-client; the default where it is "
                        "found) or the asyncio client here; the kill and recovery always use the asyncio one")
    p.add_argument("--kill", action="store_true", help="also kill one of two workers under load")
    p.add_argument("--soak", type=float, default=0.0, help="seconds of locust soak at 70%% of the maximum (0: none)")
    p.add_argument("--soak-workers", type=int, default=0,
                   help="workers of the soaked server (default: one per core, as the server's own default)")
    p.add_argument("--soak-only", action="store_true", help="only the soak (its maximum from 32 closed-loop clients "
                   "for --seconds first)")
    p.add_argument("--infinity-venv", default=str(INFINITY_VENV), help="the venv holding infinity-emb 0.0.78")
    p.add_argument("--infinity-model", help="the folder infinity-emb loads (default: the bundle's nearest ancestor "
                   "with weights)")
    p.add_argument("--locust-venv", default=str(LOCUST_VENV), help="the venv holding locust")
    p.add_argument("--start-timeout", type=float, default=120.0, help="seconds a server may take to be ready")
    p.add_argument("--smoke", action="store_true", help="2 s a point, 1 and 8 clients, the kill and a 6 s soak: "
                   "proves the plumbing; nothing recorded")
    p.add_argument("--split-cores", action="store_true",
                   help="servers on the first half of the cores, every load generator and probe on the other half "
                        "(give --layouts that fit the server's half, 1x1 on 2 cores)")
    p.add_argument("--no-record", action="store_true", help="print only")
    args = p.parse_args(argv)
    if args.split_cores:
        split_cores()
    args.soak_workers = args.soak_workers or server_cores()
    if args.smoke:
        args.seconds, args.clients, args.kill, args.no_record = 2.0, [1, 8], True, True
        args.soak = args.soak or 6.0
    bundles = [Path(b).resolve() for b in (args.bundle or DEFAULT_BUNDLES)]
    missing = [str(b) for b in bundles if not (b / "serve.py").is_file()]
    if missing:
        print(f"error: no bundle with serve.py at {', '.join(missing)} (run its recipe, or `shrinkbert bundle` "
              "again to add serve.py)", file=sys.stderr)
        return 2
    figures: dict[str, list[dict]] = {}
    for bundle in bundles:
        for figure, rows in run_bundle(args, bundle).items():
            figures.setdefault(figure, []).extend(rows)
    if args.no_record:
        return 0
    titles = {"serve-load": ("Serving: rows/s and latency under load",
                             f"one row a request on 127.0.0.1, {placement_note()} "
                             f"(closed loops: {args.generator}, open loops: {args.open_generator}); {args.seconds:.0f} s a "
                             "point"),
              "serve-kill": ("Serving: one of two workers killed under load",
                             "32 closed-loop clients; SIGKILL to one worker halfway; requests failed and seconds until "
                             "one is answered again"),
              "serve-soak": ("Serving: soak at 70% of the maximum",
                             f"locust, 32 users at a fixed total rate, {args.soak:.0f} s; p99 of the first and last "
                             "minute; the server's resident memory after the first minute and at the end")}
    split = PLACEMENT["server"] is not None
    for figure, rows in figures.items():
        columns = list(dict.fromkeys(key for row in rows for key in row))  # open-loop rows carry two more
        rows = [{key: row.get(key) for key in columns} for row in rows]
        title, note = titles[figure]
        # a figure of its own: the results page keeps a host's latest run of each, and a split run
        # (half the cores serving) does not stand for the whole-machine one
        record(figure + ("-split-cores" if split else ""), section="serving",
               title=title + (", the load on other cores" if split else ""), rows=rows,
               note=note if figure == "serve-load" or not split else f"{note}; {placement_note()}",
               machine=machine())
    return 0


if __name__ == "__main__":
    sys.exit(main())
