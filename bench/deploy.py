"""One int8 model on every runtime the kit ships it to, timed on one host.

    python bench/deploy.py --model runs/demo/edge-int8            # the demo's edge model
    python bench/deploy.py --model runs/quick/edge-int8 --rows 100 --rounds 3
    python bench/deploy.py --model runs/quick/edge-int8 --rows 40 --rounds 2 --words 60   # one length

Writes a web bundle and a mobile bundle of `--model` (the bundle stage's own checks run), then
times one call per text, tokenizing included, on the task's real test rows, in rounds whose order
rotates (the machine is shared and noisy: ratios come from one interleaved run):
  python   the bundle's Predictor (onnxruntime + tokenizers), in this process
  mobile   the bundle's mobile/model.ort in the same Predictor (ONNX Runtime reads .ort too; a phone
           runs the same file with ONNX Runtime Mobile, not timed here)
  node     transformers.js in Node (onnxruntime-node), scripts/web_node.mjs
  browser  the bundle's page in headless chromium (ONNX Runtime Web, wasm), scripts/web_drive.mjs, as it
           ships: one wasm thread
  browser-all  the same page on every core (?threads=N, the page served cross-origin isolated)
Each process's first 5 calls are warm-up and dropped. Prints p50/p90 ms per runtime, the browser's
ratio to Node (the page is meant to stay within 3x of Node), label agreement with the Python bundle, and the host's
CPU and ISA; saves runs/bench/deploy.json.
"""
from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
WEB = ROOT / ".web"
WARMUP = 5


class _Quiet(SimpleHTTPRequestHandler):
    def end_headers(self):  # cross-origin isolated: ONNX Runtime Web may then run wasm on several threads
        self.send_header("Cross-Origin-Opener-Policy", "same-origin")
        self.send_header("Cross-Origin-Embedder-Policy", "require-corp")
        super().end_headers()

    def log_message(self, *args):
        pass


def _python_calls(bundle: Path, texts: list[str], model_file: str | None = None) -> tuple[list[float], list[str]]:
    from shrinkbert.compress.edge_predictor import Predictor

    predictor = Predictor(bundle, model_file=model_file)  # the bundle's own threads and spin either way
    times, labels = [], []
    for text in [texts[0]] * WARMUP + texts:
        start = time.perf_counter()
        probabilities = predictor.probabilities(predictor.encode([text]))[0]
        times.append((time.perf_counter() - start) * 1000.0)
        labels.append(predictor.labels[int(probabilities.argmax())])
    return times[WARMUP:], labels[WARMUP:]


def _js_calls(command: list[str]) -> tuple[list[float], list[str]]:
    done = subprocess.run(command, capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        raise SystemExit(f"error: {' '.join(command[:2])} failed: {done.stderr[-1500:]}")
    runs = json.loads(done.stdout.strip().splitlines()[-1])
    return ([r["ms"] for r in runs][WARMUP:],
            [max(r["result"], key=lambda x: x["score"])["label"] for r in runs][WARMUP:])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="an int8 ONNX artifact (a sequence classifier), e.g. runs/demo/edge-int8")
    parser.add_argument("--rows", type=int, default=200, help="test rows timed per runtime and round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--words", type=int, default=0,
                        help="instead of the test rows: one synthetic text of this many words, --rows times (how each "
                             "runtime's time grows with length: 1 word is its per-call cost)")
    parser.add_argument("--output", default=str(ROOT / "runs" / "bench" / "deploy.json"))
    args = parser.parse_args(argv)

    import shrinkbert
    from shrinkbert.core.data.dataspec import resolve_spec
    from shrinkbert.compress.common import load_rows
    from shrinkbert.core.device import cpu_model, detect_isa

    node, chromium = shutil.which("node"), shutil.which("chromium") or shutil.which("chromium-browser")
    if node is None or chromium is None:
        raise SystemExit("error: the deploy bench needs node and chromium (apt-get install npm chromium)")
    subprocess.run(["bash", str(ROOT / "scripts" / "web_install.sh")], check=True, timeout=900)
    spec = resolve_spec(type("C", (), {"task": ""})(), [args.model])
    rows, _ = load_rows(spec, "test", args.rows, "")
    texts = [row["text"] for row in rows]
    if args.words:
        filler = "the film is long and the story is slow but the cast is good".split()
        texts = [" ".join(filler[i % len(filler)] for i in range(args.words))] * len(texts)
    with tempfile.TemporaryDirectory() as scratch:
        site = Path(scratch)
        web = Path(shrinkbert.bundle(model=args.model, output_dir=str(site / "web"), target="web").path)
        mobile = Path(shrinkbert.bundle(model=args.model, output_dir=str(site / "mobile"), target="mobile").path)
        subprocess.run(["bash", str(ROOT / "scripts" / "web_runtime.sh"), str(web)], check=True, timeout=600,
                       capture_output=True)
        (site / "texts.json").write_text(json.dumps([texts[0]] * WARMUP + texts))  # as _python_calls runs them
        server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(site)))
        threading.Thread(target=server.serve_forever, daemon=True).start()
        url = f"http://127.0.0.1:{server.server_address[1]}/web/index.html"
        runtimes = {
            "python": lambda: _python_calls(web, texts),
            "mobile": lambda: _python_calls(mobile, texts, "mobile/model.ort"),
            "node": lambda: _js_calls([node, str(WEB / "web_node.mjs"), str(site), "web", str(site / "texts.json")]),
            "browser": lambda: _js_calls([node, str(WEB / "web_drive.mjs"), url, str(site / "texts.json"), chromium]),
            # the same page on every core: one thread measured faster for the kit's edge models, so it is the default
            "browser-all": lambda: _js_calls([node, str(WEB / "web_drive.mjs"), url + f"?threads={os.cpu_count()}",
                                             str(site / "texts.json"), chromium]),
        }
        times = {name: [] for name in runtimes}
        labels = {}
        order = list(runtimes)
        try:
            for round_ in range(args.rounds):
                for name in order[round_ % len(order):] + order[:round_ % len(order)]:
                    ms, got = runtimes[name]()
                    times[name] += ms
                    labels.setdefault(name, got)
                    print(f"round {round_ + 1}/{args.rounds} {name:8s} p50 {np.median(ms):7.2f} ms", flush=True)
        finally:
            server.shutdown()
    host = {"cpu": cpu_model() or platform.processor(), "isa": detect_isa(), "cores": os.cpu_count()}
    summary = {name: {"p50_ms": float(np.median(ms)), "p90_ms": float(np.percentile(ms, 90)), "calls": len(ms),
                      "labels_equal_python": float(np.mean([a == b for a, b in zip(labels[name], labels["python"])]))}
               for name, ms in times.items()}
    result = {"model": str(Path(args.model).resolve()), "rows": len(texts), "rounds": args.rounds, "host": host,
              "case": (f"b1, one {args.words}-word text" if args.words else "b1, real test rows") + ", one call each, tokenizing included", "runtimes": summary,
              "browser_over_node": summary["browser"]["p50_ms"] / summary["node"]["p50_ms"]}
    print(f"\nhost: {host['cpu']}, {host['isa']}, {host['cores']} cores; {len(texts)} test rows x {args.rounds} rounds")
    print(f"{'runtime':10s} {'p50 ms':>8s} {'p90 ms':>8s} {'labels = python':>16s}")
    for name, row in summary.items():
        print(f"{name:10s} {row['p50_ms']:8.2f} {row['p90_ms']:8.2f} {row['labels_equal_python']:16.1%}")
    print(f"browser / node p50: {result['browser_over_node']:.2f}x (goal: within 3x)")
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(json.dumps(result, indent=2))
    from record import record
    record("deploy-by-length" if args.words else "deploy-runtimes", section="deploy-targets",
           title=("Python, Node and the browser by text length" if args.words
                  else "One int8 model in Python, its .ort file, Node and the browser"),
           rows=[{"runtime": name, "p50 ms": round(row["p50_ms"], 2), "p90 ms": round(row["p90_ms"], 2),
                  "labels = Python bundle": f"{row['labels_equal_python']:.0%}"} for name, row in summary.items()],
           note=f"{Path(args.model).name}; {result['case']}; {len(texts)} rows x {args.rounds} interleaved rounds.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
