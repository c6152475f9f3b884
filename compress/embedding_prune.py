"""`shrinkbert prune` for sentence-embedding models: remove heads and FFN neurons, keep the vector space.

    shrinkbert prune --model minilm --task ../shared/data/stsb --head-fraction 0.25 --neuron-fraction 0.5 \
        --output-dir runs/emb-pruned
    shrinkbert distill --mode embeddings --teacher minilm --student runs/emb-pruned --corpus imdb,wordnet \
        --task ../shared/data/stsb --output-dir runs/emb-pruned-recovered         # recovery

The structure goes as the classifiers' does (compress/prune.py: heads through `prune_heads`, the same
number of FFN neurons from every layer), so the result is still a plain BertModel inside a
sentence-transformers folder (pooling, projection and normalisation kept) that exports as before.
What differs is the importance: an embedding model has no labels to take a loss on, so heads and
neurons are ranked by the gradient of `neighbour_loss` (core/kinds/embedding.py), each sentence
finding itself among a batch of others by its own vector, on the task's train sentences (both sides
of every pair). Validation Spearman before and after, and the mean cosine of the pruned model's
vectors to the unpruned one's, are recorded; recovery is distillation from the unpruned model into
this one (`distill --mode embeddings --student PATH`).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from shrinkbert.compress.embedding_stages import KIND, is_static, parent_record
from shrinkbert.compress.importance import score
from shrinkbert.compress.prune import (check_fractions, choose_heads, magnitude_scores, original_head_ids,
                                       prune_neurons, structure)
from shrinkbert.core.artifacts import check
from shrinkbert.core.config import to_dict
from shrinkbert.core.data.builtin import resolve_model
from shrinkbert.core.data.dataspec import resolve_spec, stage_max_length
from shrinkbert.core.data.scored_pairs import split_pairs
from shrinkbert.core.embedder import Embedder, pool
from shrinkbert.core.errors import ShrinkbertError, require
from shrinkbert.core.kinds import get_kind
from shrinkbert.core.kinds.embedding import neighbour_loss


def pair_sentences(spec, split: str, max_rows: int, cache_dir: str):
    """(the task, a split's scored pairs, their distinct sentences)."""
    from shrinkbert.core.sts import distinct_sentences

    task, pairs = split_pairs(spec, split, max_rows, cache_dir)
    return task, pairs, distinct_sentences(pairs)


def run(cfg) -> Path:
    """The prune stage for an embedding model (core/kinds/embedding.py routes it here)."""
    from shrinkbert.core.sts import pairs_spearman
    from shrinkbert.students.embedding_distill import save_student

    require(bool(cfg.model) and bool(cfg.output_dir), "prune needs --model and --output-dir")
    check_fractions(cfg)
    source = Path(resolve_model(str(cfg.model)))
    if is_static(source):
        raise ShrinkbertError(f"{source} is a static student: a lookup table has no heads or neurons to prune")
    cfg.max_length = stage_max_length(cfg, get_kind(KIND), [source])
    spec = resolve_spec(cfg, [source], required=False)
    if cfg.importance == "taylor" and spec is None:
        raise ShrinkbertError("an embedding model's heads are ranked on sentences: pass --task with scored pairs "
                              "(e.g. ../shared/data/stsb), or --importance magnitude")
    embedder = Embedder.load(source, max_length=cfg.max_length)
    require(embedder.model.config.model_type == "bert",
            f"structured pruning supports BERT-family models, got model_type '{embedder.model.config.model_type}'")
    before = structure(embedder.model)

    task = validation = None
    if spec is not None and cfg.max_eval_rows:
        task, validation, eval_sentences = pair_sentences(spec, "validation", cfg.max_eval_rows, cfg.cache_dir)
    unpruned = embedder.encode(eval_sentences) if validation is not None else None

    if cfg.importance == "taylor":
        task, _, sentences = pair_sentences(spec, "train", cfg.importance_rows, cfg.cache_dir)
        rows = get_kind(KIND).example_rows(sentences[:cfg.importance_rows])

        def loss_of(output, batch, _labels):  # pooled and projected as the model declares
            vectors = pool(output.last_hidden_state, batch["attention_mask"], embedder.spec.mode)
            return neighbour_loss(embedder.dense(vectors) if embedder.dense is not None else vectors)

        head_scores, neuron_scores = score(embedder.model, embedder.tokenizer, rows, [None] * len(rows),
                                           cfg.max_length, cfg.batch_size, loss_of=loss_of)
    else:
        head_scores, neuron_scores = magnitude_scores(embedder.model)

    plan = choose_heads(head_scores, cfg.head_fraction, cfg.head_scope, cfg.min_heads_per_layer)
    to_prune = {i: original_head_ids(embedder.model, i, positions) for i, positions in plan.items()}
    if to_prune:
        embedder.model.prune_heads(to_prune)
    prune_neurons(embedder.model, neuron_scores, cfg.neuron_fraction)
    embedder.model.eval()
    after = structure(embedder.model)

    metrics = {"before": before, "after": after,
               "params_ratio": round(after["num_parameters"] / before["num_parameters"], 4),
               "heads_removed": {str(k): v for k, v in to_prune.items()},
               "head_scores": [[round(float(x), 5) for x in s] for s in head_scores],
               "importance": cfg.importance + (" (neighbour loss on train sentences)" if cfg.importance == "taylor" else ""),
               "note": "before recovery: distil from the unpruned model into this one "
                       "(distill --mode embeddings --student THIS)"}
    if validation is not None:
        pruned = embedder.encode(eval_sentences)
        metrics.update(validation_spearman_before=pairs_spearman(unpruned, validation),
                       validation_spearman_after_no_recovery=pairs_spearman(pruned, validation),
                       agreement_with_unpruned=float(np.mean(np.sum(unpruned * pruned, axis=1))),
                       eval_pairs=len(validation.first))
    norms = np.linalg.norm(embedder.encode(["A man is playing a guitar.", "a cat"]), axis=1)
    checks = [check("unit_vectors", bool(np.allclose(norms, 1, atol=1e-4)), f"norms {norms.min():.5f}..{norms.max():.5f}")]
    data = spec.record(task, max_length=cfg.max_length) if spec is not None else parent_record(source)[1]
    return save_student(embedder, cfg.output_dir, stage="prune", parents=[source], config=to_dict(cfg),
                        metrics=metrics, checks=checks, data=data)
