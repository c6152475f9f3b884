"""Fine-tune a sentence-embedding model on NLI pairs, as sentence-transformers users do:
MultipleNegativesRankingLoss on the entailment pairs (`premise,hypothesis,label`, SNLI's files),
each premise's hypothesis against the batch's other hypotheses (in-batch negatives),
sentence-transformers' recipe for training embedders on NLI; from the CLI, `shrinkbert finetune
--mode embeddings` on an NLI task, judged by triplet accuracy (entailed hypothesis closer to its
premise than a contradicting one) on the validation split.

Scored pairs (STS-B's `sentence1,sentence2,score`) are the embedding kind's own task: `shrinkbert
finetune` trains them through the stage every kind uses (teachers/finetune.py; CosineSimilarityLoss,
core/kinds/embedding.py).

The loss is sentence-transformers' own (sentence_transformers.losses), on the model loaded by
`SentenceTransformer(path)` (a kit-written embedding folder or a hub one such as minilm), trained in
the kit's one loop (core/train.py): AdamW, linear warm-up and decay, checkpoints and exact resume
from `shrinkbert finetune` (its training-loop options apply).
The result is the sentence-transformers folder `model.save` writes, plus shrinkbert.json (kind
"embedding"), written atomically: a bad input file writes nothing.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from shrinkbert.core.artifacts import atomic_artifact, write_manifest
from shrinkbert.core.configs import TrainConfig
from shrinkbert.core.data.builtin import resolve_model
from shrinkbert.core.data.userdata import read_table
from shrinkbert.core.errors import ShrinkbertError
from shrinkbert.core.train import checkpoint_dir_for, remove_checkpoints

NLI_COLUMNS = ("premise", "hypothesis", "label")
ENTAILMENT = ("entailment", "0")  # SNLI's label word, or its hub dataset's id


def read_nli_pairs(path: str | Path) -> tuple[list[str], list[str]]:
    """(premises, hypotheses) of the entailment rows of an NLI file, or one ShrinkbertError line."""
    table = read_table(path, text_columns=NLI_COLUMNS[:2])
    missing = [name for name in NLI_COLUMNS if name not in table.column_names]
    if missing:
        raise ShrinkbertError(f"{path} has no column(s) {', '.join(missing)}: an NLI file needs "
                              f"{','.join(NLI_COLUMNS)} (found {','.join(table.column_names)})")
    rows = [(str(p), str(h)) for p, h, label in zip(table["premise"], table["hypothesis"], table["label"])
            if str(label).strip().lower() in ENTAILMENT and str(p).strip() and str(h).strip()]
    if not rows:
        raise ShrinkbertError(f"{path} holds no entailment pairs (label 'entailment')")
    return [p for p, _ in rows], [h for _, h in rows]


def loop_config(epochs: float, lr: float, batch_size: int, seed: int) -> TrainConfig:
    """The training loop's settings for a direct call (finetune_scored, finetune_nli): no checkpoints,
    the loss logged every step."""
    return TrainConfig(learning_rate=lr, epochs=epochs, batch_size=batch_size, seed=seed, checkpoint_every=0,
                       log_every=1)


def _train(model, loss, examples: list[tuple], loop: TrainConfig, checkpoint_dir: str | Path | None = None,
           log=print) -> list[float]:
    """(texts_a, texts_b, label or None) examples through a sentence-transformers loss, in the kit's one
    training loop (core/train.py: AdamW, warm-up then linear decay, clipping, checkpoints and exact
    resume); the mean loss of each epoch."""
    import tempfile

    import torch

    from shrinkbert.core.train import epoch_losses, train

    def collate(batch: list[tuple]) -> dict:  # tokenized here, so the loop moves the tensors to the device
        out = {"a": model.preprocess([example[0] for example in batch]),
               "b": model.preprocess([example[1] for example in batch])}
        if batch[0][2] is not None:
            out["labels"] = torch.tensor([example[2] for example in batch], dtype=torch.float32)
        return out

    def loss_fn(trained, batch):
        return trained([batch["a"], batch["b"]], batch.get("labels")), {}

    with tempfile.TemporaryDirectory() as scratch:
        metrics = train(loss, list(examples), collate, loss_fn, loop,
                        Path(checkpoint_dir) if checkpoint_dir is not None else Path(scratch),
                        desc="finetune embeddings")
    model.eval()
    losses = epoch_losses(metrics)
    for epoch, value in enumerate(losses, 1):
        log(f"  epoch {epoch}: loss {value:.4f}")
    return losses


def _load(model_path: str | Path, max_length: int):
    from sentence_transformers import SentenceTransformer  # deferred: heavy

    model = SentenceTransformer(resolve_model(str(model_path)), device="cpu")
    model.max_seq_length = max_length
    return model


def _save(model, out_dir, *, stage: str, parent, config: dict, metrics: dict, data: dict | None = None) -> Path:
    with atomic_artifact(out_dir) as tmp:
        model.save(str(tmp))
        write_manifest(tmp, stage=stage, parents=[resolve_model(str(parent))], config=config, metrics=metrics,
                       seed=config.get("seed"), num_parameters=sum(p.numel() for p in model.parameters()), data=data,
                       extra={"kind": "embedding", "dim": model.get_embedding_dimension()})
    return Path(out_dir)


def finetune_nli(model_path: str | Path, nli_file: str | Path, out_dir: str | Path, *, epochs: int = 1,
                 lr: float = 2e-5, batch_size: int = 32, max_length: int = 128, seed: int = 0, max_pairs: int = 0,
                 log=print) -> Path:
    """MultipleNegativesRankingLoss on the entailment pairs of an NLI file (in-batch negatives)."""
    premises, hypotheses = read_nli_pairs(nli_file)
    pairs = list(zip(premises, hypotheses))[:max_pairs or None]
    _check_nli_pairs(pairs, str(nli_file))
    model = _load(model_path, max_length)
    losses = _train_nli(model, pairs, loop_config(epochs, lr, batch_size, seed), log=log)
    config = {"model": str(model_path), "pairs": str(nli_file), "loss": "MultipleNegativesRankingLoss",
              "epochs": epochs, "lr": lr, "batch_size": batch_size, "max_length": max_length, "seed": seed,
              "pairs_used": len(pairs)}
    return _save(model, out_dir, stage="finetune", parent=model_path, config=config, metrics={"train_loss": losses})


def _check_nli_pairs(pairs: list[tuple[str, str]], where: str) -> None:
    if len(pairs) < 2:
        raise ShrinkbertError(f"{where}: in-batch negatives need at least 2 entailment pairs, got {len(pairs)}")


def _train_nli(model, pairs: list[tuple[str, str]], loop: TrainConfig, checkpoint_dir: str | Path | None = None,
               log=print) -> list[float]:
    """MultipleNegativesRankingLoss over (premise, entailed hypothesis) pairs; the losses per epoch."""
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss

    return _train(model, MultipleNegativesRankingLoss(model), [(p, h, None) for p, h in pairs], loop,
                  checkpoint_dir, log=log)


def nli_triplets(premises, hypotheses, labels: list[str]) -> list[tuple[str, str, str]]:
    """(premise, entailed hypothesis, contradicting hypothesis) for every premise that has both."""
    entailed: dict[str, str] = {}
    contradicted: dict[str, str] = {}
    for premise, hypothesis, label in zip(premises, hypotheses, labels):
        label = str(label).strip().lower()
        if label in ENTAILMENT:
            entailed.setdefault(premise, hypothesis)
        elif label == "contradiction":
            contradicted.setdefault(premise, hypothesis)
    return [(p, entailed[p], contradicted[p]) for p in entailed if p in contradicted]


def triplet_accuracy(encode, triplets: list[tuple[str, str, str]]) -> float | None:
    """Share of triplets whose premise is closer (cosine) to its entailed hypothesis than to its
    contradicting one (sentence-transformers' TripletEvaluator's measure); None without triplets."""
    if not triplets:
        return None
    anchors, positives, negatives = (encode([t[i] for t in triplets]) for i in range(3))
    return float(np.mean(np.sum(anchors * positives, axis=1) > np.sum(anchors * negatives, axis=1)))


def finetune_nli_stage(cfg, task, splits, model_dir, spec) -> Path:
    """`shrinkbert finetune --mode embeddings` on an NLI task (a pair task whose labels include
    entailment; finetune.run checks that): MultipleNegativesRankingLoss on the train split's entailment
    pairs, judged before and after by triplet accuracy on the validation split. The NLI data is recorded
    in the config, not as the data record later stages inherit: an embedding artifact's later stages
    take scored pairs."""
    def rows(split):  # the loader's pair columns, labels by the task's own names
        return split["text"], split["text_pair"], [task.label_names[i] for i in split["label"]]

    premises, hypotheses, labels = rows(splits["train"])
    pairs = [(p, h) for p, h, label in zip(premises, hypotheses, labels) if label.lower() in ENTAILMENT]
    _check_nli_pairs(pairs, f"task '{task.name}' (train split)")
    triplets = nli_triplets(*rows(splits["validation"]))
    model = _load(model_dir, cfg.max_length)

    def encode(texts):
        return model.encode(list(texts), convert_to_numpy=True, normalize_embeddings=True)

    before = triplet_accuracy(encode, triplets)  # the starting model's, so the training's effect shows
    checkpoints = checkpoint_dir_for(cfg.output_dir)
    losses = _train_nli(model, pairs, cfg, checkpoints / "run")
    after = triplet_accuracy(encode, triplets)
    metrics = {"train_loss": losses, "validation_triplet_accuracy": after,
               "validation_triplet_accuracy_before": before, "validation_triplets": len(triplets)}
    config = {"model": str(cfg.model), "pairs": spec.task, "loss": "MultipleNegativesRankingLoss",
              "epochs": cfg.epochs, "learning_rate": cfg.learning_rate, "batch_size": cfg.batch_size,
              "max_length": cfg.max_length, "seed": cfg.seed, "pairs_used": len(pairs), "mode": "embeddings"}
    print(f"finetune: {task.name} entailment pairs {len(pairs):,}, validation triplet accuracy "
          f"{before if before is None else round(before, 4)} -> {after if after is None else round(after, 4)} "
          f"({len(triplets)} triplets) -> {cfg.output_dir}")
    out = _save(model, cfg.output_dir, stage="finetune", parent=model_dir, config=config, metrics=metrics)
    remove_checkpoints(checkpoints)
    return out
