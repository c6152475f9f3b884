"""Distilled transformer students and the static student against their teacher, in one run: STS-B test
Spearman of cosine (x100) and its share of the teacher's, the drop-in recall@10 against the teacher's
index, agreement with the teacher, frozen-embedding classification (movie-snippets, bbc-news), and
speed: p50 ms at batch 1 on a 128-token text (interleaved) and sentences/s at batch 32.

    python bench/embedding_student.py                                   # a 3L student, H384, FFN 768
    python bench/embedding_student.py --students 3x384x768 --sentences 6000 --epochs 2

Each transformer student (`LxHxI`: layers, hidden, FFN) is distilled from the teacher on the same
training sentences (IMDB review sentences, Brown sentences, WordNet glosses, a third each, drawn
with a fixed seed; students/embedding_distill.py: MSE + cosine to the teacher's vectors, the epoch
kept by STS-B *validation*), exported as one ONNX graph (pooling, projection, normalisation inside)
and dynamically quantized to int8 (compress/embedding_onnx.py). The static student (students/static.py)
is built from the same teacher and tuned on the same sentences. The teacher runs in PyTorch fp32,
the students as int8 ONNX Runtime graphs and numpy; all with 2 threads, timed text -> normalised
vector (tokenizing included).

Recall@10: --held-out corpus sentences (disjoint from the training ones) embedded by the teacher are
the index; --queries further held-out sentences are embedded by the teacher (truth) and by each
student (the drop-in test). Artifacts go to runs/embedding/, figures to runs/bench/embedding_student.json.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
for name, value in (("HF_HUB_OFFLINE", "1"), ("HF_DATASETS_OFFLINE", "1"), ("TOKENIZERS_PARALLELISM", "false")):
    os.environ.setdefault(name, value)

import numpy as np  # noqa: E402
import torch  # noqa: E402
from embedding_static import MTEB_TEACHER, STSB, interleaved, long_text  # noqa: E402  (bench/ sibling)

from shrinkbert import export, quantize  # noqa: E402
from shrinkbert.compress.embedding_onnx import OnnxEmbedder  # noqa: E402
from shrinkbert.core.builtin import resolve_model  # noqa: E402
from shrinkbert.core.data.load import load_corpus  # noqa: E402
from shrinkbert.core.scored_pairs import read_scored_pairs  # noqa: E402
from shrinkbert.core.device import describe_machine, set_threads  # noqa: E402
from shrinkbert.core.kinds.embedder import Embedder  # noqa: E402
from shrinkbert.core.kinds.embedding import agreement  # noqa: E402
from shrinkbert.eval.embedding_eval import drop_in_recall, task_classification, throughput  # noqa: E402
from shrinkbert.core.kinds.sts import sts_spearman  # noqa: E402
from shrinkbert.students.embedding_distill import EmbeddingStudentConfig, distill_embedding, teacher_vectors  # noqa: E402
from shrinkbert.students.static import StaticEmbedder  # noqa: E402

CORPORA = ("imdb", "brown", "wordnet")
CLASSIFICATION_TASKS = ("movie-snippets", "bbc-news")


def draw_sentences(count: int, held_out: int, seed: int) -> tuple[list[str], list[str]]:
    """`count` training and `held_out` other sentences, a third from each corpus, distinct, seeded."""
    rng = random.Random(seed)
    train, rest, seen = [], [], set()
    for number, corpus in enumerate(CORPORA):
        want_train = count // len(CORPORA) + (number < count % len(CORPORA))
        want_rest = held_out // len(CORPORA) + (number < held_out % len(CORPORA))
        lines = [line for line in dict.fromkeys(load_corpus([corpus])) if 3 <= len(line.split()) <= 60]
        picked = [line for line in rng.sample(lines, min(len(lines), 2 * (want_train + want_rest)))
                  if line not in seen]
        seen.update(picked)
        train += picked[:want_train]
        rest += picked[want_train:want_train + want_rest]
    return train, rest


def parse_student(text: str) -> EmbeddingStudentConfig:
    layers, hidden, intermediate = (int(part) for part in text.lower().split("x"))
    return EmbeddingStudentConfig(layers=layers, hidden=hidden, intermediate=intermediate)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--teacher", default="minilm")
    parser.add_argument("--students", default="3x384x768", help="comma-separated LxHxI shapes")
    parser.add_argument("--sentences", type=int, default=30000, help="training sentences")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--lr", type=float, default=4e-4)
    parser.add_argument("--held-out", type=int, default=10000, help="index sentences for recall@10")
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--static-dim", type=int, default=256)
    parser.add_argument("--static-epochs", type=int, default=6)
    parser.add_argument("--cls-train", type=int, default=2000)
    parser.add_argument("--cls-test", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--burst", type=int, default=5)
    parser.add_argument("--out", default=str(ROOT / "runs" / "bench" / "embedding_student.json"))
    args = parser.parse_args(argv)
    set_threads(args.threads)
    machine = describe_machine()
    print(f"machine: {machine}; threads {args.threads}")
    bench_started = time.perf_counter()
    work = ROOT / "runs" / "embedding"
    test, validation = read_scored_pairs(STSB / "test.csv"), read_scored_pairs(STSB / "validation.csv")

    train, rest = draw_sentences(args.sentences, args.held_out + args.queries, args.seed)
    index_texts, query_texts = rest[:args.held_out], rest[args.held_out:]
    teacher = Embedder.load(args.teacher, max_length=args.seq_len)
    started = time.perf_counter()
    train_vectors = teacher_vectors(teacher, resolve_model(args.teacher), train)
    teacher_index, teacher_queries = teacher.encode(index_texts), teacher.encode(query_texts)
    print(f"{len(train)} training, {len(index_texts)} index, {len(query_texts)} query sentences; teacher vectors "
          f"{time.perf_counter() - started:.0f} s")

    models = {"teacher": {"encode": teacher.encode, "runtime": "PyTorch fp32"}}
    for text in args.students.split(","):
        config = parse_student(text)
        config.epochs, config.lr, config.seed = args.epochs, args.lr, args.seed
        name = f"student-{config.layers}L-H{config.hidden}-I{config.intermediate}"
        started = time.perf_counter()
        print(f"{name}: distilling")
        student_dir = distill_embedding(args.teacher, train, work / name, config, validation=validation)
        distill_s = time.perf_counter() - started
        gap = export(model=str(student_dir), output_dir=str(work / f"{name}-onnx"), tolerance=1e-4,
                     optimization="none").metrics["parity"]["max_abs_logit_diff"]
        quantize(model=str(work / f"{name}-onnx"), output_dir=str(work / f"{name}-int8"))
        fp32 = OnnxEmbedder(work / f"{name}-onnx", threads=args.threads, max_length=args.seq_len)
        int8 = OnnxEmbedder(work / f"{name}-int8", threads=args.threads, max_length=args.seq_len)
        manifest = json.loads((student_dir / "shrinkbert.json").read_text())
        models[f"{name} int8"] = {"encode": int8.encode, "runtime": "ONNX Runtime int8", "fp32_encode": fp32.encode,
                                  "distill_s": distill_s, "export_gap": gap,
                                  "epoch_kept": manifest["training"].get("epoch_kept"),
                                  "validation_spearman": manifest["metrics"].get("validation_spearman")}
        print(f"  distilled in {distill_s:.0f} s, epoch {manifest['training'].get('epoch_kept')} kept; "
              f"export parity {gap:.1e}")

    started = time.perf_counter()
    static = StaticEmbedder.distill(args.teacher, dim=args.static_dim)
    best = {"score": sts_spearman(static.encode, validation), "epoch": 0, "vectors": static.vectors}

    def keep_best(epoch, tuned):
        score = sts_spearman(tuned.encode, validation)
        if score > best["score"]:
            best.update(score=score, epoch=epoch, vectors=tuned.vectors)

    static.tune_to_teacher(train, train_vectors, epochs=args.static_epochs, seed=args.seed, on_epoch=keep_best)
    static.vectors = best["vectors"]
    static.save(work / f"static-d{args.static_dim}")
    models["static"] = {"encode": static.encode, "runtime": "numpy", "distill_s": time.perf_counter() - started,
                        "epoch_kept": best["epoch"]}
    print(f"static student d{args.static_dim}: built and tuned in {models['static']['distill_s']:.0f} s, "
          f"epoch {best['epoch']} kept")

    for name, model in models.items():
        started = time.perf_counter()
        model["spearman"] = sts_spearman(model["encode"], test)
        if "fp32_encode" in model:
            model["spearman_onnx_fp32"] = sts_spearman(model["fp32_encode"], test)
        if name != "teacher" and name != "static":
            queries = model["encode"](query_texts)
            model["recall_at_10"] = drop_in_recall(teacher_index, teacher_queries, queries, 10)
            model["agreement"] = agreement(queries, teacher_queries)
        for task in CLASSIFICATION_TASKS:
            model[f"{task}_accuracy"] = task_classification(model["encode"], task, args.cls_train, args.cls_test)
        model["throughput_b32"] = throughput(model["encode"], query_texts, 32)
        print(f"{name}: STS-B test {model['spearman']:.2f}" +
              (f" (ONNX fp32 {model['spearman_onnx_fp32']:.2f})" if "spearman_onnx_fp32" in model else "") +
              (f", recall@10 {model['recall_at_10']:.3f}, agreement {model['agreement']:.3f}" if "recall_at_10" in model else "") +
              "".join(f", {task} {model[f'{task}_accuracy']:.1f}" for task in CLASSIFICATION_TASKS) +
              f", {model['throughput_b32']:.0f} sentences/s at b32 ({time.perf_counter() - started:.0f} s)")

    text = long_text(test.first + test.second, teacher.tokenizer, args.seq_len)

    def teacher_call():
        with torch.inference_mode():
            inputs = teacher.tokenizer([text], padding="max_length", truncation=True, max_length=args.seq_len,
                                       return_tensors="pt")
            return teacher.forward(inputs).numpy()

    calls = {"teacher": teacher_call, "static": lambda: static.encode([text])}
    for name, model in models.items():
        if "fp32_encode" in model:
            runner = model["encode"].__self__
            calls[name] = (lambda runner=runner: runner.encode([text], padding="max_length"))
    stats = interleaved(calls, args.rounds, args.burst)
    base = stats["teacher"]["p50"]
    teacher_score = models["teacher"]["spearman"]
    rows = []
    for name, model in models.items():
        model["latency_ms"] = stats[name]
        model["speedup_p50"] = base / stats[name]["p50"]
        model["retention"] = model["spearman"] / teacher_score
        rows.append(f"| {name} ({model['runtime']}) | {model['spearman']:.2f} | {model['retention']:.1%} | "
                    f"{model.get('recall_at_10', float('nan')):.3f} | {model.get('agreement', float('nan')):.3f} | "
                    f"{model['movie-snippets_accuracy']:.1f} | {model['bbc-news_accuracy']:.1f} | "
                    f"{stats[name]['p50']:.2f} | {model['speedup_p50']:.1f}x | {model['throughput_b32']:.0f} |")
    print(f"STS-B test: teacher {teacher_score:.2f} (MTEB {MTEB_TEACHER})")
    print("| model | STS-B test | of teacher | recall@10 | agreement | movie-snippets | bbc-news | p50 ms b1/s128 "
          "| speed-up | sentences/s b32 |")
    print("\n".join(rows))
    total_s = time.perf_counter() - bench_started
    print(f"bench wall time {total_s / 60:.1f} min")
    result = {"machine": machine, "threads": args.threads, "teacher": args.teacher, "sentences": len(train),
              "held_out": len(index_texts), "queries": len(query_texts), "epochs": args.epochs, "seed": args.seed,
              "seq_len": args.seq_len, "wall_s": total_s, "mteb_teacher": MTEB_TEACHER,
              "models": {name: {key: value for key, value in model.items() if not callable(value)}
                         for name, model in models.items()}}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2, default=str))
    print(f"-> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
