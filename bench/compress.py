"""Compression bench: the fine-tuned MiniLM teacher -> ONNX fp32 / int8, and 40% structured pruning.

    python bench/compress.py                       # teacher at runs/bench/teacher
    python bench/compress.py --max-test-rows 1000 --recovery-train-rows 2000   # in a budget

In ONE run (interleaved timing, threads stated, session.intra_op.allow_spinning=0):
- int8 vs fp32 in ONNX Runtime, same model, batch 1 and 8, seq 128 (padded): speed-up
  (goal >= 2.5x), test accuracy loss (goal <= 0.5 pt), file size ratio (~4x); ORT O2 measured
  too (fp32-O2 and O2+int8), not assumed;
- 40% of heads and 40% of FFN neurons removed (compress.prune): fp32 ONNX latency ratio vs the
  unpruned model (goal >= 1.5x), test accuracy before and after recovery by distillation from the
  unpruned teacher (students.distill --student, a subprocess; goal <= 1 pt loss).
- the edge bundle of the int8 model (its parity vs the int8 ONNX and the PyTorch teacher);
  bench/edge_venv.sh then runs it in a fresh venv with onnxruntime, tokenizers and numpy only.
Results go to <out>/results.json and are printed.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--teacher", default=str(ROOT / "runs/bench/teacher"))
    p.add_argument("--make-teacher", action="store_true", help="fine-tune a MiniLM teacher if --teacher is absent")
    p.add_argument("--teacher-epochs", type=float, default=1)
    p.add_argument("--task", default="movie-snippets")
    p.add_argument("--out", default=str(ROOT / "runs/bench/compress"))
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--rounds", type=int, default=20, help="interleaved timing rounds per variant and batch size")
    p.add_argument("--max-test-rows", type=int, default=0, help="0: the whole test split")
    p.add_argument("--prune-fraction", type=float, default=0.4)
    p.add_argument("--no-prune", action="store_true")
    p.add_argument("--no-recovery", action="store_true")
    p.add_argument("--recovery-epochs", type=float, default=1)
    p.add_argument("--recovery-train-rows", type=int, default=0)
    p.add_argument("--no-accuracy-aware", action="store_true")
    p.add_argument("--tolerance", type=float, default=0.5, help="accuracy-aware int8 tolerance, points")
    p.add_argument("--reuse", action="store_true", help="reuse artifacts already in --out")
    return p.parse_args(argv)


def ensure_teacher(args) -> Path:
    from shrinkbert.core.artifacts import is_artifact

    teacher = Path(args.teacher)
    if is_artifact(teacher):
        return teacher
    if not args.make_teacher:
        raise SystemExit(f"no teacher at {teacher}: run the teachers bench, or pass --make-teacher")
    cmd = [sys.executable, "-m", "shrinkbert.teachers.finetune", "--model", "minilm", "--task", args.task,
           "--epochs", str(args.teacher_epochs), "--output-dir", str(teacher)]
    print("making the teacher:", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, cwd=ROOT)
    return teacher


def stage(module, out: Path, reuse: bool, **values) -> Path:
    from shrinkbert.core.artifacts import is_artifact

    if reuse and is_artifact(out):
        return out
    t0 = time.perf_counter()
    path = module.run(module.Config(output_dir=str(out), **values))
    print(f"  {module.__name__} -> {out.name} ({time.perf_counter() - t0:.0f}s)", flush=True)
    return path


def interleaved_latency(files: dict[str, Path], tokenizer, threads: int, seq_len: int, batches, rounds: int) -> dict:
    """Median ms per variant and batch size; variants alternate inside every round."""
    from shrinkbert.compress.common import ort_session

    sessions = {name: ort_session(path, threads) for name, path in files.items()}
    text = "the film was long but the actors were good and the story kept moving " * 20
    result = {}
    for batch in batches:
        enc = tokenizer([text] * batch, truncation=True, max_length=seq_len, padding="max_length", return_tensors="np")
        feeds = {}
        for name, session in sessions.items():
            names = {i.name for i in session.get_inputs()}
            feeds[name] = {k: v.astype(np.int64) for k, v in enc.items() if k in names}
            for _ in range(3):
                session.run(None, feeds[name])
        samples = {name: [] for name in sessions}
        for _ in range(rounds):
            for name, session in sessions.items():
                t0 = time.perf_counter()
                session.run(None, feeds[name])
                samples[name].append((time.perf_counter() - t0) * 1000)
        result[f"b{batch}"] = {name: round(statistics.median(v), 3) for name, v in samples.items()}
    return result


def test_accuracy(path: Path, rows, labels, tokenizer) -> float:
    from shrinkbert.compress.common import accuracy, load_pt, ort_logits, ort_session, torch_logits

    if any(Path(path).glob("*.onnx")):
        return accuracy(ort_logits(ort_session(path, 2), tokenizer, rows, 128, batch_size=32), labels)
    model, tok = load_pt(path)
    return accuracy(torch_logits(model, tok, rows, 128, batch_size=32), labels)


def main(argv=None) -> int:
    import os

    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    args = parse_args(argv)
    from transformers import AutoConfig, AutoTokenizer

    from shrinkbert.compress import bundle, export, prune, quantize
    from shrinkbert.compress.common import align_labels, load_rows
    from shrinkbert.core.data.dataspec import DataSpec
    from shrinkbert.compress.int8 import detect_isa
    from shrinkbert.core.device import describe_machine

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    teacher = ensure_teacher(args)
    print(f"machine: {describe_machine()}; ORT threads {args.threads}; seq {args.seq_len}", flush=True)
    results: dict = {"machine": describe_machine(), "threads": args.threads, "seq_len": args.seq_len,
                     "teacher": str(teacher), "task": args.task, "isa": detect_isa()}

    fp32 = stage(export, out / "onnx-fp32", args.reuse, model=str(teacher), task=args.task, parity_rows=64,
                 optimization="none")  # unfused: static int8 and accuracy-aware need it
    o2 = stage(export, out / "onnx-fp32-O2", args.reuse, model=str(teacher), task=args.task, parity_rows=64,
               optimization="O2")
    int8 = stage(quantize, out / "onnx-int8", args.reuse, model=str(fp32), task=args.task, max_eval_rows=512)
    int8_o2 = stage(quantize, out / "onnx-int8-O2", args.reuse, model=str(o2), task=args.task, max_eval_rows=512)
    static = stage(quantize, out / "onnx-int8-static", args.reuse, model=str(fp32), task=args.task, max_eval_rows=512,
                   approach="static", calibration="minmax", calibration_rows=256, per_channel=True)
    aware = None
    if not args.no_accuracy_aware:
        aware = stage(quantize, out / "onnx-int8-aware", args.reuse, model=str(fp32), task=args.task, max_eval_rows=512,
                      accuracy_aware=True, tolerance=args.tolerance)
        m = json.loads((aware / "shrinkbert.json").read_text())["metrics"]
        results["accuracy_aware"] = {"tolerance_points": args.tolerance, "kept_fp32": m["kept_fp32"],
                                     "met": m["accuracy_aware"]["met"], "val_accuracy_fp32": m["val_accuracy_fp32"],
                                     "val_accuracy_int8": m["val_accuracy_int8"],
                                     "most_sensitive": m["accuracy_aware"]["sensitivity"][:5]}

    edge = stage(bundle, out / "edge-bundle", args.reuse, model=str(int8), task=args.task, reference=str(teacher))
    results["edge_bundle"] = json.loads((edge / "shrinkbert.json").read_text())["metrics"]
    tokenizer = AutoTokenizer.from_pretrained(str(fp32))
    rows, task = load_rows(DataSpec(args.task), "test", args.max_test_rows or None)
    labels = align_labels(rows, task, AutoConfig.from_pretrained(str(fp32)).id2label)
    results["test_rows"] = len(rows)
    files = {"fp32": fp32 / "model.onnx", "fp32-O2": o2 / "model.onnx", "int8": int8 / "model.onnx",
             "O2+int8": int8_o2 / "model.onnx", "int8-static": static / "model.onnx"}
    if aware is not None:  # the accuracy-aware model is judged on the test rows like the others
        files["int8-aware"] = aware / "model.onnx"
    results["file_mb"] = {k: round(v.stat().st_size / 1e6, 2) for k, v in files.items()}
    results["size_ratio_fp32_over_int8"] = round(files["fp32"].stat().st_size / files["int8"].stat().st_size, 2)
    print("accuracy on the test split ...", flush=True)
    results["test_accuracy"] = {"pytorch": test_accuracy(teacher, rows, labels, tokenizer),
                                **{k: test_accuracy(v.parent, rows, labels, tokenizer) for k, v in files.items()}}
    acc = results["test_accuracy"]
    results["int8_accuracy_loss_points"] = round(100 * (acc["fp32"] - acc["int8"]), 2)
    results["O2+int8_accuracy_loss_points"] = round(100 * (acc["fp32"] - acc["O2+int8"]), 2)
    results["int8-static_accuracy_loss_points"] = round(100 * (acc["fp32"] - acc["int8-static"]), 2)
    if aware is not None:
        results["int8-aware_accuracy_loss_points"] = round(100 * (acc["fp32"] - acc["int8-aware"]), 2)

    if not args.no_prune:
        pruned = stage(prune, out / "pruned", args.reuse, model=str(teacher), task=args.task,
                       head_fraction=args.prune_fraction, neuron_fraction=args.prune_fraction, importance_rows=512)
        pruned_onnx = stage(export, out / "pruned-onnx-fp32", args.reuse, model=str(pruned), task=args.task,
                            optimization="none")
        files["pruned-fp32"] = pruned_onnx / "model.onnx"
        results["pruned_structure"] = json.loads((pruned / "shrinkbert.json").read_text())["metrics"]["after"]
        results["test_accuracy"]["pruned_no_recovery"] = test_accuracy(pruned, rows, labels, tokenizer)
        if not args.no_recovery:
            recovered = out / "pruned-recovered"
            if not (args.reuse and (recovered / "shrinkbert.json").is_file()):
                cmd = [sys.executable, "-m", "shrinkbert.students.distill", "--teacher", str(teacher), "--student", str(pruned),
                       "--task", args.task, "--epochs", str(args.recovery_epochs), "--output-dir", str(recovered),
                       "--hard-weight", "0.5"]
                if args.recovery_train_rows:
                    cmd += ["--max-train-rows", str(args.recovery_train_rows)]
                print("recovery:", " ".join(cmd), flush=True)
                t0 = time.perf_counter()
                subprocess.run(cmd, check=True, cwd=ROOT)
                results["recovery_seconds"] = round(time.perf_counter() - t0)
            results["test_accuracy"]["pruned_recovered"] = test_accuracy(recovered, rows, labels, tokenizer)
            results["pruned_recovered_loss_points"] = round(
                100 * (acc["pytorch"] - results["test_accuracy"]["pruned_recovered"]), 2)

    print("interleaved latency ...", flush=True)
    latency = interleaved_latency(files, tokenizer, args.threads, args.seq_len, (1, 8), args.rounds)
    results["latency_ms_p50"] = latency
    results["speedup_int8_vs_fp32"] = {b: round(v["fp32"] / v["int8"], 2) for b, v in latency.items()}
    results["speedup_O2int8_vs_fp32"] = {b: round(v["fp32"] / v["O2+int8"], 2) for b, v in latency.items()}
    results["speedup_static_int8_vs_fp32"] = {b: round(v["fp32"] / v["int8-static"], 2) for b, v in latency.items()}
    results["speedup_O2_vs_fp32"] = {b: round(v["fp32"] / v["fp32-O2"], 2) for b, v in latency.items()}
    if aware is not None:
        results["speedup_aware_int8_vs_fp32"] = {b: round(v["fp32"] / v["int8-aware"], 2) for b, v in latency.items()}
    if "pruned-fp32" in files:
        results["speedup_pruned_vs_fp32"] = {b: round(v["fp32"] / v["pruned-fp32"], 2) for b, v in latency.items()}
    (out / "results.json").write_text(json.dumps(results, indent=2))
    print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
