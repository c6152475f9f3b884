"""Latency as deployed: the same variants timed four ways, in one run.

    flock /tmp/cpu.lock python bench/latency_isolation.py [--out runs/bench/latency-isolation]

Variants, demo-like but untrained (speed does not depend on the weights): the MiniLM teacher's
shape as a PyTorch classifier ("teacher"), its int8 ONNX ("teacher-int8"), a 2-layer H312 edge
student's int8 ONNX ("edge-int8") and its edge bundle ("bundle"); built once under --out.
Latency at b1/s128 (a row padded to 128 tokens), model call only, p50 ms, --threads threads:
  shared     all variants in this one process, round-robin call by call, ORT spinning off (in-process timing)
  workers    each variant in a worker process of its own, round-robin in bursts of 5
  workers+lead_in  the same, one untimed call before each burst
  workers+settle  the same, 50 ms idle and one untimed call before each burst (the report's default)
  alone      each variant's worker timed with no other variant
  predict.py the bundle's own predict.py --benchmark in a fresh process, spinning on and off
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def build(out: Path) -> dict[str, Path]:
    """The four variants under `out` (reused when present)."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer, BertConfig, BertForSequenceClassification

    from shrinkbert.compress import bundle, export, quantize
    from shrinkbert.core.builtin import minilm_path

    paths = {"teacher": out / "teacher", "teacher-int8": out / "teacher-int8", "edge-int8": out / "edge-int8",
             "bundle": out / "bundle"}
    if all(p.is_dir() for p in paths.values()):
        return paths
    tokenizer = AutoTokenizer.from_pretrained(str(minilm_path()))
    teacher = AutoModelForSequenceClassification.from_pretrained(str(minilm_path()), num_labels=2)
    teacher.save_pretrained(paths["teacher"])
    tokenizer.save_pretrained(paths["teacher"])
    edge = BertForSequenceClassification(BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=312, num_hidden_layers=2,
                                                    num_attention_heads=12, intermediate_size=1200, num_labels=2))
    edge.save_pretrained(out / "edge")
    tokenizer.save_pretrained(out / "edge")
    for name, source in (("teacher", paths["teacher"]), ("edge", out / "edge")):
        onnx = export.run(export.Config(model=str(source), output_dir=str(out / f"{name}-onnx"), parity_rows=8))
        quantize.run(quantize.Config(model=str(onnx), output_dir=str(paths[f"{name}-int8"])))
    bundle.run(bundle.Config(model=str(paths["edge-int8"]), output_dir=str(paths["bundle"]), parity_rows=8,
                             allow_parity_failure=True))
    return paths


def time_modes(paths: dict[str, Path], threads: int, runs: int, warmup: int) -> dict[str, dict[str, float]]:
    from shrinkbert.eval.latency import Case, measure_interleaved
    from shrinkbert.eval.runners import detect_kind, open_runner
    from shrinkbert.eval.workers import start_workers

    case = Case(1, 128)
    texts = ["the movie was good and the acting was fine"] * 4
    runners = {name: open_runner(path, threads) for name, path in paths.items()}
    timing = dict(case=case, texts=texts, pairs=None, max_length=128, warmup=warmup, runs=runs)
    results = {"shared": measure_interleaved(runners, burst=1, **timing)}
    specs = {name: {"path": path, "kind": detect_kind(path)} for name, path in paths.items()}
    workers, errors = start_workers(specs, threads)
    if errors:
        raise SystemExit(f"workers failed: {errors}")
    try:
        results["workers"] = measure_interleaved(runners, burst=5, timers=workers, **timing)
        results["workers+lead_in"] = measure_interleaved(runners, burst=5, lead_in=1, timers=workers, **timing)
        results["workers+settle"] = measure_interleaved(runners, burst=5, lead_in=1, settle_s=0.05, timers=workers,
                                                        **timing)
        results["alone"] = {}
        for name in paths:
            results["alone"].update(measure_interleaved({name: runners[name]}, burst=5, timers={name: workers[name]},
                                                        **timing))
        settings = {name: worker.timed_with for name, worker in workers.items()}
    finally:
        for worker in workers.values():
            worker.close()
    table = {mode: {name: round(stats["p50"], 3) for name, stats in by_name.items()} for mode, by_name in results.items()}
    table["other_cpu_cores"] = {mode: max(s["other_cpu_cores"] or 0 for s in by_name.values())
                                for mode, by_name in results.items()}
    table["timed_with"] = settings
    return table


def predict_py(bundle_dir: Path, runs: int) -> dict[str, float]:
    out = {}
    for label, flags in (("spin", []), ("no_spin", ["--no-spin"])):
        done = subprocess.run([sys.executable, str(bundle_dir / "predict.py"), "--benchmark", str(runs)] + flags,
                              capture_output=True, text=True, check=True, timeout=300)
        out[label] = round(json.loads(done.stdout)["p50_ms"], 3)
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=str(ROOT / "runs/bench/latency-isolation"))
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--runs", type=int, default=60)
    parser.add_argument("--warmup", type=int, default=10)
    args = parser.parse_args(argv)
    from shrinkbert.core.device import describe_machine

    paths = build(Path(args.out))
    table = time_modes(paths, args.threads, args.runs, args.warmup)
    table["predict.py (fresh process, ORT default threads)"] = predict_py(paths["bundle"], args.runs)
    table["machine"] = describe_machine()
    table["threads"] = args.threads
    print(json.dumps(table, indent=2))
    (Path(args.out) / "results.json").write_text(json.dumps(table, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
