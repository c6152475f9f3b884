"""The static student: one vector per vocabulary token, a sentence is the mean of its tokens' vectors.

Model2vec's method, written here: every vocabulary token goes through the teacher alone (as the
three-token input `[SEP] token [CLS]`, pooled as the teacher pools), the vectors are reduced by
PCA to `dim`, and each is weighted by SIF with a Zipf estimate of its frequency from its rank in
the vocabulary (WordPiece vocabularies list frequent pieces first), so that frequent, empty words
weigh little in the mean. Optionally (`tune`, tokenlearn's idea) the table is then trained on
corpus sentences so that each sentence's mean vector points where the teacher's sentence vector,
projected on the same principal directions, points. Inference is tokenize -> look up -> mean ->
normalise, numpy alone.

The artifact is a sentence-transformers folder (StaticEmbedding -> Normalize), so
`SentenceTransformer(path)` loads it too: `0_StaticEmbedding/model.safetensors` holds the table
as "embedding.weight", `0_StaticEmbedding/tokenizer.json` the teacher's tokenizer; compress/static_table.py
reads, saves and runs it (the bundle and eval open it there).
"""
from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import numpy as np
from sklearn.decomposition import PCA
from tokenizers import Tokenizer

from shrinkbert.compress.static_table import StaticTable
from shrinkbert.core.kinds.embedder import Embedder, pool
from shrinkbert.core.errors import ShrinkbertError

# BERT vocabularies reserve [unusedN] slots no text ever maps to: they would only skew the PCA fit
# and push every real token down the Zipf ranking (model2vec drops them for the same reason).
UNUSED_TOKEN = re.compile(r"\[unused\d+\]")
SIF_COEFFICIENT = 1e-4  # model2vec's default: the 'a' in SIF's a / (a + p(token))


def zipf_weights(n: int, sif: float = SIF_COEFFICIENT) -> np.ndarray:
    """SIF weight a / (a + p) of the tokens ranked 0..n-1, p from Zipf's law (p ~ 1 / (rank + 2))."""
    if not 0 < sif < 1:
        raise ShrinkbertError(f"the SIF coefficient must lie in (0, 1), got {sif}")
    inverse_rank = 1.0 / np.arange(2, n + 2)
    probability = inverse_rank / inverse_rank.sum()
    return sif / (sif + probability)


def pca_fit(vectors: np.ndarray, dim: int, fit_rows: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Every row projected on the top `dim` principal components of the `fit_rows` rows (all by
    default), and those components [dim, width] (to project the teacher's sentence vectors alike)."""
    if not 1 <= dim <= vectors.shape[1]:
        raise ShrinkbertError(f"--dim {dim} must lie between 1 and the teacher's width {vectors.shape[1]}")
    fitted = vectors if fit_rows is None else vectors[fit_rows]
    if dim > len(fitted):
        raise ShrinkbertError(f"--dim {dim} exceeds the {len(fitted)} vocabulary tokens the PCA is fitted on")
    pca = PCA(n_components=dim, svd_solver="full").fit(fitted)
    return pca.transform(vectors).astype(np.float32), pca.components_.astype(np.float32)


def zipf_ranks(kept: np.ndarray) -> np.ndarray:
    """Rank of each token id: kept tokens in vocabulary order first, the rest after them."""
    order = np.argsort(~kept, kind="stable")
    ranks = np.empty(len(kept), dtype=np.int64)
    ranks[order] = np.arange(len(kept))
    return ranks


def token_vectors(teacher: Embedder, batch_size: int = 512) -> np.ndarray:
    """The teacher's pooled (not normalised) vector of each vocabulary token seen alone."""
    import torch  # deferred: only building the table needs torch; inference is numpy

    tokenizer = teacher.tokenizer
    ids = torch.arange(teacher.model.config.vocab_size)
    chunks = []
    with torch.inference_mode():
        for start in range(0, len(ids), batch_size):
            middle = ids[start:start + batch_size, None]
            # [SEP] token [CLS], not the natural order: model2vec's choice, which gives the untuned
            # table better sentence vectors
            input_ids = torch.cat([torch.full_like(middle, tokenizer.sep_token_id), middle,
                                   torch.full_like(middle, tokenizer.cls_token_id)], dim=1)
            mask = torch.ones_like(input_ids)
            hidden = teacher.model(input_ids=input_ids, attention_mask=mask,
                                   token_type_ids=torch.zeros_like(input_ids)).last_hidden_state
            chunks.append(pool(hidden, mask, teacher.spec.mode).float().numpy())
    return np.concatenate(chunks)


class StaticEmbedder(StaticTable):
    """The static model's table built from a teacher and tuned (compress/static_table.py reads, saves and runs it)."""

    def __init__(self, vectors: np.ndarray, tokenizer: Tokenizer, directions: np.ndarray | None = None):
        super().__init__(vectors, tokenizer)
        self.directions = directions  # the PCA components [dim, teacher width], while distilling

    @classmethod
    def distill(cls, teacher_path: str | Path, dim: int = 256, sif: float = SIF_COEFFICIENT,
                corpus: list[str] | None = None, teacher_vectors: np.ndarray | None = None,
                epochs: int = 3, lr: float = 1e-3, seed: int = 0) -> "StaticEmbedder":
        """Build the table from a teacher (a model folder or "minilm"): vocabulary -> teacher -> PCA ->
        SIF; then, given corpus sentences, `tune` it on them (teacher_vectors: the teacher's vectors
        of those sentences, when already computed)."""
        teacher = Embedder.load(teacher_path)
        tokens = teacher.tokenizer.convert_ids_to_tokens(list(range(teacher.model.config.vocab_size)))
        kept = np.array([not UNUSED_TOKEN.fullmatch(token or "") for token in tokens])
        vectors, directions = pca_fit(token_vectors(teacher), dim, fit_rows=kept)
        vectors *= zipf_weights(len(vectors), sif)[zipf_ranks(kept)][:, None].astype(np.float32)
        student = cls(vectors, teacher.tokenizer.backend_tokenizer, directions)
        if corpus:
            student.tune_to_teacher(corpus, teacher.encode(corpus) if teacher_vectors is None else teacher_vectors,
                                    epochs=epochs, lr=lr, seed=seed)
        return student

    def tune_to_teacher(self, sentences: list[str], teacher_vectors: np.ndarray, **options) -> dict:
        """`tune` towards the teacher's sentence vectors projected on the table's principal directions."""
        if self.directions is None:
            raise ShrinkbertError("this static model keeps no PCA directions (it was loaded, not distilled): "
                                  "distill it again from its teacher to tune it")
        return self.tune(sentences, np.asarray(teacher_vectors, np.float32) @ self.directions.T, **options)

    def tune(self, sentences: list[str], targets: np.ndarray, epochs: float = 3, lr: float = 1e-3,
             batch_size: int = 64, seed: int = 0, on_epoch=None, loop=None, checkpoint_dir=None) -> dict:
        """Train the table so each sentence's mean vector has the direction of its target (cosine
        loss: only directions matter to cosine similarity), in the kit's one training loop
        (core/train.py). Adam at a constant rate with no weight decay, so tokens absent from the
        sentences keep their vectors exactly. on_epoch(epoch, student) -> dict or None runs after each
        epoch (to score or keep it; epochs counted from this call, so a resumed run counts from its resume). `loop` (a TrainConfig) replaces epochs/lr/batch_size/seed, with its
        checkpoints under `checkpoint_dir`; returns the loop's metrics."""
        import tempfile

        import torch  # deferred: tuning is the only training the static student has

        from shrinkbert.core.configs import TrainConfig
        from shrinkbert.core.train import train

        if len(sentences) != len(targets):
            raise ShrinkbertError(f"{len(sentences)} sentences but {len(targets)} teacher vectors")
        loop = loop or TrainConfig(learning_rate=lr, epochs=epochs, batch_size=batch_size, seed=seed,
                                   checkpoint_every=0, log_every=50)
        loop = dataclasses.replace(loop, weight_decay=0.0, warmup_ratio=0.0, warmup_steps=0, lr_schedule="constant",
                                   max_grad_norm=0.0)
        token_ids = [encoding.ids for encoding in self.tokenizer.encode_batch(list(sentences), add_special_tokens=False)]
        goal = np.asarray(targets, dtype=np.float32)
        rows = [{"ids": ids, "target": goal[row]} for row, ids in enumerate(token_ids) if ids]
        bag = torch.nn.EmbeddingBag.from_pretrained(torch.from_numpy(self.vectors.copy()), freeze=False, mode="mean")

        def collate(batch: list[dict]) -> dict:  # one bag of token ids per sentence, as EmbeddingBag takes them
            return {"flat": torch.tensor([i for row in batch for i in row["ids"]]),
                    "offsets": torch.tensor(np.cumsum([0] + [len(row["ids"]) for row in batch[:-1]])),
                    "target": torch.from_numpy(np.stack([row["target"] for row in batch]))}

        def loss_fn(table, batch):
            sentence = table(batch["flat"], batch["offsets"])
            return (1 - torch.nn.functional.cosine_similarity(sentence, batch["target"])).mean(), {}

        epochs_seen = []

        def eval_fn(table) -> dict:
            self.vectors = table.weight.detach().cpu().numpy().copy()
            epochs_seen.append(len(epochs_seen) + 1)
            return (on_epoch(epochs_seen[-1], self) or {}) if on_epoch is not None else {}

        with tempfile.TemporaryDirectory() as scratch:
            metrics = train(bag, rows, collate, loss_fn, loop,
                            Path(checkpoint_dir) if checkpoint_dir is not None else Path(scratch),
                            eval_fn=eval_fn, desc="tune static table")
        self.vectors = bag.weight.detach().cpu().numpy().copy()
        return metrics
