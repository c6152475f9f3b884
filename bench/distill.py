"""Distillation bench: MiniLM teacher on movie-snippets -> 4-layer and 2-layer students.

    python bench/distill.py                                # full data, 3 epochs
    python bench/distill.py --epochs 1 --max-train-rows 2000 --max-eval-rows 500   # in a budget

In one run it prints, for each student: test accuracy as a fraction of the teacher's (on the
same test rows), parameters, and batch-1 latency ratio to the teacher (PyTorch fp32, seq
`--seq-len`, threads stated, teacher and students timed interleaved); an ablation (logits only
vs logits + hidden + attention, on the 4-layer student); and the distillation step time with
cached teacher outputs vs training the student alone (same batches, interleaved; goal <= 1.1),
with the live-teacher step for reference. Results also go to runs/bench/distill.json.

The teacher is runs/bench/teacher (written by the teachers bench); with --make-teacher and no
teacher there, one is fine-tuned first through the teachers stage's CLI (a subprocess: rooms
talk through artifacts).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--teacher", default=str(ROOT / "runs/bench/teacher"))
    p.add_argument("--make-teacher", action="store_true", help="fine-tune a MiniLM teacher if --teacher is absent")
    p.add_argument("--teacher-epochs", type=float, default=1)
    p.add_argument("--task", default="movie-snippets")
    p.add_argument("--out", default=str(ROOT / "runs/bench/distill"))
    p.add_argument("--epochs", type=float, default=3)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--learning-rate", type=float, default=1e-4)
    p.add_argument("--temperature", type=float, default=2.0)
    p.add_argument("--max-train-rows", type=int, default=0)
    p.add_argument("--max-eval-rows", type=int, default=0)
    p.add_argument("--max-length", type=int, default=64, help="as the teachers bench: 99%% of snippets fit")
    p.add_argument("--students", default="4,2", help="student layer counts (teacher width)")
    p.add_argument("--hidden", type=int, default=0, help="student hidden size (0: the teacher's)")
    p.add_argument("--no-ablation", action="store_true")
    p.add_argument("--ablation-epochs", type=float, default=0, help="epochs for the ablation runs (0: --epochs)")
    p.add_argument("--seq-len", type=int, default=128, help="sequence length of the latency measurement")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--latency-rounds", type=int, default=5)
    p.add_argument("--step-timing-steps", type=int, default=20)
    return p.parse_args(argv)


def ensure_teacher(args) -> Path:
    from shrinkbert.core.artifacts import is_artifact

    teacher = Path(args.teacher)
    if is_artifact(teacher):
        return teacher
    if not args.make_teacher:
        raise SystemExit(f"no teacher at {teacher}: run the teachers bench, or pass --make-teacher")
    cmd = [sys.executable, "-m", "shrinkbert.teachers.finetune", "--model", "minilm", "--task", args.task, "--max-length", str(args.max_length),
           "--epochs", str(args.teacher_epochs), "--output-dir", str(teacher)]
    print("making the teacher:", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, cwd=ROOT)
    return teacher


def distil(args, teacher: Path, name: str, **overrides) -> dict:
    from shrinkbert.core.artifacts import read_manifest
    from shrinkbert.core.config import build_config
    from shrinkbert.students.distill import Config, run

    values = {"teacher": str(teacher), "task": args.task, "output_dir": str(Path(args.out) / name),
              "epochs": args.epochs, "batch_size": args.batch_size, "learning_rate": args.learning_rate,
              "temperature": args.temperature, "max_train_rows": args.max_train_rows,
              "max_eval_rows": args.max_eval_rows, "max_length": args.max_length, "checkpoint_every": 0,
              "log_every": 50}
    values.update(overrides)
    print(f"\n=== {name}: {overrides}", flush=True)
    start = time.perf_counter()
    out = run(build_config(Config, values))
    manifest = read_manifest(out)
    m = manifest["metrics"]
    return {"name": name, "dir": str(out), "layers": manifest["student"]["shape"]["layers"],
            "hidden": manifest["student"]["shape"]["hidden"], "params": m["num_parameters"],
            "param_ratio": m["parameter_ratio"], "test_accuracy": m["test_accuracy"],
            "teacher_test_accuracy": m["teacher_test_accuracy"], "retention": m["retention"],
            "train_time_s": m["train_time_s"], "wall_s": time.perf_counter() - start,
            "losses": {k: v for k, v in manifest["student"]["loss_weights"].items() if v}}


def latency(models: dict, seq_len: int, rounds: int) -> dict[str, float]:
    """Batch-1 p50 per model, interleaved over rounds; median of the round p50s (ms)."""
    import torch

    from shrinkbert.core.timing import time_callable

    vocab = min(m.config.vocab_size for m in models.values())
    ids = torch.randint(min(1000, vocab // 2), min(2000, vocab), (1, seq_len))
    mask = torch.ones_like(ids)
    samples = {name: [] for name in models}
    with torch.inference_mode():
        for _ in range(rounds):
            for name, model in models.items():
                samples[name].append(time_callable(lambda: model(input_ids=ids, attention_mask=mask),
                                                   warmup=2, runs=10)["p50"])
    return {name: statistics.median(values) for name, values in samples.items()}


def step_times(args, teacher: Path, student_dir: Path) -> dict:
    """Median optimizer-step time: KD from cached logits vs plain CE (student alone) vs KD, live teacher."""
    import torch
    from transformers import AutoModelForSequenceClassification

    from shrinkbert.core.data.load import load_task, tokenize_task
    from shrinkbert.core.models import load_model, load_tokenizer
    from shrinkbert.students.cache import load_or_compute
    from shrinkbert.core.cache import default_cache_dir
    from shrinkbert.students.distill_data import make_collate, with_row_index
    from shrinkbert.students.distill_loss import make_loss_fn
    from shrinkbert.students.losses import DistillLoss, LossWeights

    tokenizer = load_tokenizer(teacher)
    task, splits = load_task(args.task)
    train = tokenize_task(splits, tokenizer, task, max_length=args.max_length)["train"]
    if args.max_train_rows:
        train = train.select(range(min(args.max_train_rows, len(train))))
    train = with_row_index(train)
    collate = make_collate(tokenizer)
    teacher_model = load_model(AutoModelForSequenceClassification, teacher).eval()
    cache, _, _ = load_or_compute(teacher, lambda: teacher_model, train, collate, args.max_length,
                                  cache_dir=default_cache_dir() / "teacher-outputs", log=lambda _: None)
    distill_loss = DistillLoss(LossWeights(logits=1.0), {}, 1, 1, temperature=args.temperature)
    variants = {
        "student alone (CE)": lambda m, b: (m(**{k: b[k] for k in ("input_ids", "attention_mask", "token_type_ids")},
                                               labels=b["labels"]).loss, {}),
        "KD, cached teacher logits": make_loss_fn(distill_loss, cache=cache),
        "KD, live teacher": make_loss_fn(distill_loss, teacher=teacher_model),
    }
    student = load_model(AutoModelForSequenceClassification, student_dir).train()
    optimizer = torch.optim.AdamW(student.parameters(), lr=1e-5)
    gen = torch.Generator().manual_seed(0)
    order = torch.randperm(len(train), generator=gen).tolist()
    bs = args.batch_size
    times = {name: [] for name in variants}
    for step in range(args.step_timing_steps + 2):
        rows = order[(step * bs) % len(order):][:bs]
        batch = collate([train[i] for i in rows])
        for name, loss_fn in variants.items():  # interleaved: the same batch for each variant
            start = time.perf_counter()
            loss, _ = loss_fn(student, batch)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            if step >= 2:  # warm-up steps untimed
                times[name].append((time.perf_counter() - start) * 1000)
    medians = {name: statistics.median(v) for name, v in times.items()}
    alone = medians["student alone (CE)"]
    return {"median_ms": medians, "cached_over_alone": medians["KD, cached teacher logits"] / alone,
            "live_over_alone": medians["KD, live teacher"] / alone, "batch_size": bs, "steps": args.step_timing_steps}


def save(results: dict, args) -> Path:
    """Write what is measured so far (a budget run cut short keeps its first phases)."""
    out = Path(args.out).parent / "distill.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=1, default=str))
    return out


def main(argv=None):
    args = parse_args(argv)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from shrinkbert.core.device import describe_machine, set_threads

    threads = set_threads(args.threads)
    teacher = ensure_teacher(args)
    print(f"machine: {describe_machine()}; torch threads {threads}", flush=True)
    started = time.perf_counter()
    results = {"args": vars(args), "students": [], "ablation": []}
    hidden = {"hidden": args.hidden} if args.hidden else {}
    for layers in [int(x) for x in args.students.split(",") if x]:
        results["students"].append(distil(args, teacher, f"L{layers}-logits", layers=layers, **hidden))
    import torch
    from transformers import AutoModelForSequenceClassification

    from shrinkbert.core.models import load_model

    models = {"teacher": load_model(AutoModelForSequenceClassification, teacher).eval()}
    for r in results["students"]:
        models[r["name"]] = load_model(AutoModelForSequenceClassification, r["dir"]).eval()
    lat = latency(models, args.seq_len, args.latency_rounds)
    results["latency_ms"] = {"seq_len": args.seq_len, "threads": threads, "batch": 1, **lat}
    for r in results["students"]:
        r["latency_ms"], r["latency_ratio"] = lat[r["name"]], lat[r["name"]] / lat["teacher"]
        r["speedup"] = lat["teacher"] / lat[r["name"]]
    if results["students"]:
        results["step_time"] = step_times(args, teacher, Path(results["students"][0]["dir"]))
    del models, torch
    print(f"so far: {json.dumps({r['name']: {k: r[k] for k in ('test_accuracy', 'retention', 'latency_ratio')} for r in results['students']})}; "
          f"step time {results.get('step_time', {}).get('median_ms')}", flush=True)
    save(results, args)

    if not args.no_ablation:
        four = next((r for r in results["students"] if r["layers"] == 4), None)
        ablation_epochs = args.ablation_epochs or args.epochs
        if four is None or ablation_epochs != args.epochs:
            four = distil(args, teacher, "L4-logits-ablation", layers=4, epochs=ablation_epochs, **hidden)
        full = distil(args, teacher, "L4-logits-hidden-attention", layers=4, epochs=ablation_epochs,
                      hidden_weight=1.0, attention_weight=1.0, **hidden)
        results["ablation"] = [four, full]

    save(results, args)

    teacher_acc = results["students"][0]["teacher_test_accuracy"] if results["students"] else float("nan")
    print(f"\n## Distillation bench ({describe_machine()}, {threads} threads; total {time.perf_counter() - started:.0f} s)")
    print(f"teacher: {teacher}  test accuracy {teacher_acc:.4f}; batch-1 latency {lat['teacher']:.2f} ms at seq {args.seq_len}")
    print("\n| student | params | params vs teacher | test acc | retention (goal >= 97%) | latency ms | latency vs teacher | train s |")
    print("|---|---|---|---|---|---|---|---|")
    for r in results["students"]:
        print(f"| {r['layers']}L/H{r['hidden']} | {r['params']:,} | {r['param_ratio']:.1%} | {r['test_accuracy']:.4f} | "
              f"{r['retention']:.1%} | {r['latency_ms']:.2f} | {r['latency_ratio']:.2f} ({r['speedup']:.1f}x faster) | "
              f"{r['train_time_s']:.0f} |")
    if results["ablation"]:
        print("\n| ablation (4 layers) | test acc | retention | train s |")
        print("|---|---|---|---|")
        for r in results["ablation"]:
            print(f"| {' + '.join(r['losses'])} | {r['test_accuracy']:.4f} | {r['retention']:.1%} | {r['train_time_s']:.0f} |")
    if "step_time" in results:
        st = results["step_time"]
        print(f"\nstep time, batch {st['batch_size']}, median of {st['steps']} interleaved steps:")
        for name, ms in st["median_ms"].items():
            print(f"  {name:28s} {ms:8.1f} ms")
        print(f"  cached KD / student alone = {st['cached_over_alone']:.3f} (goal <= 1.1); "
              f"live KD / student alone = {st['live_over_alone']:.3f}")
    print(f"\nresults: {save(results, args)}")


if __name__ == "__main__":
    main()
