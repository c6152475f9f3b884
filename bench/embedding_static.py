"""The static student against its teacher, in one run: STS-B test Spearman of cosine (x100) of the
teacher, the untuned static student and the student tuned on corpus sentences, the retention, and
speed at batch 1 on a 128-token text, teacher and student interleaved.

    python bench/embedding_static.py                          # teacher minilm, dim 256, 12,000 sentences
    python bench/embedding_static.py --dim 128 --sentences 4000 --epochs 3

The tuning runs up to --epochs epochs and keeps the table of the epoch that scores best on STS-B
*validation*; the test split is scored once, on the kept table.

The tuning sentences are IMDB review sentences and WordNet glosses, half each, drawn with a fixed
seed (the built-in corpora `imdb` and `wordnet`); the teacher's vectors of them are cached under
runs/embedding/ by the sentences' content and the teacher's name, so a re-run skips the teacher.

The teacher runs in PyTorch fp32 (its input padded to exactly 128 tokens); the student in numpy.
Both are timed text -> normalised vector (tokenizing included: it is most of the static student's
work), in alternating bursts so drift on the shared machine hits both alike; the speed-up is the
ratio of the median latencies. The student is written to runs/embedding/static-<teacher>-d<dim>
(a sentence-transformers folder); the figures go to runs/bench/embedding_static.json.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import random
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
for name, value in (("HF_HUB_OFFLINE", "1"), ("HF_DATASETS_OFFLINE", "1"), ("TOKENIZERS_PARALLELISM", "false")):
    os.environ.setdefault(name, value)

import numpy as np  # noqa: E402
import torch  # noqa: E402

from shrinkbert.core.artifacts import atomic_artifact, write_manifest  # noqa: E402
from shrinkbert.core.data.load import load_corpus  # noqa: E402
from shrinkbert.core.scored_pairs import read_scored_pairs  # noqa: E402
from shrinkbert.core.device import describe_machine, set_threads  # noqa: E402
from shrinkbert.core.kinds.embedder import Embedder  # noqa: E402
from shrinkbert.core.timing import percentiles  # noqa: E402
from shrinkbert.core.kinds.sts import sts_spearman  # noqa: E402
from shrinkbert.students.embedding_distill import teacher_vectors  # noqa: E402
from shrinkbert.students.static import StaticEmbedder  # noqa: E402

STSB = ROOT.parent / "shared" / "data" / "stsb"
MTEB_TEACHER = 82.03  # MTEB's STS-B test score of all-MiniLM-L6-v2


def long_text(sentences: list[str], tokenizer, tokens: int) -> str:
    """STS-B sentences joined until the text fills `tokens` wordpieces ([CLS]/[SEP] included)."""
    text = ""
    for sentence in sentences:
        text = f"{text} {sentence}".strip()
        if len(tokenizer(text)["input_ids"]) >= tokens:
            return text
    return text


def tuning_sentences(count: int, seed: int) -> list[str]:
    """count sentences, half IMDB review sentences, half WordNet glosses, drawn with `seed`."""
    rng = random.Random(seed)
    imdb, wordnet = load_corpus(["imdb"]), load_corpus(["wordnet"])
    return rng.sample(imdb, count // 2) + rng.sample(wordnet, count - count // 2)


def interleaved(calls: dict, rounds: int, burst: int) -> dict:
    """Median-based stats per call, timed round-robin in bursts, the first callee rotating."""
    names, samples = list(calls), {name: [] for name in calls}
    for name in names:  # warm-up
        for _ in range(3):
            calls[name]()
    for round_number in range(rounds):
        for name in names[round_number % len(names):] + names[:round_number % len(names)]:
            for _ in range(burst):
                start = time.perf_counter()
                calls[name]()
                samples[name].append((time.perf_counter() - start) * 1000)
    return {name: percentiles(values) for name, values in samples.items()}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--teacher", default="minilm")
    parser.add_argument("--dim", type=int, default=256)
    parser.add_argument("--stsb", default=str(STSB / "test.csv"))
    parser.add_argument("--stsb-validation", default=str(STSB / "validation.csv"))
    parser.add_argument("--sentences", type=int, default=12000, help="tuning sentences (0: no tuning)")
    parser.add_argument("--epochs", type=int, default=8, help="most tuning epochs (the best on validation is kept)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--burst", type=int, default=5)
    parser.add_argument("--out", default=str(ROOT / "runs" / "bench" / "embedding_static.json"))
    args = parser.parse_args(argv)
    set_threads(args.threads)
    machine = describe_machine()
    print(f"machine: {machine}; torch threads {args.threads}")

    pairs = read_scored_pairs(args.stsb)
    teacher = Embedder.load(args.teacher, max_length=args.seq_len)
    started = time.perf_counter()
    teacher_sts = sts_spearman(teacher.encode, pairs)
    print(f"STS-B test ({len(pairs.scores)} pairs), Spearman of cosine x100: teacher {teacher_sts:.2f} "
          f"(MTEB {MTEB_TEACHER}; {time.perf_counter() - started:.1f} s)")

    started = time.perf_counter()
    untuned = StaticEmbedder.distill(args.teacher, dim=args.dim)
    untuned_sts = sts_spearman(untuned.encode, pairs)
    print(f"  static, untuned: {untuned_sts:.2f} ({untuned_sts / teacher_sts:.1%}; "
          f"built in {time.perf_counter() - started:.1f} s)")
    student, student_sts, untuned_vectors, best = untuned, untuned_sts, untuned.vectors, {"epoch": 0}
    if args.sentences:
        sentences = tuning_sentences(args.sentences, args.seed)
        started = time.perf_counter()
        targets = teacher_vectors(teacher, args.teacher, sentences)  # cached by content, before normalisation
        if teacher.spec.normalize:  # the teacher's own output: its vectors as it declares them
            targets = targets / np.linalg.norm(targets, axis=1, keepdims=True)
        teacher_vectors_s = time.perf_counter() - started
        started = time.perf_counter()
        validation, best = read_scored_pairs(args.stsb_validation), {"epoch": 0, "spearman": -100.0}

        def keep_best(epoch, tuned):
            score = sts_spearman(tuned.encode, validation)
            print(f"    epoch {epoch}: STS-B validation {score:.2f}")
            if score > best["spearman"]:
                best.update(epoch=epoch, spearman=score, vectors=tuned.vectors)

        untuned_validation = sts_spearman(student.encode, validation)
        print(f"    epoch 0: STS-B validation {untuned_validation:.2f}")
        student.tune_to_teacher(sentences, targets, epochs=args.epochs, seed=args.seed, on_epoch=keep_best)
        if best["spearman"] < untuned_validation:
            best.update(epoch=0, spearman=untuned_validation, vectors=untuned_vectors)
        student.vectors = best["vectors"]
        student_sts = sts_spearman(student.encode, pairs)
        print(f"  static, tuned on {len(sentences)} sentences, epoch {best['epoch']} kept: {student_sts:.2f} "
              f"({student_sts / teacher_sts:.1%}; teacher vectors {teacher_vectors_s:.0f} s, "
              f"tuning {time.perf_counter() - started:.0f} s)")
    retention = student_sts / teacher_sts
    artifact = ROOT / "runs" / "embedding" / f"static-{Path(args.teacher).name}-d{args.dim}"
    with atomic_artifact(artifact) as tmp:
        student.save(tmp)
        write_manifest(tmp, stage="distill-static", seed=args.seed, num_parameters=int(student.vectors.size),
                       config={"teacher": args.teacher, "dim": args.dim, "sentences": args.sentences,
                               "epochs": best["epoch"]}, metrics={"stsb_test_spearman": student_sts})
    print(f"  -> {artifact}")

    text = long_text(pairs.first + pairs.second, teacher.tokenizer, args.seq_len)
    batch = teacher.tokenizer([text], padding="max_length", truncation=True, max_length=args.seq_len,
                              return_tensors="pt")
    assert batch["input_ids"].shape[1] == args.seq_len and int(batch["attention_mask"].sum()) == args.seq_len

    def teacher_call():
        with torch.inference_mode():
            inputs = teacher.tokenizer([text], padding="max_length", truncation=True, max_length=args.seq_len,
                                       return_tensors="pt")
            return teacher.forward(inputs).numpy()

    def student_call():
        return student.encode([text])

    static_tokens = len(student.tokenizer.encode(text, add_special_tokens=False).ids)
    stats = interleaved({"teacher_torch_fp32": teacher_call, "static_numpy": student_call}, args.rounds, args.burst)
    speedup = stats["teacher_torch_fp32"]["p50"] / stats["static_numpy"]["p50"]
    print(f"batch 1, {args.seq_len} tokens (static: {static_tokens} wordpieces of the same text), p50 ms: "
          f"teacher {stats['teacher_torch_fp32']['p50']:.2f}  static {stats['static_numpy']['p50']:.4f}  "
          f"speed-up {speedup:.0f}x")
    result = {"machine": machine, "threads": args.threads, "teacher": args.teacher, "dim": args.dim,
              "sentences": args.sentences, "max_epochs": args.epochs, "epoch_kept": best["epoch"], "seed": args.seed,
              "stsb_pairs": len(pairs.scores), "teacher_spearman": teacher_sts, "mteb_teacher": MTEB_TEACHER,
              "static_untuned_spearman": untuned_sts, "static_spearman": student_sts, "retention": retention,
              "latency_ms": stats, "speedup_p50": speedup, "seq_len": args.seq_len, "artifact": str(artifact)}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2))
    print(f"-> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
