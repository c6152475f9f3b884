"""A linear query adapter for drop-in retrieval, fitted after training.

    python bench/query_adapter.py runs/bench/drop-in-adapter/broad/seed0 runs/bench/drop-in-adapter/broad/seed1 ...

The drop-in setting of bench/drop_in.py: all-MiniLM-L6-v2's index of SQuAD v1.1 dev's held-out
articles, a student's questions searched in it. The adapter is a square map W applied to the
student's vectors (then normalised), fitted by least squares towards the teacher's vectors of the
same texts, shrunk towards the identity (ridge on W - I, weight lambda): it would correct the student
where it errs the same way on query-like text and leave it alone elsewhere, and fold into its
projection (sentence-transformers' Dense) for export. The kit has no such option; this script
measures whether one would help. Its text is the training
half's questions of SQuAD v1.1 and v2.0 dev (core/qa_data.article_half; the measure's held-out
articles never enter it). lambda is chosen without labels, as a user with a query log and no
relevance judgements would: the mean cosine with the teacher on a fifth of those questions (by a
checksum of each), fitted on the rest; W is then fitted on all of them.

Prints, for each student and as mean ± sd over them: recall@1 and @10 as shares of the teacher's own,
before and after the adapter, the paired difference over questions (all students together), and STS-B
test and SNLI's NLI ranking with the adapter (so a gain in retrieval that costs similarity shows). The
host's CPU and ISA; saves --out.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import zlib
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from drop_in import DATA, SQUAD_V1, SQUAD_V2, sts_test  # noqa: E402  (one drop-in measure)


LAMBDAS = (1.0, 3.0, 10.0, 30.0, 100.0, 300.0)  # in units of one text's weight (the rows are unit vectors)
VALIDATION_EVERY = 5  # a text whose checksum is 0 mod this chooses lambda


def unit(vectors: np.ndarray) -> np.ndarray:
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def fit_adapter(student: np.ndarray, teacher: np.ndarray, lam: float) -> np.ndarray:
    """W minimising |S W - T|^2 + lam |W - I|^2 over unit rows S (student) and T (teacher). No bias: W then
    commutes with a vector's length, so it could sit before the normalisation, where a Dense layer is."""
    identity = np.eye(student.shape[1])
    return np.linalg.solve(student.T @ student + lam * identity, student.T @ teacher + lam * identity)


def choose_adapter(student: np.ndarray, teacher: np.ndarray, validation: np.ndarray) -> tuple[np.ndarray, dict]:
    """(W fitted on every row with the chosen lambda, the record of the choice): the lambda whose W, fitted
    off the validation rows, agrees best (mean cosine) with the teacher on them."""
    student, teacher = unit(student.astype(np.float64)), unit(teacher.astype(np.float64))
    agreement = {}
    for lam in LAMBDAS:
        mapped = unit(student[validation] @ fit_adapter(student[~validation], teacher[~validation], lam))
        agreement[lam] = float(np.mean(np.sum(mapped * teacher[validation], axis=1)))
    chosen = max(agreement, key=agreement.get)
    before = float(np.mean(np.sum(student[validation] * teacher[validation], axis=1)))
    return fit_adapter(student, teacher, chosen), {
        "texts": int(len(student)), "validation_texts": int(validation.sum()), "lambda": chosen,
        "validation_agreement": {"before": round(before, 5), "after": round(agreement[chosen], 5)},
        "agreement_by_lambda": {str(lam): round(value, 5) for lam, value in agreement.items()}}


def adapter_questions() -> list[str]:
    """The training half's distinct questions of SQuAD v1.1 and v2.0 dev, as `--corpus` reads a SQuAD file."""
    from shrinkbert.core.data.load import load_corpus

    return list(dict.fromkeys(load_corpus([str(SQUAD_V1), str(SQUAD_V2)])))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("students", nargs="+", help="embedding student artifacts (PyTorch, ONNX or bundles)")
    parser.add_argument("--questions", type=int, default=1000)
    parser.add_argument("--nli-pairs", type=int, default=1000)
    parser.add_argument("--out", default="runs/bench/query_adapter.json")
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    from shrinkbert.core.device import cpu_model, detect_isa
    from shrinkbert.core.kinds.sts import sts_spearman
    from shrinkbert.eval.embedding_eval import nli_auc, read_nli_pairs
    from shrinkbert.eval.encoders import open_encoder
    from shrinkbert.eval.retrieval import gold_ranks, read_squad_retrieval
    from shrinkbert.eval.stats import compare_runs, difference_text, mean_sd

    host = f"{cpu_model()}, {detect_isa()}, {os.cpu_count()} cores"
    search = read_squad_retrieval(SQUAD_V1, args.questions, seed=0, articles="held-out")
    pairs, nli = sts_test(), read_nli_pairs(DATA / "snli" / "test.csv", args.nli_pairs)
    texts = adapter_questions()
    validation = np.asarray([zlib.crc32(text.encode("utf-8")) % VALIDATION_EVERY == 0 for text in texts])
    teacher, _ = open_encoder("minilm", threads=0, max_length=128)
    documents = teacher(search.paragraphs)
    reference = gold_ranks(teacher(search.questions), documents, search.gold)
    targets = teacher(texts).astype(np.float64)
    print(f"host: {host}\nteacher: recall@1 {np.mean(reference <= 1):.3f}, recall@10 {np.mean(reference <= 10):.3f} "
          f"({len(search.questions)} held-out questions, {len(search.paragraphs)} paragraphs); adapter text: "
          f"{len(texts):,} training-half questions, {int(validation.sum()):,} of them choosing lambda", flush=True)
    hits = {"before": {1: [], 10: []}, "after": {1: [], 10: []}}
    rows = []
    for path in args.students:
        student, _ = open_encoder(path, threads=0, max_length=128)
        own = student(texts).astype(np.float64)
        adapter, choice = choose_adapter(own, targets, validation)

        def adapted(batch, student=student, adapter=adapter):
            return unit(student(batch).astype(np.float64) @ adapter).astype(np.float32)

        row = {"student": path, "adapter": choice}
        for when, encoder in (("before", student), ("after", adapted)):
            ranks = gold_ranks(encoder(search.questions), documents, search.gold)
            for k in (1, 10):
                hits[when][k].append((ranks <= k).tolist())
                row[f"{when}_recall_at_{k}"] = float(np.mean(ranks <= k)) / float(np.mean(reference <= k))
            row[f"{when}_sts"] = sts_spearman(encoder, pairs)
            row[f"{when}_nli"] = nli_auc(encoder, *nli)
        rows.append(row)
        print(f"{path}: lambda {choice['lambda']:g} (validation agreement {choice['validation_agreement']['before']:.4f} -> "
              f"{choice['validation_agreement']['after']:.4f}); "
              + "; ".join(f"{when}: recall@1 {row[f'{when}_recall_at_1']:.1%}, @10 {row[f'{when}_recall_at_10']:.1%} "
                          f"of the teacher's, STS-B {row[f'{when}_sts']:.2f}, NLI AUC {row[f'{when}_nli']:.2f}"
                          for when in ("before", "after")), flush=True)
    summary = {}
    for k in (1, 10):
        difference = compare_runs(hits["after"][k], hits["before"][k]).to_dict()
        summary[f"recall_at_{k}"] = {"before": mean_sd([r[f"before_recall_at_{k}"] for r in rows]),
                                     "after": mean_sd([r[f"after_recall_at_{k}"] for r in rows]),
                                     "after_minus_before": difference}
        before, after = summary[f"recall_at_{k}"]["before"], summary[f"recall_at_{k}"]["after"]
        print(f"recall@{k} of the teacher's over {len(rows)} students: {before[0]:.1%} ± {before[1]:.1%} -> "
              f"{after[0]:.1%} ± {after[1]:.1%}; after - before {difference_text(difference)} (paired, points)")
    for name in ("sts", "nli"):
        summary[name] = {when: mean_sd([r[f"{when}_{name}"] for r in rows]) for when in ("before", "after")}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"host": host, "rows": rows, "summary": summary}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
