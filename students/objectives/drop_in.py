"""The drop-in objective: a query encoder for an index the teacher already built. The student learns the
teacher's ranking of the index's own documents for queries, the documents' teacher vectors held fixed
(the index as it is), so its queries search that index as the teacher's do.

    shrinkbert distill --objective drop-in --teacher mpnet --student minilm --corpus docs.jsonl
    shrinkbert distill --objective drop-in --teacher mpnet --layers 6 --hidden 384 --corpus squad,sotu,wordnet

- Reads from the teacher: its vectors of the --corpus documents (the index, or a sample of it) and of
  the queries, cached by content in shards, so a killed pass resumes (students/embedding_distill.py);
  the documents' pass is the costly part on a CPU and its rate is logged and recorded.
- Queries: each document's own (a SQuAD file's questions, a .jsonl's "queries" and "title"), then
  --generated-queries made from it (a sentence, a cropped span) and a short document itself
  (students/documents.py).
- Loss terms: MSE + cosine to the teacher's vector of each query (its coordinates in the teacher's
  space), plus --rank-weight x the KL between the teacher's and the student's softmax over cosines
  with the teacher's vectors of the batch's documents and of each query's --hard-negatives (the
  training documents the teacher ranks highest for it, other than its own): a query is trained
  to order the documents it will meet as the teacher orders them.
- The epoch kept: drop-in recall on held-out queries (--held-out-documents: whole articles or groups,
  never trained on, and their queries) in the teacher's index of those documents, recall@1 and @10
  averaged; with a scored-pairs --task, its validation Spearman is measured and recorded beside it.
- Hands the trainer: the student (a pretrained one re-indexed to the teacher's pieces, `--student
  minilm` for MPNet, or a shape sliced from the teacher), the queries with their targets, the term.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from shrinkbert.core.config import field
from shrinkbert.core.errors import ShrinkbertError
from shrinkbert.students.objectives.common import CorpusOptions, HiddenLossOptions, ShapeOptions, StudentOptions

NAME = "drop-in"  # --objective drop-in
MINING_CHUNK = 2048      # queries scored against the documents at once when mining hard negatives
DEFAULT_LAYERS = 3


@dataclass
class DropInOptions(ShapeOptions, HiddenLossOptions, CorpusOptions, StudentOptions):
    """--objective drop-in: a query encoder for the teacher's index of --corpus's documents."""
    max_documents: int = field(0, "objective drop-in: at most this many --corpus documents, an equal share from "
                                  "each source (0: all)", min=0, group="data")
    held_out_documents: int = field(1000, "objective drop-in: documents held out of training (whole articles or "
                                          "groups): their queries searched in the teacher's index of them pick the "
                                          "epoch kept", min=10, group="data")
    generated_queries: int = field(2, "objective drop-in: queries made from each document besides its own (a "
                                      "sentence of it, a cropped span of it, in turn)", min=0, group="data")
    hard_negatives: int = field(8, "objective drop-in: each query's training documents the teacher ranks highest "
                                   "(its own aside) among the documents it is trained to rank", min=0,
                                group="losses")
    rank_weight: float = field(1.0, "objective drop-in: weight of the KL between the teacher's and the student's "
                                    "softmax over cosines with the teacher's vectors of the batch's documents and "
                                    "hard negatives (0: the query's vector alone)", min=0, group="losses")


Options = DropInOptions


def mine_negatives(queries, documents, own, count: int):
    """[queries, count] rows of `documents` each query's teacher vector scores highest, its own
    document (`own`) aside; all unit vectors."""
    import numpy as np

    count = min(count, len(documents) - 1)
    if count <= 0:
        return np.zeros((len(queries), 0), np.int64)
    found = np.empty((len(queries), count), np.int64)
    for start in range(0, len(queries), MINING_CHUNK):
        scores = queries[start:start + MINING_CHUNK] @ documents.T
        rows = np.arange(len(scores))
        scores[rows, own[start:start + MINING_CHUNK]] = -np.inf
        top = np.argpartition(-scores, count - 1, axis=1)[:, :count]
        order = np.argsort(-scores[rows[:, None], top], axis=1)
        found[start:start + len(scores)] = top[rows[:, None], order]
    return found


def ranking_term(document_vectors, own, negatives):
    """The term's factory (students/objectives/vectors.py's form): each query's student vector ranks
    the teacher's vectors of the batch's documents and hard negatives as its teacher vector does."""
    import numpy as np
    import torch

    from shrinkbert.core.kinds.losses import index_ranking_loss

    candidates = np.concatenate([np.asarray(own)[:, None], negatives], axis=1)  # [queries, 1 + negatives]
    bank = torch.from_numpy(np.ascontiguousarray(document_vectors, np.float32))
    per_query = torch.from_numpy(candidates)

    def factory(_targets, _seed):
        def term(vectors, batch):
            nonlocal bank
            bank = bank.to(vectors.device)  # once: a no-op from the second step on
            shown = torch.unique(per_query[batch["row"].cpu()].flatten())
            return index_ranking_loss(vectors, batch["target"], bank[shown.to(vectors.device)])
        return term
    return factory


def drop_in_judge(queries: list[str], gold, index, validation=None):
    """The epoch kept by drop-in recall: the student's held-out `queries` in the teacher's `index` of
    the held-out documents (unit rows), each with its `gold` row; recall@1 and @10 averaged, in points.
    With `validation` (scored pairs), its STS Spearman is measured too, not ranked by."""
    import numpy as np

    from shrinkbert.core.kinds.embedding import gold_ranks, normalize_rows
    from shrinkbert.core.kinds.sts import sts_spearman
    from shrinkbert.students.embedding_distill import Judge

    def measure(encode) -> dict:
        ranks = gold_ranks(normalize_rows(encode(queries)), index, gold)
        found = {"drop_in_recall_at_1": float(np.mean(ranks <= 1)), "drop_in_recall_at_10": float(np.mean(ranks <= 10))}
        if validation is not None:
            found["validation_spearman"] = sts_spearman(encode, validation)
        return found

    def text(found: dict) -> str:
        return (f"held-out drop-in recall@1 {found['drop_in_recall_at_1']:.3f}, @10 {found['drop_in_recall_at_10']:.3f}"
                + (f", STS validation {found['validation_spearman']:.2f}" if "validation_spearman" in found else ""))
    return Judge(measure, lambda found: 50 * (found["drop_in_recall_at_1"] + found["drop_in_recall_at_10"]), text,
                 f"drop-in recall@1 and @10 of {len(queries):,} held-out queries in the teacher's index of "
                 f"{len(index):,} held-out documents, averaged")


def run(cfg) -> Path:
    """Distil a drop-in query encoder as the distill stage's Config asks; return its artifact path."""
    # deferred: --help and the generated API read this module's options without torch
    import numpy as np

    from shrinkbert.core.builtin import resolve_model
    from shrinkbert.core.data.dataspec import resolve_max_length
    from shrinkbert.core.kinds import kind_for_mode
    from shrinkbert.core.kinds.embedder import Embedder
    from shrinkbert.core.kinds.embedding import gold_ranks, normalize_rows
    from shrinkbert.students.corpus_lines import guard_task_pairs, validation_pairs
    from shrinkbert.students.documents import corpus_split, held_out_queries, query_pairs, sample_pairs
    from shrinkbert.students.embedding_distill import (EmbeddingStudentConfig, distill_embedding, teacher_precision,
                                                       teacher_vectors)
    from shrinkbert.students.processes import log_main, process_state

    if "," in cfg.teacher:
        raise ShrinkbertError("a drop-in student serves one teacher's index: give one --teacher")
    if cfg.target:
        raise ShrinkbertError("--target is not supported for embedding students yet: give --layers/--hidden/"
                              "--intermediate, or --student")
    into = cfg.student or None
    if into is not None and (cfg.layers or cfg.hidden or cfg.heads or cfg.intermediate):
        raise ShrinkbertError(f"--student {cfg.student} is distilled into as it is: drop --layers/--hidden/--heads/"
                              "--intermediate")
    cfg, _ = resolve_max_length(cfg, kind_for_mode("embeddings"), [cfg.teacher])
    teacher_path = resolve_model(cfg.teacher)

    training, held = corpus_split(cfg.corpus, cfg.max_documents, cfg.held_out_documents)
    pairs = sample_pairs(query_pairs(training, cfg.generated_queries, cfg.seed), cfg.max_train_rows, cfg.seed)
    asked = held_out_queries(held, cfg.generated_queries, cfg.seed)
    data, validation = validation_pairs(cfg, cfg.teacher)
    record = {"corpus": cfg.corpus, "documents": {"train": len(training), "held_out": len(held)},
              "rows": {"train": len(pairs.queries)}, "queries": pairs.counts(), "held_out_queries": len(asked.queries)}
    if data is not None:  # no query the student is scored on in the task's pairs
        spec, task = data
        kept, leaks = guard_task_pairs(spec, cfg, pairs.queries)
        keep = set(kept)
        rows = [r for r, query in enumerate(pairs.queries) if query in keep]
        pairs = pairs.subset(rows)
        record = spec.record(task, max_length=cfg.max_length, **{**record, "rows": {"train": len(rows)}},
                             leak_guard_removed=leaks)
    log_main(f"drop-in: {len(training):,} training documents, {len(held):,} held out; {len(pairs.queries):,} "
             f"queries ({', '.join(f'{n:,} {origin}' for origin, n in pairs.counts().items())}), "
             f"{len(asked.queries):,} held-out queries pick the epoch")

    teacher = Embedder.load(teacher_path, max_length=cfg.max_length).to(process_state().device)
    # the teacher's pass over the documents is most of a CPU's work: bf16 where the cores compute in it
    precision = teacher_precision(cfg, teacher)
    rates: dict = {}
    index_vectors = normalize_rows(teacher_vectors(teacher, teacher_path, training.texts + held.texts,
                                                   cfg.cache_dir or None, stats=rates, precision=precision))
    if rates:
        log_main(f"teacher vectors of {rates['rows']:,} documents: {rates['seconds']:.0f} s "
                 f"({rates['rows_per_s']:.1f} documents/s)")
    train_index, held_index = index_vectors[:len(training)], index_vectors[len(training):]
    query_vectors = normalize_rows(teacher_vectors(teacher, teacher_path, pairs.queries, cfg.cache_dir or None,
                                                   precision=precision))
    asked_vectors = normalize_rows(teacher_vectors(teacher, teacher_path, asked.queries, cfg.cache_dir or None,
                                                   precision=precision))
    del teacher  # distill_embedding loads its own
    own = np.asarray(pairs.documents, np.int64)
    negatives = mine_negatives(query_vectors, train_index, own, cfg.hard_negatives)
    gold = np.asarray(asked.documents, np.int64)
    ranks = gold_ranks(asked_vectors, held_index, gold)
    reference = {"recall_at_1": float(np.mean(ranks <= 1)), "recall_at_10": float(np.mean(ranks <= 10))}
    log_main(f"the teacher's own held-out recall@1 {reference['recall_at_1']:.3f}, @10 {reference['recall_at_10']:.3f}")
    terms = {"rank_weight": (cfg.rank_weight, ranking_term(train_index, own, negatives))}
    config = EmbeddingStudentConfig(
        layers=cfg.layers or DEFAULT_LAYERS, hidden=cfg.hidden or None, heads=cfg.heads or None,
        intermediate=cfg.intermediate or None, epochs=max(1, int(round(cfg.epochs))), lr=cfg.learning_rate,
        batch_size=cfg.batch_size, max_length=cfg.max_length, seed=cfg.seed, hidden_weight=cfg.hidden_weight)
    drop_in = {"documents": {"train": len(training), "held_out": len(held)}, "hard_negatives": int(negatives.shape[1]),
               "held_out_queries": len(asked.queries), "teacher_held_out": reference, "teacher_precision": precision,
               **({"teacher_document_vectors": rates} if rates else {})}
    out = distill_embedding(teacher_path, pairs.queries, cfg.output_dir, config, validation=validation,
                            cache_dir=cfg.cache_dir or None, data=record, student_path=into, loop=cfg, terms=terms,
                            judge=drop_in_judge(asked.queries, gold, held_index, validation),
                            extra={"drop_in": drop_in}, precision=precision)
    return Path(out)
