"""int8 bench: the fine-tuned MiniLM teacher, fp32 ONNX vs every int8 variant, in ONE run.

    flock /tmp/cpu.lock python bench/int8.py --teacher runs/shared-teacher | tee runs/bench/logs/int8.log

Variants (all from the same teacher, ONNX Runtime, CPU):
- fp32 ONNX (unfused) and fp32 ONNX O2 (fused attention);
- dynamic int8 on the unfused graph: per-tensor s8, per-channel s8, per-channel + reduce_range s8,
  u8u8 (per-channel u8 weights, full range), and the ISA's defaults (whatever compress.int8 picks here);
- O2 + dynamic int8 with the ISA's defaults (quantize_dynamic, DefaultTensorType) and with the
  per-tensor full-range setting, for comparison;
- static int8 (QDQ, MatMul/Gemm only; LayerNorm, GELU, residual Add, Softmax inputs kept float), one
  per calibration method (minmax, entropy, percentile);
- weight-only int4 (MatMulNBits).
Test accuracy on the whole test split; latency batch 1, seq 128 (padded), p50 over interleaved
rounds with the eval harness's method (eval.latency.measure_interleaved: warm-up, rotating order,
gc paused), threads stated. The CPU model and int8 ISA head the table. Results go to <out>/results.json.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--teacher", default=str(ROOT / "runs/shared-teacher"), help="fine-tuned PyTorch teacher artifact")
    p.add_argument("--task", default="movie-snippets", help="task the teacher was fine-tuned on")
    p.add_argument("--out", default=str(ROOT / "runs/bench/int8"))
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--batch-size", type=int, default=1)
    p.add_argument("--rounds", type=int, default=40, help="timed interleaved rounds per variant")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--max-test-rows", type=int, default=0, help="0: the whole test split")
    p.add_argument("--calibration-rows", type=int, default=128)
    p.add_argument("--calibrations", default="minmax,entropy,percentile")
    p.add_argument("--int4-block-size", type=int, default=32)
    p.add_argument("--only", default="", help="comma-separated variant names to build and measure (with fp32)")
    p.add_argument("--reuse", action="store_true", help="reuse artifacts already in --out")
    return p.parse_args(argv)


def variants(calibrations: list[str], block: int) -> list[tuple[str, str, dict, str]]:
    """(name, source graph 'fp32'|'fp32-o2', quantize.Config values, description)."""
    rows = [
        ("dyn-per-tensor", "fp32", dict(per_channel=False, reduce_range=False, weight_type="s8"),
         "dynamic, per-tensor s8 weights, full range"),
        ("dyn-per-channel", "fp32", dict(per_channel=True, reduce_range=False, weight_type="s8"),
         "dynamic, per-channel s8, full range"),
        ("dyn-pc-reduce-range", "fp32", dict(per_channel=True, reduce_range=True, weight_type="s8"),
         "dynamic, per-channel s8, reduce_range (7-bit)"),
        ("dyn-u8u8", "fp32", dict(per_channel=True, reduce_range=False, weight_type="u8"),
         "dynamic, per-channel u8 weights (u8u8)"),
        ("dyn-isa-default", "fp32", dict(), "dynamic, the ISA's defaults"),
        ("o2-int8-per-tensor", "fp32-o2", dict(per_channel=False, reduce_range=False, weight_type="s8"),
         "O2 fused + dynamic, per-tensor s8 (the old default)"),
        ("o2-int8-pc-reduce-range", "fp32-o2", dict(per_channel=True, reduce_range=True, weight_type="s8"),
         "O2 fused + dynamic, per-channel s8, reduce_range"),
        ("o2-int8-u8u8", "fp32-o2", dict(per_channel=True, reduce_range=False, weight_type="u8"),
         "O2 fused + dynamic, per-channel u8u8"),
        ("o2-int8-isa-default", "fp32-o2", dict(), "O2 fused + dynamic, the ISA's defaults"),
    ]
    for method in calibrations:
        rows.append((f"static-{method}", "fp32", dict(approach="static", calibration=method),
                     f"static QDQ, {method}, MatMul/Gemm/Gather; LN/GELU/Add/Softmax float"))
    rows.append(("int4", "fp32", dict(approach="int4", int4_block_size=block), f"weight-only int4 (MatMulNBits + GatherBlockQuantized), block {block}"))
    return rows


def main(argv=None) -> int:
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    args = parse_args(argv)
    import numpy as np
    import onnxruntime

    from shrinkbert.compress import export, int8, quantize
    from shrinkbert.compress.common import accuracy, align_labels, file_mb, load_rows, onnx_file, ort_logits, ort_session
    from shrinkbert.core.artifacts import is_artifact, read_manifest
    from shrinkbert.core.data.dataspec import resolve_spec
    from shrinkbert.eval.latency import Case, measure_interleaved
    from shrinkbert.eval.runners import open_runner

    teacher = Path(args.teacher)
    if not is_artifact(teacher):
        raise SystemExit(f"no teacher at {teacher}: fine-tune one first (see the module docstring)")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    spec = resolve_spec(SimpleNamespace(task=args.task), [teacher])
    t_start = time.perf_counter()
    cpu = int8.cpu_description()
    print(f"CPU: {cpu}; ONNX Runtime {onnxruntime.__version__}; {args.threads} threads "
          f"(intra-op, inter-op 1, no spinning); teacher {teacher}; task {spec.task}", flush=True)
    print(f"ISA defaults here: {json.dumps({k: v for k, v in int8.choose('auto').items() if k != 'source'})}", flush=True)

    def build(path: Path, make) -> Path:
        if args.reuse and is_artifact(path):
            return path
        t0 = time.perf_counter()
        make()
        print(f"  built {path.name} ({time.perf_counter() - t0:.0f}s)", flush=True)
        return path

    sources = {
        "fp32": build(out / "fp32", lambda: export.run(export.Config(model=str(teacher), output_dir=str(out / "fp32"),
                                                                     optimization="none", parity_rows=16))),
        "fp32-o2": build(out / "fp32-o2", lambda: export.run(export.Config(model=str(teacher),
                                                                           output_dir=str(out / "fp32-o2"),
                                                                           optimization="O2", parity_rows=16))),
    }
    wanted = [v for v in args.only.split(",") if v]
    table = [("fp32", "fp32", None, "fp32 ONNX, unfused"), ("fp32-o2", "fp32-o2", None, "fp32 ONNX, O2 fusions")]
    table += [v for v in variants([c for c in args.calibrations.split(",") if c], args.int4_block_size)
              if not wanted or v[0] in wanted]
    paths: dict[str, Path] = dict(sources)
    build_s: dict[str, float] = {}
    for name, src, values, _ in table:
        if values is None:
            continue
        cfg = dict(model=str(sources[src]), output_dir=str(out / name), task=spec.task, max_eval_rows=0,
                   calibration_rows=args.calibration_rows)
        cfg.update(values)
        t0 = time.perf_counter()
        try:
            paths[name] = build(out / name, lambda cfg=cfg: quantize.run(quantize.Config(**cfg)))
        except Exception as err:  # one failed variant must not sink the bench
            print(f"  {name}: FAILED to build: {type(err).__name__}: {str(err).splitlines()[0][:200]}", flush=True)
            continue
        build_s[name] = round(time.perf_counter() - t0, 1)

    # Test accuracy, whole test split.
    from transformers import AutoConfig, AutoTokenizer

    rows, task = load_rows(spec, "test", args.max_test_rows or None)
    labels = align_labels(rows, task, AutoConfig.from_pretrained(str(teacher)).id2label)
    tokenizer = AutoTokenizer.from_pretrained(str(sources["fp32"]))
    results: dict[str, dict] = {}
    fp32_pred = None
    for name, path in paths.items():
        t0 = time.perf_counter()
        logits = ort_logits(ort_session(path, args.threads), tokenizer, rows, 128, batch_size=32)
        pred = logits.argmax(-1)
        fp32_pred = pred if name == "fp32" else fp32_pred
        results[name] = {"test_accuracy": accuracy(logits, labels), "mb": file_mb(onnx_file(path)),
                         "agreement_with_fp32": float((pred == fp32_pred).mean()) if fp32_pred is not None else None,
                         "eval_s": round(time.perf_counter() - t0, 1)}
        manifest = read_manifest(path) if is_artifact(path) else {}
        results[name]["choice"] = (manifest.get("metrics") or {}).get("int8_choice")
        print(f"  scored {name}: {results[name]['test_accuracy']:.4f} ({results[name]['eval_s']}s)", flush=True)

    # Latency: batch 1 (default), seq 128 padded, interleaved, the eval harness's method.
    runners = {name: open_runner(path, args.threads) for name, path in paths.items()}
    case = Case(args.batch_size, args.seq_len)
    texts = [r["text"] for r in rows]
    pairs = [r["text_pair"] for r in rows] if all(r["text_pair"] is not None for r in rows) else None
    errors = []
    timing = measure_interleaved(runners, case, texts, pairs, max_length=args.seq_len, warmup=args.warmup,
                                 runs=args.rounds, on_error=lambda n, m: errors.append(f"{n}: {m}"))
    for runner in runners.values():
        runner.close()
    for name, stats in timing.items():
        results[name]["p50_ms"] = stats["p50"]
        results[name]["load_1m"] = stats.get("load_1m")

    base_acc, base_ms = results["fp32"]["test_accuracy"], results["fp32"].get("p50_ms")
    print()
    print(f"int8 bench: {cpu}; ORT {onnxruntime.__version__}, {args.threads} threads; "
          f"{len(rows)} test rows ({spec.task}); latency {case.label}, p50 of {args.rounds} interleaved rounds "
          f"(load {timing.get('fp32', {}).get('load_1m')})")
    print()
    print("| variant | settings | test acc | vs fp32 (pt) | p50 ms | speed-up vs fp32 ONNX | MB |")
    print("|---|---|--:|--:|--:|--:|--:|")
    for name, _src, _values, desc in table:
        if name not in results:
            print(f"| {name} | {desc} | failed | | | | |")
            continue
        r = results[name]
        ms = r.get("p50_ms")
        delta = 100 * (r["test_accuracy"] - base_acc)
        speed = f"{base_ms / ms:.2f}x" if ms and base_ms else "n/a"
        print(f"| {name} | {desc} | {r['test_accuracy']:.4f} | {delta:+.2f} | "
              f"{ms:.2f} | {speed} | {r['mb']:.1f} |" if ms else
              f"| {name} | {desc} | {r['test_accuracy']:.4f} | {delta:+.2f} | n/a | n/a | {r['mb']:.1f} |")
    for line in errors:
        print("timing error:", line)
    # Against the goals.
    se = 100 * float(np.sqrt(base_acc * (1 - base_acc) / len(rows)))
    print()
    print(f"goals: int8 >= 1.5x vs fp32 ONNX at {case.label} losing <= 0.5 pt; static within 1 pt "
          f"(binomial se of one accuracy here: {se:.2f} pt)")
    for name in ("dyn-isa-default", "o2-int8-isa-default"):
        if name in results and results[name].get("p50_ms") and base_ms:
            r = results[name]
            loss = 100 * (base_acc - r["test_accuracy"])
            speed = base_ms / r["p50_ms"]
            print(f"  {name}: {speed:.2f}x ({'met' if speed >= 1.5 else 'short'}), loses {loss:.2f} pt "
                  f"({'met' if loss <= 0.5 else 'short'})")
    statics = {n: r for n, r in results.items() if n.startswith("static-")}
    if statics:
        best = max(statics, key=lambda n: statics[n]["test_accuracy"])
        loss = 100 * (base_acc - statics[best]["test_accuracy"])
        print(f"  best static: {best}, loses {loss:.2f} pt ({'met' if loss <= 1.0 else 'short'})")
    print(f"total {time.perf_counter() - t_start:.0f}s")
    (out / "results.json").write_text(json.dumps({"cpu": cpu, "ort": onnxruntime.__version__, "threads": args.threads,
                                                  "case": case.label, "rounds": args.rounds, "test_rows": len(rows),
                                                  "build_s": build_s, "results": results}, indent=1))
    from record import record
    record("int8-settings", section="int8", title="Every int8 setting against the fp32 ONNX graph",
           rows=[{"variant": f"{name}: {desc}", "test acc": round(results[name]["test_accuracy"], 4),
                  "vs fp32": f"{100 * (results[name]['test_accuracy'] - base_acc):+.2f} pt",
                  "p50 ms": round(results[name]["p50_ms"], 2) if results[name].get("p50_ms") else None,
                  "vs fp32 ONNX": f"{base_ms / results[name]['p50_ms']:.2f}x"
                  if results[name].get("p50_ms") and base_ms else None,
                  "MB": round(results[name]["mb"], 1)}
                 for name, _src, _values, desc in table if name in results],
           note=f"ONNX Runtime {onnxruntime.__version__}, {args.threads} threads; {len(rows)} test rows; "
                f"{case.label}, p50 of {args.rounds} interleaved rounds.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
