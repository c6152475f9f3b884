"""Training an embedding student for drop-in retrieval, each lever measured.

    python bench/drop_in.py                                  # four arms, 3 seeds (about an hour on 2 cores)
    python bench/drop_in.py --arms recipe,questions --seeds 1
    python bench/drop_in.py --arms broad,broad-4l,broad-sim --base broad   # depth and the similarity term
    python bench/drop_in.py --arms broad,broad-rank,broad-rank10 --base broad --out runs/bench/drop-in-rank
    python bench/drop_in.py --arms broad,broad-60k --base broad --out runs/bench/drop-in-data
    python bench/drop_in.py --arms broad-60k-4l --base broad-60k-4l --out runs/bench/drop-in-data   # depth and data

The drop-in setting: a deployment keeps the index all-MiniLM-L6-v2 built and swaps in a student for
the queries. The measure: SQuAD v1.1 dev's held-out articles (core/qa_data.article_half: the
half whose questions no arm trains on), every paragraph a document embedded by the teacher, 1,000
sampled questions (seed 0) embedded by each student; recall@1 and @10 per question, the teacher's
own as the reference; STS-B test Spearman, so a lever that wins retrieval by losing similarity
shows it; and SNLI test pairs ranked by cosine (eval/embedding_eval.nli_auc, 1,000 entailed and 1,000
contradicted), similarity on another style of text. Each arm distils the recipe's student shape (recipes/embeddings.yaml: 3 layers, FFN 768,
lr 4e-4, batch 32, 3 epochs, the epoch kept by STS-B validation) per seed:

  recipe      the recipe's corpus: IMDB sentences and WordNet glosses, pooled
  questions   lever 1, query-like text: IMDB, WordNet and the training half's questions of SQuAD v2.0
              dev (answerable and not), an equal share each (--corpus-mix equal)
  pull        lever 2, the asymmetric loss: as `questions`, each question's target pulled half-way
              (--query-pull 0.5) towards the teacher's vector of its gold paragraph
  queries     lever 3, a query-only student (the teacher kept for documents): only the training
              half's questions of SQuAD v1.1 and v2.0 dev, every one
  broad       text of several styles instead: IMDB, WordNet, State of the Union paragraphs and SNLI's
              validation sentences (its test file is the NLI measure), an equal share each (the recipe's
              text)
  broad-4l    the broad text, a 4-layer student (its layers the uniform map picks from the teacher's 6): depth
              for drop-in use, at the cost of some of the int8 bundle's speed-up
  broad-sim   the broad text, plus 300 x the in-batch similarity-matrix MSE (--similarity-weight: the
              relational-KD lever)
  broad-rank  the broad text, plus the drop-in term (--drop-in-weight 1: the KL between the teacher's and the
              student's softmax over cosines with 4,096 of the teacher's training vectors, a stand-in for
              the index it will search); broad-rank10 the same at weight 10
  broad-q     the broad text with SQuAD v2.0's training-half questions added, not swapped in: a fifth equal
              share on 18,750 lines, so each of the four styles keeps its 3,750
  broad-60k   the broad text, four times as much of it (60,000 lines, 15,000 of each style): data, not
              capacity, as what the 3-layer student lacks for drop-in use
  broad-60k-4l  broad-60k's text and broad-4l's four layers: data and depth together
  static      the recipe's static student (model2vec's table, dim 256, tuned 6 epochs on 30,000 lines,
              the epoch kept by STS-B validation) on the static recipe's text: IMDB and WordNet, pooled
  static-broad  the same static student tuned on the broad text instead
  (The static students have their own 256 dimensions: their recall is searched in an index they built
  themselves, not the teacher's.)

Prints each arm's recall as a share of the teacher's (mean ± sd over seeds), its STS-B share, and
its difference to `recipe` with a paired bootstrap 95% interval over the questions; the host's CPU
and ISA; saves --out/drop_in.json. The students are PyTorch fp32 (the shape's int8 bundle speed-up is
the recipe report's).
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
SQUAD_V1, SQUAD_V2 = DATA / "squad" / "squad-dev-v1.1.json", DATA / "squad" / "squad-dev-v2.0.json"
STUDENT = dict(objective="vectors", teacher="minilm", task=str(DATA / "stsb"), layers=3, intermediate=768, epochs=3,
               learning_rate=4e-4, batch_size=32)
ARMS = {
    "recipe": dict(corpus="imdb,wordnet"),
    "questions": dict(corpus=f"imdb,wordnet,{SQUAD_V2}", corpus_mix="equal"),
    "pull": dict(corpus=f"imdb,wordnet,{SQUAD_V2}", corpus_mix="equal", query_pull=0.5),
    "queries": dict(corpus=f"{SQUAD_V1},{SQUAD_V2}", max_train_rows=0),
    "broad": dict(corpus=f"imdb,wordnet,sotu,{DATA / 'snli' / 'validation.csv'}", corpus_mix="equal"),
}
ARMS.update({"broad-4l": dict(ARMS["broad"], layers=4), "broad-sim": dict(ARMS["broad"], similarity_weight=300.0),
             "broad-rank": dict(ARMS["broad"], drop_in_weight=1.0), "broad-rank10": dict(ARMS["broad"], drop_in_weight=10.0),
             # the broad text as it is (3,750 lines of each style at 15,000) and the questions added as a fifth share
             "broad-q": dict(ARMS["broad"], corpus=f"{ARMS['broad']['corpus']},{SQUAD_V2}", max_train_rows=18750),
             # more of the same text: 15,000 lines of each style, not 3,750 (the recipe's 30,000: 7,500)
             "broad-60k": dict(ARMS["broad"], max_train_rows=60000)})
# the two that each moved recall@10 up, together: a fourth layer on four times the text
ARMS["broad-60k-4l"] = dict(ARMS["broad-60k"], layers=4)
# the static student (recipes/embeddings.yaml's `static`) reads none of the transformer's shape or optimizer options
STATIC = dict(teacher="minilm", task=str(DATA / "stsb"), student="static", dim=256, epochs=6,
              max_train_rows=30000)
ARMS.update({"static": dict(STATIC, corpus="imdb,wordnet"),
             "static-broad": dict(STATIC, corpus=ARMS["broad"]["corpus"], corpus_mix="equal")})


def sts_test():
    from shrinkbert.core.scored_pairs import ScoredPairs

    with open(DATA / "stsb" / "test.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    return ScoredPairs([r["sentence1"] for r in rows], [r["sentence2"] for r in rows],
                       np.asarray([float(r["score"]) for r in rows]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--arms", default="recipe,questions,pull,queries,broad",
                        help=f"comma-separated, of {', '.join(ARMS)}")
    parser.add_argument("--nli-pairs", type=int, default=1000, help="SNLI test pairs of each label")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--base", default="recipe", help="the arm every transformer arm is compared with, paired")
    parser.add_argument("--max-train-rows", type=int, default=15000, help="sentences per student (the recipe: 30,000)")
    parser.add_argument("--questions", type=int, default=1000)
    parser.add_argument("--out", default=str(ROOT / "runs" / "bench" / "drop-in"))
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    import shrinkbert
    from shrinkbert.core.artifacts import is_artifact, read_manifest
    from shrinkbert.core.device import cpu_model, detect_isa
    from shrinkbert.core.kinds.sts import sts_spearman
    from shrinkbert.eval.encoders import open_encoder
    from shrinkbert.eval.embedding_eval import nli_auc, read_nli_pairs
    from shrinkbert.eval.retrieval import gold_ranks, read_squad_retrieval
    from shrinkbert.eval.stats import compare_runs, difference_text, mean_sd

    out = Path(args.out)
    search = read_squad_retrieval(SQUAD_V1, args.questions, seed=0, articles="held-out")
    pairs = sts_test()
    nli = read_nli_pairs(DATA / "snli" / "test.csv", args.nli_pairs)
    teacher, _ = open_encoder("minilm", threads=0, max_length=128)
    documents = teacher(search.paragraphs)
    teacher_ranks = gold_ranks(teacher(search.questions), documents, search.gold)
    reference = {"recall_at_1": float(np.mean(teacher_ranks <= 1)), "recall_at_10": float(np.mean(teacher_ranks <= 10)),
                 "sts": sts_spearman(teacher, pairs), "nli": nli_auc(teacher, *nli)}
    print(f"teacher: {len(search.paragraphs)} held-out paragraphs, {len(search.questions)} questions: recall@1 "
          f"{reference['recall_at_1']:.3f}, recall@10 {reference['recall_at_10']:.3f}; STS-B test {reference['sts']:.2f}; "
          f"NLI AUC {reference['nli']:.2f}",
          flush=True)
    hits: dict[str, dict[str, list[list[bool]]]] = {}
    records: dict[str, list[dict]] = {}
    for seed in range(args.seeds):  # seeds outermost: a cut-short run still compares every arm
        for arm in args.arms.split(","):
            where = out / arm / f"seed{seed}"
            started = time.perf_counter()
            if not is_artifact(where):
                options = ({**ARMS[arm]} if arm.startswith("static") else
                           {**STUDENT, "max_train_rows": args.max_train_rows, **ARMS[arm]})
                shrinkbert.distill(**options, seed=seed, output_dir=str(where))
            student, _ = open_encoder(str(where), threads=0, max_length=128)
            queries = student(search.questions)
            own_index = queries.shape[1] != documents.shape[1]  # a static student (dim 256) searches its own index
            ranks = gold_ranks(queries, student(search.paragraphs) if own_index else documents, search.gold)
            for k in (1, 10):
                hits.setdefault(arm, {}).setdefault(f"recall_at_{k}", []).append((ranks <= k).tolist())
            manifest = read_manifest(where)
            record = {"seed": seed, "index": "its own" if own_index else "the teacher's", "recall_at_1": float(np.mean(ranks <= 1)), "recall_at_10": float(np.mean(ranks <= 10)),
                      "sts": sts_spearman(student, pairs), "nli": nli_auc(student, *nli), "train_sentences": manifest["metrics"]["train_sentences"],
                      "query_pull": manifest["metrics"].get("query_pull"),
                      "minutes": round((time.perf_counter() - started) / 60, 1)}
            records.setdefault(arm, []).append(record)
            print(f"{arm} seed {seed}: recall@1 {record['recall_at_1']:.3f} recall@10 {record['recall_at_10']:.3f} "
                  f"STS-B {record['sts']:.2f} NLI AUC {record['nli']:.2f} ({record['minutes']} min)", flush=True)
    host = f"{cpu_model()}, {detect_isa()}, {os.cpu_count()} cores"
    print(f"\nhost: {host}; drop-in: each student's questions in the teacher's index; shares of the teacher's own")
    print(f"{'arm':10s} {'recall@1 of teacher':>22s} {'recall@10 of teacher':>22s} {'STS-B of teacher':>18s} "
          f"{'NLI of teacher':>16s}  "
          f"recall@1, recall@10 vs {args.base} (static-broad: vs static; paired, points)")
    table = {}
    for arm, rows in records.items():
        shares = {name: mean_sd([r[name] / reference[name] for r in rows])
                  for name in ("recall_at_1", "recall_at_10", "sts", "nli")}
        base = "static" if arm.startswith("static") else args.base  # each student against its own recipe's text
        versus = {name: compare_runs(hits[arm][name], hits[base][name][:len(hits[arm][name])]).to_dict()
                  for name in ("recall_at_1", "recall_at_10")} if arm != base and base in hits else None
        table[arm] = {"shares": shares, "seeds": rows, "vs_recipe": versus}
        print(f"{arm:10s} " + " ".join(f"{shares[n][0]:15.1%} ± {shares[n][1]:.1%}" for n in ("recall_at_1", "recall_at_10"))
              + f" {shares['sts'][0]:11.1%} ± {shares['sts'][1]:.1%} {shares['nli'][0]:9.1%} ± {shares['nli'][1]:.1%}  "
              + (f"{difference_text(versus['recall_at_1'])}, {difference_text(versus['recall_at_10'])}" if versus else "–"))
    (out / "drop_in.json").write_text(json.dumps({"host": host, "teacher": reference, "paragraphs": len(search.paragraphs),
                                                  "questions": len(search.questions), "arms": table}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
