"""Sentence embeddings: a model maps a text to one vector; similar meanings, near vectors.

The model is an encoder plus pooling (and an optional linear projection), then L2 normalisation
(core/kinds/embedder.py: read from the model's own sentence-transformers files); an artifact is a
sentence-transformers folder whose shrinkbert.json says kind "embedding". Such a folder's
config.json names a bare "BertModel", which is no kind's architecture: all-MiniLM-L6-v2 itself is one
(and is fine-tuned into a classifier as it always was), so an embedding artifact is recognised by its
manifest's kind only (`kind_of(dir)` reads shrinkbert.json first), and a folder without one is an
embedding model only when a stage is told so (distill --teacher of an embedding task, eval of
scored pairs).

Task rows are scored sentence pairs, STS-B's shape: {"sentence1", "sentence2", "score"} with the
score inside a declared range (the task's two `label_names` are that range's ends, "0" and "5" for
STS-B). The metric is "spearman": Spearman of the cosine of the two sentences' vectors with the gold
score, x100 (core/kinds/sts.py, MTEB's STS main score).

Scored rows are sentence vectors (unit length): for rows of pairs, each pair's first sentence's vector
then its second's (unlabelled rows, `example_rows`, have no second sentence), so rows scored in
batches of any size line up, parity checks and the int8 tolerance compare vectors, and `score`
cosines the even rows with the odd ones. A model's raw
output is either the sentence vector itself (the exported graph's "sentence_embedding") or token
vectors [batch, seq, hidden] (a transformers BertModel's last_hidden_state), mean-pooled here over
the real tokens, as sentence-transformers' default Pooling does.

Fine-tuning runs through the finetune stage every kind uses: scored pairs train with
sentence-transformers' CosineSimilarityLoss and are judged by Spearman; an NLI task (premise,
hypothesis, label with an entailment label), adopted for `finetune --mode embeddings` (`adopt`),
trains with in-batch negatives on its entailment pairs (MultipleNegativesRankingLoss's form,
core/kinds/losses.py) and is judged by triplet accuracy: the share of premises closer to their
entailed hypothesis than to a contradicting one (sentence-transformers' TripletEvaluator's measure).
An embedding student is distilled on unlabelled text (students/embedding_distill.py).
"""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Sequence

import datasets
import numpy as np

from shrinkbert.core.errors import ShrinkbertError
from shrinkbert.core.kinds import register
from shrinkbert.core.kinds.base import TaskKind
from shrinkbert.core.scored_pairs import STS_RANGE, check_scores
from shrinkbert.core.userdata import quiet_datasets

COLUMNS = ("sentence1", "sentence2", "score")
OUTPUT = "sentence_embedding"  # compress/embedding_onnx.py's graph output
DEFAULT_RANGE = ("0", "5")     # STS-B's score range, as the task's label names
NEIGHBOUR_SCALE = 20.0         # sentence-transformers' MultipleNegativesRankingLoss scale (temperature 0.05)
MIN_INT8_AGREEMENT = 0.98      # mean cosine of int8 and fp32 vectors below which int8 has broken the model
TRIPLETS = "triplet_accuracy"  # the metric of an NLI task adopted as entailment pairs
ENTAILMENT, CONTRADICTION = "entailment", "contradiction"  # NLI label names (SNLI's, MultiNLI's)


def neighbour_loss(vectors):
    """In-batch retrieval loss of sentence vectors against their own detached copies: each sentence must
    find itself among the batch's (cross-entropy over scaled cosines, MultipleNegativesRankingLoss's
    form). Its value is the model's own, but its gradient says which weights keep sentences apart,
    so pruning by it (compress/prune.py) keeps what a nearest-neighbour index relies on. A
    squared-error loss to the model's own vectors would be zero with a zero gradient here."""
    from shrinkbert.core.kinds.losses import in_batch_negatives_loss  # deferred: torch

    return in_batch_negatives_loss(vectors, vectors.detach(), NEIGHBOUR_SCALE)


def nli_triplets(premises, hypotheses, labels) -> list[tuple[str, str, str]]:
    """(premise, entailed hypothesis, contradicting hypothesis) for every premise that has both."""
    entailed: dict[str, str] = {}
    contradicted: dict[str, str] = {}
    for premise, hypothesis, label in zip(premises, hypotheses, labels):
        label = str(label).strip().lower()
        if label == ENTAILMENT:
            entailed.setdefault(premise, hypothesis)
        elif label == CONTRADICTION:
            contradicted.setdefault(premise, hypothesis)
    return [(p, entailed[p], contradicted[p]) for p in entailed if p in contradicted]


def triplet_accuracy(anchors: np.ndarray, positives: np.ndarray, negatives: np.ndarray) -> float:
    """Share of rows whose anchor is closer (cosine) to its positive than to its negative."""
    from shrinkbert.core.kinds.sts import cosine_rows  # deferred: scipy

    return float(np.mean(cosine_rows(anchors, positives) > cosine_rows(anchors, negatives)))


def normalize_rows(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32)
    return vectors / np.maximum(np.linalg.norm(vectors, axis=-1, keepdims=True), 1e-12)


def agreement(student_vectors: np.ndarray, teacher_vectors: np.ndarray) -> float:
    """Mean cosine of row i of the student's vectors with row i of the teacher's (same sentences)."""
    if student_vectors.shape != teacher_vectors.shape:
        raise ShrinkbertError(f"agreement needs vectors in the teacher's space: student {student_vectors.shape}, "
                              f"teacher {teacher_vectors.shape}")
    return float(np.mean(np.sum(normalize_rows(student_vectors) * normalize_rows(teacher_vectors), axis=1)))


def mean_pool(hidden: np.ndarray, attention_mask: np.ndarray) -> np.ndarray:
    """[batch, seq, hidden] token vectors -> [batch, hidden], the mean over real tokens."""
    mask = np.asarray(attention_mask, dtype=np.float32)[..., None]
    return (np.asarray(hidden, np.float32) * mask).sum(axis=1) / np.maximum(mask.sum(axis=1), 1e-9)


class PairScores(list):
    """The gold scores of scored pairs (`gold_labels`), which also say how the pairs are judged.
    Spearman ranks all pairs together, so no pair is right or wrong on its own: `unit_scores` is
    None, and "accuracy" (compress/common.py) with it; accuracy-aware int8 holds `score_of` (Spearman
    / 100) within its tolerance, with `drop_with_margin`'s bootstrap standard error."""

    judged_by = "Spearman"

    def unit_scores(self, scored) -> None:
        return None

    @staticmethod
    def cosines(scored) -> np.ndarray:
        from shrinkbert.core.kinds.sts import cosine_rows  # deferred: scipy

        scored = np.asarray(scored)
        return cosine_rows(scored[0::2], scored[1::2])  # `scored_logits`: each pair's two vectors in turn

    def score_of(self, scored) -> float:
        from shrinkbert.core.kinds.sts import spearman_x100

        return spearman_x100(self.cosines(scored), [float(s) for s in self]) / 100

    def drop_with_margin(self, fp32, int8) -> tuple[float, float]:
        from shrinkbert.core.kinds.sts import cosine_spearman_drop

        return cosine_spearman_drop(self.cosines(fp32), self.cosines(int8), [float(s) for s in self])


def score_range(task) -> tuple[float, float]:
    """The declared range of a task's gold scores (its two label names)."""
    try:
        low, high = (float(name) for name in task.label_names)
    except ValueError:
        raise ShrinkbertError(f"task '{task.name}': an embedding task's labels are its score range "
                              f"(e.g. 0 and 5), got {list(task.label_names)}") from None
    return low, high


@register
class EmbeddingKind(TaskKind):
    name = "embedding"
    # No architecture names this kind: a bare BertModel stays the default kind (see the docstring);
    # the manifest's "kind" says embedding.
    architecture_suffix = "\0embedding"
    auto_model_class = "AutoModel"
    ort_model_class = "ORTModelForFeatureExtraction"
    export_task = "feature-extraction"
    columns = COLUMNS
    output_names = (OUTPUT,)
    target_columns = ()
    supports_pairs = True
    known_metrics = ("spearman", TRIPLETS)
    description = "sentence embedding"
    # The pooling, projection and normalisation run after the encoder: the graph is the traced
    # SentenceEncoder (core/kinds/sentence_module.py), whose output is the sentence vector.
    graph_export = "traced"
    gives = "sentence vectors"
    sentence_vectors = True
    objective = "vectors"
    stages_not_built = {
        "sparsify": "its keep-or-drop check is a classifier's accuracy; export and quantize the model, or distil "
                    "a smaller student, instead",
        "trim-vocab": "a drop-in embedding model must embed any text, and a vocabulary trimmed to one corpus "
                      "splits the words it never saw into pieces; distil a smaller student instead"}
    read_priority = 40  # before the catch-all: a table with sentence1, sentence2 and score
    scored_unit = "sentences"
    cache_identity = ("embedding-v1",)

    def claims_unmarked(self, path, stage: str) -> bool:
        # A sentence-transformers folder as it ships (all-MiniLM-L6-v2: modules.json, no shrinkbert.json)
        # has no classifier head to export: its sentence vectors are what it gives, and pruning it keeps
        # them; a static student as it ships (model2vec's, a StaticEmbedding module) is bundled as one.
        # Only export, prune and bundle: as a teacher of general distillation or a base to fine-tune,
        # the same folder is a plain encoder.
        folder = Path(path)
        return stage in ("export", "prune", "bundle") and (folder / "modules.json").is_file() and not (folder / "shrinkbert.json").is_file()

    # -- the task declaration ---------------------------------------------------------------------
    def check_task(self, task) -> None:
        low, high = score_range(task)
        if not low < high:
            raise ShrinkbertError(f"task '{task.name}': the score range {low:g}..{high:g} is empty")

    def default_metrics(self, label_names) -> tuple[str, ...]:
        return ("spearman",)

    def primary_metric(self, task) -> tuple[str, str]:
        if task.metrics and task.metrics[0] == TRIPLETS:
            return TRIPLETS, "triplet accuracy"
        return "spearman", "Spearman x100"

    def adopt(self, task, splits: dict):
        """Scored pairs as they are; an NLI task (pairs, an entailment label) as entailment pairs: the
        train split's (premise, entailed hypothesis) rows, learned with in-batch negatives, and the
        other splits' (premise, entailed, contradicting) triplets, which judge the epochs. Its task is
        judged by triplet accuracy; its two label names stand for contradicted (0) and entailed (1)."""
        if task.kind == self.name:
            return task, splits
        names = [name.lower() for name in task.label_names]
        if not (task.pair and ENTAILMENT in names):
            raise ShrinkbertError(f"an embedding model trains on scored pairs (sentence1,sentence2,score) or an NLI "
                                  f"task (premise,hypothesis pairs: --text-column premise --text-pair-column "
                                  f"hypothesis, with an entailment label); task '{task.name}' has "
                                  f"{'pairs' if task.pair else 'one text per row'}, labels {', '.join(task.label_names)}")
        def labelled(split):  # a row without a gold label (a hub dataset's -1) is neither entailed nor contradicted
            return split["text"], split["text_pair"], [names[i] if 0 <= i < len(names) else "" for i in split["label"]]

        premises, hypotheses, labels = labelled(splits["train"])
        pairs = [(p, h) for p, h, label in zip(premises, hypotheses, labels) if label == ENTAILMENT]
        if len(pairs) < 2:
            raise ShrinkbertError(f"task '{task.name}' (train split): in-batch negatives need at least 2 entailment "
                                  f"pairs, got {len(pairs)}")
        adopted = {"train": datasets.Dataset.from_dict({"sentence1": [p for p, _ in pairs],
                                                        "sentence2": [h for _, h in pairs]})}
        for name, split in splits.items():
            if name == "train":
                continue
            triplets = nli_triplets(*labelled(split))
            if not triplets:
                raise ShrinkbertError(f"task '{task.name}' ({name} split): no premise has both an entailed and a "
                                      "contradicting hypothesis, so triplet accuracy has nothing to judge")
            adopted[name] = datasets.Dataset.from_dict({column: [t[i] for t in triplets] for i, column in
                                                        enumerate(("sentence1", "sentence2", "negative"))})
        return dataclasses.replace(task, label_names=("0", "1"), pair=True, metrics=(TRIPLETS,), kind=self.name), adopted

    def passes_on(self, task) -> bool:
        return TRIPLETS not in task.metrics  # NLI triplets: an embedding model's later stages score pairs

    def metrics_note(self, report, columns, max_length: int) -> str | None:
        return ("- Metrics: Spearman correlation x100 between the cosine of the two sentences' vectors and the "
                "gold score (MTEB's STS score); each distinct sentence embedded once.")

    # -- reading and checking rows ----------------------------------------------------------------
    def read_user_splits(self, read, where, options):
        tables = {split: table for split, (table, _, _) in read.items()}
        if not all({"sentence1", "sentence2", "score"} <= set(table.column_names) for table in tables.values()):
            return None
        names = options.get("label_names") or DEFAULT_RANGE
        low, high = (float(n) for n in names) if len(names) == 2 else STS_RANGE
        splits = {}
        for split, table in tables.items():
            scores = check_scores(table["score"], f"{where} ({split})", (low, high))
            splits[split] = datasets.Dataset.from_dict(
                {"sentence1": [str(t) for t in table["sentence1"]], "sentence2": [str(t) for t in table["sentence2"]],
                 "score": [float(s) for s in scores]})
        return {"label_names": (f"{low:g}", f"{high:g}"), "metrics": ("spearman",), "pair": True}, splits

    def label_features(self, features, task):
        features["score"] = datasets.Value("float64")
        return features

    def rows(self, split, task) -> list[dict[str, Any]]:
        return [{"sentence1": a, "sentence2": b, "score": s}
                for a, b, s in zip(split["sentence1"], split["sentence2"], split["score"])]

    def example_rows(self, sentences: Sequence[str]) -> list[dict[str, Any]]:
        return [{"sentence1": text, "sentence2": None, "score": None} for text in sentences]

    def test_rows(self, split, task) -> dict[str, Any]:
        return {"texts": [str(t) for t in split["sentence1"]], "pairs": [str(t) for t in split["sentence2"]],
                "labels": [float(s) for s in split["score"]]}

    def check_test_rows(self, task, texts, labels, pairs, words) -> None:
        if pairs is None:
            raise ShrinkbertError(f"task '{task.name}' scores sentence pairs: its test rows need a second sentence")
        low, high = score_range(task)
        outside = [s for s in labels if not low <= float(s) <= high]
        if outside:
            raise ShrinkbertError(f"task '{task.name}': score {outside[0]} is outside {low:g}..{high:g}")

    def texts(self, split) -> list:
        return list(split["sentence1"]) + list(split["sentence2"])

    # -- encoding ---------------------------------------------------------------------------------
    @staticmethod
    def sentences(rows: Sequence[dict[str, Any]]) -> list[str]:
        """The texts scored rows are made of: every first sentence, then every second one (if any)."""
        second = [r["sentence2"] for r in rows if r.get("sentence2") is not None]
        if second and len(second) != len(rows):
            raise ShrinkbertError("embedding rows: some have a second sentence and some do not")
        return [r["sentence1"] for r in rows] + second

    def tokenize(self, dataset, tokenizer, task, max_length: int = 128, label_all_subtokens: bool = False):
        """Each row's sentences tokenized apart (the second as pair_input_ids, ..., a triplet's third as
        negative_input_ids, ...; SentenceEncoder embeds them all in one forward). A scored pair's score
        becomes "labels", scaled from the task's range to 0..1 (sentence-transformers'
        CosineSimilarityLoss target); entailment pairs and triplets have none."""

        if not isinstance(dataset, datasets.Dataset):  # a DatasetDict: pairs and triplets differ by split
            return datasets.DatasetDict({name: self.tokenize(split, tokenizer, task, max_length)
                                         for name, split in dataset.items()})
        low, high = score_range(task)
        sides = [(column, prefix) for column, prefix in (("sentence1", ""), ("sentence2", "pair_"), ("negative", "negative_"))
                 if column in dataset.column_names]

        def encode(batch):
            out = {}
            for column, prefix in sides:
                encoded = tokenizer(batch[column], truncation=True, max_length=max_length, return_token_type_ids=True)
                out.update({f"{prefix}{key}": value for key, value in encoded.items()})
            if "score" in batch:
                out["labels"] = [(float(score) - low) / (high - low) for score in batch["score"]]
            return out

        with quiet_datasets():
            return dataset.map(encode, batched=True, remove_columns=dataset.column_names)

    def encode(self, tokenizer, rows, max_length: int = 128, padding: Any = True, return_tensors: str | None = "np"):
        return tokenizer(self.sentences(rows), truncation=True, max_length=max_length, padding=padding,
                         return_token_type_ids=True, return_tensors=return_tensors)

    # -- models and outputs -----------------------------------------------------------------------
    def load_torch(self, path, eager: bool = False):
        """(a SentenceEncoder, its tokenizer): the folder's encoder, pooling, projection and normalisation
        as one module whose output is the sentence vector (eager: the encoder's eager attention)."""
        from shrinkbert.core.kinds.embedder import Embedder
        from shrinkbert.core.kinds.sentence_module import SentenceEncoder  # deferred: torch

        if (Path(path) / "modules.json").is_file() and not (Path(path) / "config.json").is_file():
            raise ShrinkbertError(f"{path} holds no transformer (a static student is a lookup table: nothing to "
                                  "export or prune); bundle it directly (shrinkbert bundle --model ...)")
        embedder = Embedder.load(path, eager=eager)
        return SentenceEncoder(embedder).eval(), embedder.tokenizer

    def graph_files(self, source) -> list[str]:
        """The sentence-transformers files beside the graph: modules.json and its module folders, which
        readers of the folder (OnnxEmbedder, the bundle) take the pooling and dimension from."""
        from shrinkbert.core.kinds.embedder import module_folders

        return ["config.json", "modules.json", "sentence_bert_config.json", *module_folders(Path(source))]

    def outputs(self, model_output, batch: dict) -> dict[str, Any]:
        """{"sentence_embedding": mean-pooled, normalised} of a transformers encoder's forward."""
        import torch.nn.functional as F

        from shrinkbert.core.kinds.embedder import pool

        vectors = getattr(model_output, OUTPUT, None)
        if vectors is None:
            vectors = pool(model_output.last_hidden_state, batch["attention_mask"], "mean")
        return {OUTPUT: F.normalize(vectors, p=2, dim=-1)}

    def model_for_task(self, path, task):
        """A SentenceEncoder of the folder (a sentence-transformers one, or a plain encoder read as mean
        pooling and normalisation): scored pairs train the vectors, there is no head to size."""
        return self.load_torch(path)[0]

    def train_step_loss(self, model_output, batch: dict):
        """CosineSimilarityLoss on a scored-pairs batch (`hard_loss`); on entailment pairs (no scores),
        each premise's hypothesis against the batch's other hypotheses (`in_batch_negatives_loss`,
        MultipleNegativesRankingLoss's form and scale). Nothing else is logged beside it."""
        if "labels" in batch:
            return self.hard_loss(self.outputs(model_output, batch), batch), {}
        from shrinkbert.core.kinds.losses import in_batch_negatives_loss  # deferred: torch

        vectors = self.outputs(model_output, batch)[OUTPUT]
        rows = batch["input_ids"].shape[0]
        return in_batch_negatives_loss(vectors[:rows], vectors[rows:], NEIGHBOUR_SCALE), {}

    def pack_outputs(self, outputs):
        return outputs[OUTPUT]

    def unpack_outputs(self, packed):
        return {OUTPUT: packed}

    def importance_loss(self, model_output, batch: dict, labels: list):
        """Pruning ranks heads and neurons by how much removing them would blur which sentence is which
        (`neighbour_loss` on the mean-pooled vectors): no labels, and the ranking is about the index."""
        vectors = getattr(model_output, OUTPUT, None)  # a SentenceEncoder's: pooled and projected as declared
        if vectors is None:
            from shrinkbert.core.kinds.embedder import pool

            vectors = pool(model_output.last_hidden_state, batch["attention_mask"], "mean")
        return neighbour_loss(vectors)

    def kd_loss(self, student, teacher, batch, temperature):
        """MSE plus (1 - cosine) to the teacher's vectors (core/kinds/losses.py)."""
        from shrinkbert.core.kinds.losses import mse_cosine_loss  # deferred: torch

        return mse_cosine_loss(student[OUTPUT], teacher[OUTPUT])

    def hard_loss(self, student, batch):
        """sentence-transformers' CosineSimilarityLoss on a batch of pairs: the vectors of the n first
        sentences then the n second ones, batch["labels"] the gold scores scaled to 0..1."""
        import torch.nn.functional as F

        vectors = student[OUTPUT]
        half = vectors.shape[0] // 2
        cosine = F.cosine_similarity(vectors[:half], vectors[half:], dim=-1)
        return F.mse_loss(cosine, batch["labels"].to(cosine.dtype))

    def output_array(self, outputs: dict[str, Any]) -> np.ndarray:
        if OUTPUT in outputs:
            return np.asarray(outputs[OUTPUT])
        if "last_hidden_state" in outputs:
            return np.asarray(outputs["last_hidden_state"])
        raise ShrinkbertError(f"the model gives {sorted(outputs)}: an embedding model gives {OUTPUT} or token vectors")

    def scored_logits(self, logits, batch, rows=None) -> np.ndarray:
        array = np.asarray(logits)
        if array.ndim == 3:
            array = mean_pool(array, batch["attention_mask"])
        if array.ndim != 2:
            raise ShrinkbertError(f"an embedding model's output has shape {array.shape}: expected [n, dim] "
                                  "sentence vectors or [n, seq, hidden] token vectors")
        array = normalize_rows(array)
        if rows is not None and len(array) == 2 * len(rows):  # `encode`'s firsts then seconds: pair by pair
            array = np.stack([array[:len(rows)], array[len(rows):]], axis=1).reshape(array.shape)
        return array

    def gold_labels(self, rows, task, id2label, tokenizer=None, max_length: int = 128) -> list:
        return PairScores(r.get("score") for r in rows)

    def predictions(self, scored: np.ndarray) -> np.ndarray:
        """A sentence's "prediction" is its vector (parity compares them, not labels)."""
        return np.asarray(scored)

    def int8_checks(self, task, fp32, int8, labels, tolerance: float) -> list[dict[str, Any]]:
        """int8 must keep the vectors' directions (mean cosine to fp32's) and, on scored pairs, the
        validation Spearman within `tolerance` points: an index built with one is searched with the other."""
        from shrinkbert.core.artifacts import check

        agreement = float(np.mean(np.sum(normalize_rows(fp32) * normalize_rows(int8), axis=1)))
        checks = [check("int8_agreement", agreement >= MIN_INT8_AGREEMENT,
                        f"mean cosine of int8 and fp32 vectors {agreement:.4f} on {len(fp32)} sentences "
                        f"(at least {MIN_INT8_AGREEMENT})")]
        if labels and all(label is not None for label in labels):
            before, after = (self.score(task, scored, labels)["spearman"] for scored in (fp32, int8))
            checks.append(check("spearman_drop", before - after <= tolerance,
                                f"validation Spearman {before:.2f} -> {after:.2f} on {len(labels)} pairs "
                                f"(tolerance {tolerance:g} points)"))
        return checks

    # -- metrics ----------------------------------------------------------------------------------
    def score(self, task, scored, labels) -> dict[str, float | None]:
        from shrinkbert.core.kinds.sts import cosine_rows, spearman_x100  # deferred: scipy

        if not labels or any(label is None for label in labels):
            return {"spearman": None}
        scored = np.asarray(scored)
        if len(scored) != 2 * len(labels):
            raise ShrinkbertError(f"{len(scored)} sentence vectors for {len(labels)} scored pairs (expected "
                                  f"{2 * len(labels)})")
        return {"spearman": spearman_x100(cosine_rows(scored[0::2], scored[1::2]), [float(s) for s in labels])}

    def score_split(self, model, dataset, collate, task, batch_size: int = 64) -> dict[str, float]:
        """Of a PyTorch model on a tokenized split (`tokenize`): scored pairs, Spearman x100 of each
        pair's cosine with its score and the CosineSimilarityLoss ("loss"); NLI triplets, the triplet
        accuracy."""
        import torch

        from shrinkbert.core.predict import model_inputs
        from shrinkbert.core.kinds.sts import cosine_rows, spearman_x100

        device = next(model.parameters()).device
        was_training = model.training
        model.eval()
        sides = 3 if "negative_input_ids" in dataset.column_names else 2
        parts, gold = [], []
        with torch.no_grad():
            for start in range(0, len(dataset), batch_size):
                batch = collate([dataset[i] for i in range(start, min(start + batch_size, len(dataset)))])
                vectors = model(**{k: v.to(device) for k, v in model_inputs(model, batch).items()})
                parts.append(np.split(getattr(vectors, OUTPUT).float().cpu().numpy(), sides))
                if "labels" in batch:
                    gold.append(batch["labels"].float().numpy())
        model.train(was_training)
        first, second, *third = (np.concatenate(side) for side in zip(*parts))
        if third:
            return {TRIPLETS: triplet_accuracy(first, second, third[0])}
        cosine, gold = cosine_rows(first, second), np.concatenate(gold)
        return {"spearman": spearman_x100(cosine, gold), "loss": float(np.mean((cosine - gold) ** 2))}

    def score_runner(self, runner, rows, columns, batch_size: int, max_length: int) -> dict[str, Any]:
        """Spearman of an eval runner's vectors: each distinct sentence embedded once, in batches."""
        from shrinkbert.core.kinds.sts import cosine_rows, spearman_x100

        sentences = list(dict.fromkeys(list(rows.texts) + list(rows.pairs)))
        chunks = []
        for start in range(0, len(sentences), batch_size):
            chunks.append(normalize_rows(np.asarray(runner.embed(sentences[start:start + batch_size], max_length))))
        vectors = np.concatenate(chunks)
        where = {text: row for row, text in enumerate(sentences)}
        cosine = cosine_rows(vectors[[where[t] for t in rows.texts]], vectors[[where[t] for t in rows.pairs]])
        spearman = spearman_x100(cosine, [float(s) for s in rows.labels])
        return {"metrics": {"spearman": spearman}, "n": len(rows.texts), "predictions": cosine.tolist(),
                "sentences": len(sentences)}


def gold_ranks(queries: np.ndarray, index: np.ndarray, gold: np.ndarray) -> np.ndarray:
    """Each query's gold row's rank (1 = best) among the index rows by cosine (vectors unit length)."""
    scores = np.asarray(queries, np.float32) @ np.asarray(index, np.float32).T
    gold_scores = scores[np.arange(len(gold)), gold]
    return 1 + (scores > gold_scores[:, None]).sum(axis=1)
