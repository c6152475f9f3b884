"""Long-run load: 100k predictions through the edge bundle's own predictor and through the eval
harness's runner, each in a fresh process, with resident memory sampled as it goes.

    python bench/load.py                                   # the demo's bundle and edge-int8, 100k each
    python bench/load.py --bundle DIR --model ART --predictions 20000

The test sentences of the task are cycled with batch sizes 1, 8 and 32 in turn. Printed per
worker: predictions/s, RSS after the first 10% (warm) and at the end, the growth between them,
and the largest RSS seen. Flat memory means the growth is a small fraction of the warm RSS.
Results go to runs/bench/load.json.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BATCHES = (1, 8, 32)


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def worker(kind: str, path: str, texts_file: str, predictions: int, threads: int) -> dict:
    """Runs in its own process: `kind` bundle (torch-free) or runner (eval harness)."""
    sys.path.insert(0, str(ROOT))
    texts = json.loads(Path(texts_file).read_text())  # read by the parent: this process imports only its runtime
    if kind == "bundle":
        sys.path.insert(0, path)
        from predict import Predictor  # the bundle's own file

        predictor = Predictor(path, threads=threads)

        def call(batch):
            return predictor.predict(batch, batch_size=len(batch))
    else:
        from shrinkbert.eval.runners import open_runner

        runner = open_runner(path, threads)

        def call(batch):
            return runner.predict(batch, None, 128)
    from tqdm.auto import tqdm

    done, step, cursor, samples = 0, 0, 0, []
    warm_at = predictions // 10
    warm_rss = None
    started = time.perf_counter()
    bar = tqdm(total=predictions, desc=f"load {kind}", unit="pred", mininterval=2)
    while done < predictions:
        size = min(BATCHES[step % len(BATCHES)], predictions - done)
        batch = [texts[(cursor + i) % len(texts)] for i in range(size)]
        out = call(batch)
        assert len(out) == size
        cursor, done, step = cursor + size, done + size, step + 1
        bar.update(size)
        if warm_rss is None and done >= warm_at:
            warm_rss, warm_time, warm_done = rss_mb(), time.perf_counter(), done
        if step % 200 == 0:
            samples.append([done, rss_mb()])
    bar.close()
    elapsed = time.perf_counter() - started
    end_rss = rss_mb()
    return {"kind": kind, "path": path, "predictions": done, "seconds": elapsed,
            "predictions_per_s": (done - warm_done) / (time.perf_counter() - warm_time),
            "rss_warm_mb": warm_rss, "rss_end_mb": end_rss, "rss_growth_mb": end_rss - warm_rss,
            "rss_max_mb": max([s[1] for s in samples] + [end_rss]), "torch_loaded": "torch" in sys.modules,
            "rss_samples": samples}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bundle", default=str(ROOT / "runs/demo/bundle"))
    p.add_argument("--model", default=str(ROOT / "runs/demo/edge-int8"), help="an artifact for the harness runner")
    p.add_argument("--task", default="movie-snippets")
    p.add_argument("--predictions", type=int, default=100_000)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", default=str(ROOT / "runs/bench/load.json"))
    p.add_argument("--worker", nargs=3, metavar=("KIND", "PATH", "TEXTS"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        print("RESULT " + json.dumps(worker(*args.worker, args.predictions, args.threads)))
        return 0
    sys.path.insert(0, str(ROOT))
    from shrinkbert.core.data.load import load_task

    _, splits = load_task(args.task)
    texts_file = Path(args.out).with_suffix(".texts.json")
    texts_file.parent.mkdir(parents=True, exist_ok=True)
    texts_file.write_text(json.dumps(list(splits["test"]["text"])))
    results = []
    for kind, path in (("bundle", args.bundle), ("runner", args.model)):
        if not Path(path).exists():
            print(f"error: {path} does not exist (run recipes/demo.yaml first, or pass --bundle/--model)", file=sys.stderr)
            return 2
        proc = subprocess.run([sys.executable, __file__, "--worker", kind, path, str(texts_file),
                               "--predictions", str(args.predictions), "--threads", str(args.threads)],
                              cwd=ROOT, stdout=subprocess.PIPE, text=True)
        if proc.returncode != 0:
            print(f"error: the {kind} worker failed (exit {proc.returncode})", file=sys.stderr)
            return 1
        result = json.loads(next(line for line in proc.stdout.splitlines() if line.startswith("RESULT "))[7:])
        results.append(result)
        print(f"{kind:<7} {result['predictions']:,} predictions in {result['seconds']:.0f} s "
              f"({result['predictions_per_s']:.0f}/s warm); RSS warm {result['rss_warm_mb']:.0f} MB -> end "
              f"{result['rss_end_mb']:.0f} MB (growth {result['rss_growth_mb']:+.1f} MB, "
              f"{result['rss_growth_mb'] / result['rss_warm_mb']:+.1%}); max {result['rss_max_mb']:.0f} MB; "
              f"torch loaded: {result['torch_loaded']}")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=2) + "\n")
    from record import record
    record("bundle-load", section="deploy-targets", title="100,000 predictions: throughput and resident memory",
           rows=[{"runtime": kind, "predictions/s": round(r["predictions_per_s"]), "RSS warm MB": round(r["rss_warm_mb"]),
                  "RSS at the end MB": round(r["rss_end_mb"]), "growth MB": round(r["rss_growth_mb"], 1),
                  "torch loaded": r["torch_loaded"]} for kind, r in zip(("bundle", "runner"), results)],
           note=f"{args.predictions:,} predictions, test sentences cycled, {args.threads} thread(s), each runtime "
                f"in its own fresh process.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
