"""Distil a sentence-embedding student on unlabelled text: a smaller transformer whose sentence vectors
match its teacher's, so an index built with the teacher still answers the student's queries.

    from shrinkbert.students.embedding_distill import EmbeddingStudentConfig, distill_embedding
    distill_embedding("minilm", sentences, "runs/emb-3L", EmbeddingStudentConfig(layers=3, intermediate=768))

- The student is a base model of the teacher's family (core/families) and the chosen shape, initialised from the teacher (students/init.py:
  uniform layers, the FFN neurons and heads of largest norm; a narrower stream on the PCA basis of
  the teacher's word-embedding table) and pooled as the teacher pools.
- Loss, per batch of sentences: MSE between the student's and the teacher's sentence vectors before
  normalisation (sentence-transformers' distillation loss) plus a cosine term (only directions matter
  to a normalised index); the weighted terms `terms` (students/objectives/vectors.py: the in-batch
  similarity matrices, ranking a bank of the teacher's vectors); with `hidden_weight` and the teacher's
  width, also the hidden-state MSE of students/losses.py on the uniform layer map (that runs the
  teacher live, every batch).
- The teacher's vectors are computed once per (teacher, max_length, sentences) and cached as .npy
  under the cache directory, keyed by content like students/cache.py keys the teacher's logits.
- A narrower student keeps the teacher's vector space: a linear projection (sentence-transformers'
  Dense module, saved in the folder and traced into the ONNX graph) from its width to the teacher's,
  initialised with the transpose of the PCA basis the student's stream was sliced on (the student
  starts as the teacher seen through that basis, so the map back is its transpose), then trained.
  With `dim` the student has a dimension of its own: the target is the teacher's vectors on their
  top `dim` principal components (fitted on the training sentences), and the projection starts as
  those components composed with the stream basis.
- Or the student is a model given as it is (`student_path`): a pruned one (recovery), or a pretrained
  embedding model whose tokenizer splits text into the teacher's pieces (all-MiniLM-L6-v2 for
  all-mpnet-base-v2), re-indexed to the teacher's ids (students/vocab_map.py) and, where narrower,
  given a projection into the teacher's space fitted by ridge least squares on the training sentences.
- The teacher runs on the GPU where there is one (its vectors of a large corpus are most of the work).
- With `validation` (scored pairs), the epoch whose STS Spearman is best there is the one kept.
- Training runs in the kit's one loop (core/train.py): Accelerate (one CPU, GPUs, several processes),
  AdamW with warmup then linear decay, length-grouped batches, checkpoints and exact resume after a
  kill; the stage (`shrinkbert distill --objective vectors`) passes its training-loop options through.

The result is a sentence-transformers folder (Transformer -> Pooling (-> Dense) -> Normalize) whose
shrinkbert.json says kind "embedding"; `SentenceTransformer(path)` loads it.
"""
from __future__ import annotations

import hashlib
import json
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import torch

from shrinkbert.core.artifacts import atomic_artifact, check, write_manifest
from shrinkbert.core.configs import TrainConfig
from shrinkbert.core.builtin import resolve_model
from shrinkbert.core.cache import default_cache_dir
from shrinkbert.core.kinds.embedder import Embedder, write_st_layout
from shrinkbert.core.errors import ShrinkbertError
from shrinkbert.core.kinds.embedding import agreement, normalize_rows
from shrinkbert.core.kinds.losses import mse_cosine_loss
from shrinkbert.core.train import checkpoint_dir_for, is_main_process, remove_checkpoints, wait_for_everyone
from shrinkbert.students.cache import teacher_identity, text_fingerprint
from shrinkbert.students.init import init_from_teacher, stream_basis
from shrinkbert.students.processes import process_state
from shrinkbert.students.losses import masked_mse
from shrinkbert.students.shape import Shape, shape_config

KIND = "embedding"


@dataclass
class EmbeddingStudentConfig:
    layers: int = 3
    hidden: int | None = None        # None: the teacher's
    heads: int | None = None         # None: hidden / the teacher's head size
    intermediate: int | None = None  # None: the teacher's FFN, scaled with the hidden size
    dim: int | None = None           # the student's own output dimension (None: the teacher's space)
    epochs: int = 3
    lr: float = 1e-4
    batch_size: int = 32
    max_length: int = 128
    mse_weight: float = 1.0
    cosine_weight: float = 1.0
    hidden_weight: float = 0.0
    keep_by: str = "validation+agreement"  # what picks the epoch kept (`selection_score`); or "validation"
    warmup: float = 0.1
    seed: int = 0


def student_shape(teacher_config, config: EmbeddingStudentConfig) -> Shape:
    hidden = config.hidden or teacher_config.hidden_size
    head_size = teacher_config.hidden_size // teacher_config.num_attention_heads
    heads = config.heads or max(1, hidden // head_size)
    intermediate = config.intermediate or teacher_config.intermediate_size * hidden // teacher_config.hidden_size
    if hidden % heads:
        raise ShrinkbertError(f"the student's hidden size {hidden} is not a multiple of its {heads} heads")
    return Shape(config.layers, hidden, heads, intermediate)


TEACHER_SHARD = 4096  # rows per saved shard of the teacher's vectors: a killed pass resumes at the last one


def teacher_precision(loop: TrainConfig | None, teacher: Embedder) -> str:
    """What the teacher's pass over the text runs in: --mixed-precision resolved for the teacher's width
    (core/train.py: bf16 autocast for a base-sized teacher on a CPU that computes in bf16, else fp32)."""
    from shrinkbert.core.train import resolve_mixed_precision

    return resolve_mixed_precision(loop.mixed_precision if loop is not None else "no",
                                   width=teacher.model.config.hidden_size)


def teacher_vectors(teacher: Embedder, teacher_path: str | Path, sentences: list[str],
                    cache_dir: str | Path | None = None, stats: dict | None = None,
                    precision: str = "no") -> np.ndarray:
    """The teacher's sentence vectors before normalisation, cached by (teacher, max_length, sentences,
    and the autocast `precision` where it is not "no": "bf16" or "fp16").
    Computed in shards of TEACHER_SHARD rows, each saved as it is done (`<key>.parts/`), so a pass
    that is killed resumes where it stopped; the shards become one `<key>.npy` once all are done.
    stats: filled with the rows computed now, their seconds and rows/s (nothing when all were cached)."""
    identity = {"v": 2, "teacher": teacher_identity(teacher_path), "max_length": teacher.max_length,
                "text": text_fingerprint(sentences)}
    if precision != "no":  # fp32 vectors keep their keys, autocast ones are told apart
        identity["precision"] = precision
    key = hashlib.sha256(json.dumps(identity).encode()).hexdigest()[:24]
    path = Path(cache_dir or default_cache_dir()) / "embedding-teacher" / f"{key}.npy"
    if path.is_file():
        return np.load(path, allow_pickle=False)
    parts = path.with_suffix(".parts")
    parts.mkdir(parents=True, exist_ok=True)
    shards, computed, started = [], 0, time.perf_counter()
    autocast_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)
    starts = range(0, len(sentences), TEACHER_SHARD)
    for number, start in enumerate(starts):
        shard = parts / f"{number:06d}.npy"
        if shard.is_file():
            shards.append(np.load(shard, allow_pickle=False))
            continue
        rows = sentences[start:start + TEACHER_SHARD]
        with torch.autocast(teacher.device.type, dtype=autocast_dtype, enabled=autocast_dtype is not None):
            shards.append(teacher.encode(rows, normalize=False, desc=f"teacher vectors {number + 1}/{len(starts)}"))
        computed += len(rows)
        tmp = shard.with_suffix(".tmp.npy")
        np.save(tmp, shards[-1])
        tmp.replace(shard)  # a shard on disk is whole
    seconds = time.perf_counter() - started
    if stats is not None and computed:
        stats.update({"rows": computed, "seconds": round(seconds, 1), "rows_per_s": round(computed / seconds, 1),
                      "precision": precision})
    vectors = np.concatenate(shards) if shards else np.zeros((0, teacher.dim), np.float32)
    tmp = path.with_suffix(".tmp.npy")
    np.save(tmp, vectors)
    tmp.replace(path)
    shutil.rmtree(parts, ignore_errors=True)
    return vectors


def pull_towards(vectors: np.ndarray, goals: np.ndarray, weight: float) -> np.ndarray:
    """Each row's direction moved `weight` of the way to its goal's (both as unit vectors), at the
    row's own length: a question's target between the teacher's vector of the question (weight 0)
    and that of its gold paragraph (weight 1)."""
    lengths = np.linalg.norm(vectors, axis=1, keepdims=True)
    blended = (1 - weight) * normalize_rows(vectors) + weight * normalize_rows(goals)
    return (normalize_rows(blended) * lengths).astype(vectors.dtype)


def pulled_targets(teacher: Embedder, teacher_path, vectors: np.ndarray, goals: list[str | None], weight: float,
                   cache_dir=None) -> tuple[np.ndarray, int]:
    """The targets with every sentence that has a goal text pulled towards the teacher's vector of it
    (`pull_towards`); (targets, how many were pulled)."""
    rows = [i for i, goal in enumerate(goals) if goal]
    if not rows or not weight:
        return vectors, 0
    distinct = list(dict.fromkeys(goals[i] for i in rows))
    goal_vectors = teacher_vectors(teacher, teacher_path, distinct, cache_dir)
    where = {text: i for i, text in enumerate(distinct)}
    targets = vectors.copy()
    targets[rows] = pull_towards(vectors[rows], goal_vectors[[where[goals[i]] for i in rows]], weight)
    return targets, len(rows)


def build_student(teacher: Embedder, config: EmbeddingStudentConfig, targets: np.ndarray) -> tuple[Embedder, np.ndarray | None, dict]:
    """A student Embedder initialised from the teacher, with its projection where it needs one;
    also the PCA components its targets are taken on (`dim`), or None (the teacher's space)."""
    from transformers import AutoModel

    shape = student_shape(teacher.model.config, config)
    device = teacher.device  # built beside the teacher it is sliced from
    student_model = AutoModel.from_config(shape_config(teacher.model.config, shape)).to(device)
    if getattr(student_model, "pooler", None) is not None:  # sentence vectors are pooled here, not by BERT's pooler
        student_model.pooler = None
    narrower = shape.hidden < teacher.model.config.hidden_size
    record = init_from_teacher(student_model, teacher.model, embeddings="pca" if narrower else "columns")
    record["shape"] = str(shape)
    out_dim = teacher.dim
    components = None
    if config.dim:
        if not 1 <= config.dim <= teacher.dim:
            raise ShrinkbertError(f"--dim {config.dim} must lie between 1 and the teacher's {teacher.dim}")
        if config.dim > len(targets):
            raise ShrinkbertError(f"--dim {config.dim} exceeds the {len(targets)} training sentences "
                                  "its principal components are fitted on")
        centred = targets.astype(np.float64) - targets.mean(axis=0)
        components = np.linalg.svd(centred, full_matrices=False)[2][:config.dim].astype(np.float32)
        out_dim = config.dim
    dense = None
    if narrower or components is not None or teacher.dense is not None:
        # the student's stream is (about) the teacher's on `basis`: the map back is its transpose
        basis = stream_basis(teacher.model, shape.hidden, embeddings="pca" if narrower else "columns")
        weight = basis.float()  # [teacher hidden, student hidden]
        if teacher.dense is not None:
            weight = teacher.dense.weight.detach() @ weight
        if components is not None:
            weight = torch.from_numpy(components).to(device) @ weight
        dense = torch.nn.Linear(shape.hidden, out_dim, bias=True).to(device)
        with torch.no_grad():
            dense.weight.copy_(weight)
            dense.bias.zero_()
        record["projection"] = {"in": shape.hidden, "out": out_dim,
                                "init": "PCA basis transposed" + (" then the teacher's top principal components"
                                                                  if components is not None else "")}
    student = Embedder(student_model, teacher.tokenizer, teacher.spec, teacher.max_length, dense)
    return student, components, record




def _trainable(student: Embedder) -> torch.nn.ModuleList:
    return torch.nn.ModuleList([student.model] + ([student.dense] if student.dense is not None else []))


def loop_config(config: EmbeddingStudentConfig) -> TrainConfig:
    """The training loop's settings for a call that names only EmbeddingStudentConfig's (the Python
    API, bench/): its learning rate, epochs, batch, warmup and seed; no checkpoints."""
    return TrainConfig(learning_rate=config.lr, epochs=config.epochs, batch_size=config.batch_size,
                       warmup_ratio=config.warmup, seed=config.seed, checkpoint_every=0, log_every=1)


@dataclass
class Judge:
    """What picks the epoch kept: `measure(encode)` gives the measures of the student (its `encode`) at
    an epoch's end (and untrained, epoch 0), `score` ranks them (higher is kept), `text` logs them and
    `rule` names the rule in the manifest."""
    measure: Callable[[Callable], dict]
    score: Callable[[dict], float]
    text: Callable[[dict], str]
    rule: str


def sts_judge(validation, unseen: tuple[list[str], np.ndarray] | None = None, keep_by: str = "validation+agreement") -> Judge:
    """The epoch kept by `selection_score`: STS validation Spearman of the scored pairs `validation`,
    plus the agreement with the teacher on `unseen` (lines never trained on, and the teacher's vectors
    of them) where the student shares the teacher's space."""
    from shrinkbert.core.kinds.sts import sts_spearman

    def measure(encode) -> dict:
        found = {"validation_spearman": sts_spearman(encode, validation)}
        if unseen is not None:
            found["unseen_agreement"] = agreement(encode(unseen[0]), unseen[1])
        return found
    rule = SELECTION if unseen is not None and keep_by == KEEP_BY[0] else "STS validation Spearman"
    return Judge(measure, lambda found: selection_score(found, keep_by), measures_text, rule)


def train_student(student: Embedder, teacher: Embedder, sentences: list[str], targets: np.ndarray,
                  config: EmbeddingStudentConfig, validation=None, log=print, loop: TrainConfig | None = None,
                  checkpoint_dir: str | Path | None = None, unseen: tuple[list[str], np.ndarray] | None = None,
                  terms: dict | None = None, judge: Judge | None = None) -> dict:
    """Distil in place through the kit's one training loop (core/train.py: Accelerate, checkpoints
    every `loop.checkpoint_every` steps, exact resume); returns the training record (losses per
    epoch, the epoch kept, its measures). With a `judge` (or `validation`: `sts_judge(validation,
    unseen, config.keep_by)`), the best epoch's weights are kept in `checkpoint_dir/best`, beside the
    checkpoints, so a resumed run keeps them too.
    terms: {weight name: (weight, term factory)} added to the loss (students/objectives/vectors.py);
    a term is called with the student's vectors and the batch (its "target" rows and their "row" numbers)."""
    import tempfile

    from datasets import Dataset
    from safetensors.torch import load_file, save_file
    from transformers import DataCollatorWithPadding

    from shrinkbert.core.kinds.embedder import pool
    from shrinkbert.core.train import LATEST, epoch_losses, train

    loop = loop or loop_config(config)
    if judge is None and validation is not None:
        judge = sts_judge(validation, unseen, config.keep_by)
    encoded = teacher.tokenizer(sentences, truncation=True, max_length=config.max_length)
    inputs = [name for name in ("input_ids", "attention_mask", "token_type_ids") if name in encoded]
    # the targets stay one array, gathered by row number: a 768-float list per row through the
    # Dataset cost more per batch than the student's step on a GPU
    goals = np.ascontiguousarray(targets, np.float32)
    rows = Dataset.from_dict({**{name: encoded[name] for name in inputs}, "row": np.arange(len(goals))})
    hidden_loss = config.hidden_weight > 0 and student.model.config.hidden_size == teacher.model.config.hidden_size
    t_layers, s_layers = teacher.model.config.num_hidden_layers, student.model.config.num_hidden_layers
    layer_map = {s + 1: int((s + 1) * t_layers / s_layers + 0.5) for s in range(s_layers)}
    modules = _trainable(student)
    weighted = [(name.removesuffix("_weight"), weight, factory(goals, config.seed))
                for name, (weight, factory) in (terms or {}).items() if weight > 0]

    pad = DataCollatorWithPadding(teacher.tokenizer, return_tensors="pt")

    def collate(batch: list[dict]) -> dict:
        numbers = [row.pop("row") for row in batch]
        return {**pad(batch), "target": torch.from_numpy(goals[numbers]), "row": torch.tensor(numbers)}

    def loss_fn(trained, batch):
        model_inputs = {name: batch[name] for name in inputs}
        out = trained[0](**model_inputs, output_hidden_states=hidden_loss)
        vectors = pool(out.last_hidden_state, batch["attention_mask"], student.spec.mode)
        if len(trained) > 1:
            vectors = trained[1](vectors)
        loss = mse_cosine_loss(vectors, batch["target"], config.mse_weight, config.cosine_weight)
        logged = {}
        for name, weight, term in weighted:
            value = term(vectors, batch)
            loss = loss + weight * value
            logged[f"{name}_loss"] = float(value.detach())
        if not hidden_loss:
            return loss, logged
        with torch.no_grad():
            t_hidden = teacher.model(**model_inputs, output_hidden_states=True).hidden_states
        mask = batch["attention_mask"].bool()
        loss_hidden = sum(masked_mse(out.hidden_states[s], t_hidden[t], mask) for s, t in layer_map.items()) / len(layer_map)
        return loss + config.hidden_weight * loss_hidden, {**logged, "hidden_loss": float(loss_hidden.detach())}

    with tempfile.TemporaryDirectory() as scratch:
        checkpoints = Path(checkpoint_dir) if checkpoint_dir is not None else Path(scratch)
        best_dir = checkpoints / "best"
        fresh = not loop.resume or not (checkpoints / "run" / LATEST).is_file()

        def keep_if_best(score: float, found: dict | None = None) -> None:
            saved = best_dir / "score.json"
            if (not saved.is_file() or score > json.loads(saved.read_text())["score"]) and is_main_process():
                best_dir.mkdir(parents=True, exist_ok=True)
                save_file({k: v.contiguous() for k, v in modules.state_dict().items()}, str(best_dir / "weights.safetensors"))
                saved.write_text(json.dumps({"score": score, **(found or {})}))

        def eval_fn(_trained) -> dict:
            found = judge.measure(student.encode)
            keep_if_best(judge.score(found), {"measures": found})
            return found

        if judge is not None and fresh:  # the teacher-initialised student is a candidate too (epoch 0)
            shutil.rmtree(best_dir, ignore_errors=True)
            modules.eval()
            untrained = judge.measure(student.encode)
            keep_if_best(judge.score(untrained), {"measures": untrained})
            log(f"  epoch 0: {judge.text(untrained)}")
        metrics = train(modules, rows, collate, loss_fn, loop, checkpoints / "run",
                        eval_fn=eval_fn if judge is not None else None, desc="distill embeddings",
                        frozen_modules=[teacher.model] if hidden_loss else ())
        evals = [h for h in metrics["history"] if h["kind"] == "eval"]
        measured = [{name: value for name, value in entry.items() if name not in ("kind", "step", "epoch")}
                    for entry in evals]
        record = {"hidden_loss": hidden_loss, "steps": metrics["steps"], "train_time_s": metrics["train_time_s"],
                  "mixed_precision": metrics.get("mixed_precision"),
                  "epochs": [{"epoch": epoch + 1, "loss": loss, **(measured[epoch] if epoch < len(measured) else {})}
                             for epoch, loss in enumerate(epoch_losses(metrics))]}
        for epoch, entry in enumerate(record["epochs"]):
            log(f"  epoch {entry['epoch']}: loss {entry['loss']:.4f}"
                + (f", {judge.text(measured[epoch])}" if epoch < len(measured) else ""))
        if judge is not None:
            wait_for_everyone()  # the main process wrote the kept weights
            modules.load_state_dict(load_file(str(best_dir / "weights.safetensors")))
            saved = json.loads((best_dir / "score.json").read_text())
            chosen = next((epoch for epoch in range(len(measured)) if judge.score(measured[epoch]) == saved["score"]), None)
            record["epoch_kept"] = chosen + 1 if chosen is not None else 0  # 0: the teacher-initialised student
            record["kept_by"] = judge.rule
            record["kept_measures"] = saved["measures"]
            record.update(saved["measures"])
    modules.eval()
    return record


SELECTION = "STS validation Spearman + 100 x mean cosine with the teacher on unseen corpus lines"


KEEP_BY = ("validation+agreement", "validation")


def selection_score(found: dict, keep_by: str = KEEP_BY[0]) -> float:
    """What an epoch is kept by: the STS validation Spearman (x100), plus (keep_by
    "validation+agreement", the default) 100 x the mean cosine with the teacher's vectors of lines
    never trained on where measured, so an epoch that gains on STS-B by drifting from the teacher on
    other text is not kept for it. keep_by "validation": the Spearman alone, for a student meant to
    rank pairs as the teacher does rather than to share its coordinates (a similarity-weighted loss
    gives up agreement on purpose, and the sum would keep the untrained start)."""
    if keep_by not in KEEP_BY:
        raise ShrinkbertError(f"keep_by {keep_by!r}: one of {', '.join(KEEP_BY)}")
    agreement = found.get("unseen_agreement", 0.0) if keep_by == KEEP_BY[0] else 0.0
    return found["validation_spearman"] + 100 * agreement


def measures_text(found: dict) -> str:
    return f"STS validation {found['validation_spearman']:.2f}" + (
        f", agreement on unseen lines {found['unseen_agreement']:.4f}" if "unseen_agreement" in found else "")


def _pooled(student: Embedder, hidden, attention_mask):
    from shrinkbert.core.kinds.embedder import pool

    vectors = pool(hidden, attention_mask, student.spec.mode)
    return student.dense(vectors) if student.dense is not None else vectors


def save_student(student: Embedder, out_dir: str | Path, *, stage: str, parents, config: dict, metrics: dict,
                 seed: int | None = None, checks=None, extra=None, data: dict | None = None) -> Path:
    """The student as a sentence-transformers folder with a shrinkbert.json of kind embedding (atomically)."""
    with atomic_artifact(out_dir) as tmp:
        student.model.save_pretrained(tmp, safe_serialization=True)
        student.tokenizer.save_pretrained(tmp)
        write_st_layout(tmp, student.spec, student.model.config.hidden_size, student.max_length, dense=student.dense)
        write_manifest(tmp, stage=stage, parents=parents, config=config, metrics=metrics, seed=seed,
                       resolved={"max_length": student.max_length},
                       num_parameters=sum(p.numel() for p in _trainable(student).parameters()), checks=checks, data=data,
                       extra={"kind": KIND, "dim": student.dim, **(extra or {})})
    return Path(out_dir)


def existing_student(path: str | Path, teacher: Embedder, max_length: int, sentences: list[str],
                     vectors: np.ndarray) -> tuple[Embedder, dict]:
    """An embedding model to distil into, as it is: a pruned one (recovery), or a pretrained one that
    splits text into the teacher's pieces (all-MiniLM-L6-v2 for all-mpnet-base-v2). Its word embeddings
    are re-ordered to the teacher's ids where the two number their tokens differently (students/vocab_map.py),
    and where its vectors are narrower than the teacher's it gets a projection into the teacher's space,
    initialised by (ridge) least squares from its vectors of the training sentences to the teacher's (`vectors`);
    (the student, the record of what was done to it)."""
    from shrinkbert.students.vocab_map import VOCABULARY_SAMPLE, adopt_vocabulary, same_vocabulary

    student = Embedder.load(path, max_length=max_length).to(teacher.device)
    record: dict = {"from": str(path), "shape": "its own"}
    if not same_vocabulary(student.tokenizer, teacher.tokenizer):
        record["tokens"] = adopt_vocabulary(student.model, student.tokenizer, teacher.tokenizer,
                                            teacher.model.config.vocab_size, sentences[:VOCABULARY_SAMPLE],
                                            name=f"--student {path}")
        student.model.to(teacher.device)  # the re-indexed table is new, made on the CPU
        student.tokenizer = teacher.tokenizer
    if student.dim != teacher.dim:
        if student.dense is not None or student.dim > teacher.dim:
            raise ShrinkbertError(f"--student {path} gives {student.dim}-dimensional vectors and the teacher "
                                  f"{teacher.dim}: distilling into a model needs the teacher's dimension, or a "
                                  "narrower one without a projection of its own (it is given one)")
        student.dense, record["projection"] = least_squares_projection(student, sentences, vectors, teacher.dim)
    return student, record


PROJECTION_SENTENCES = 20_000  # training sentences the projection's least squares is fitted on
RIDGE = 1e-3


def least_squares_projection(student: Embedder, sentences: list[str], vectors: np.ndarray,
                             out_dim: int) -> tuple[torch.nn.Linear, dict]:
    """A Linear from the student's pooled vectors to the teacher's (`vectors` of `sentences`, before
    normalisation), fitted by least squares on up to PROJECTION_SENTENCES of them: the student starts
    as near the teacher's space as a linear map takes it, then trains end to end."""
    rows = min(len(sentences), PROJECTION_SENTENCES)
    pooled = student.encode(sentences[:rows], normalize=False).astype(np.float64)
    design = np.hstack([pooled, np.ones((rows, 1))])
    # ridge, RIDGE of the mean diagonal: few sentences (a quick run) must not give a map that interpolates them
    gram = design.T @ design
    gram[np.diag_indices_from(gram)] += RIDGE * np.trace(gram) / len(gram)
    solution = np.linalg.solve(gram, design.T @ vectors[:rows].astype(np.float64))
    fitted = design @ solution
    cosine = float(np.mean(np.sum(normalize_rows(fitted) * normalize_rows(vectors[:rows]), axis=1)))
    dense = torch.nn.Linear(pooled.shape[1], out_dim, bias=True)
    with torch.no_grad():
        dense.weight.copy_(torch.from_numpy(solution[:-1].T.astype(np.float32)))
        dense.bias.copy_(torch.from_numpy(solution[-1].astype(np.float32)))
    return dense.to(student.device), {"in": pooled.shape[1], "out": out_dim, "init": f"ridge least squares on {rows:,} training "
                              f"sentences (mean cosine with the teacher {cosine:.4f})"}


def distill_embedding(teacher_path: str | Path, sentences: list[str], out_dir: str | Path,
                      config: EmbeddingStudentConfig | None = None, validation=None,
                      cache_dir: str | Path | None = None, log=print, data: dict | None = None,
                      student_path: str | Path | None = None, loop: TrainConfig | None = None,
                      goals: list[str | None] | None = None, pull: float = 0.0, unseen: list[str] | None = None,
                      terms: dict | None = None, judge: Judge | None = None, extra: dict | None = None,
                      precision: str = "no") -> Path:
    """Distil a transformer embedding student from `teacher_path` on `sentences`; write it to out_dir
    (data: the data record its manifest carries for later stages, e.g. the scored-pairs task;
    student_path: distil into that existing model, e.g. a pruned one, instead of a new shape; loop:
    the training loop's settings, checkpoints under out_dir's checkpoint folder, default
    `loop_config(config)`, which keeps none; goals: a text per sentence (or None) whose teacher
    vector that sentence's target is pulled towards by `pull`, `pulled_targets`; terms: the weighted
    loss terms, {weight name: (weight, term factory)}, students/objectives/vectors.py; judge: what picks
    the epoch kept, in place of `sts_judge` of `validation`; extra: recorded in the manifest; precision:
    the teacher's pass over the sentences under that autocast, `teacher_precision`)."""
    config = config or EmbeddingStudentConfig()
    sentences = [s for s in (str(text).strip() for text in sentences) if s]
    if not sentences:
        raise ShrinkbertError("the distillation corpus holds no text")
    if config.epochs < 1 or config.batch_size < 1:
        raise ShrinkbertError("epochs and batch size must be at least 1")
    resolved = resolve_model(str(teacher_path))
    # on the GPU where there is one: the teacher's vectors of a large corpus are most of the stage's work
    teacher = Embedder.load(resolved, max_length=config.max_length).to(process_state().device)
    started = time.perf_counter()
    log(f"teacher vectors of {len(sentences)} sentences (cached by content; a first pass takes a while)")
    rate: dict = {}
    loop = loop or loop_config(config)
    vectors = teacher_vectors(teacher, resolved, sentences, cache_dir, stats=rate, precision=precision)
    log(f"teacher vectors of {len(sentences)} sentences: {time.perf_counter() - started:.0f} s"
        + (f" ({rate['rows_per_s']:.0f} rows/s)" if rate else ""))
    pulled = 0
    if goals is not None:
        if len(goals) != len(sentences):
            raise ShrinkbertError(f"{len(goals)} goal texts for {len(sentences)} sentences")
        vectors, pulled = pulled_targets(teacher, resolved, vectors, goals, pull, cache_dir)
        log(f"{pulled:,} questions' targets pulled {pull:g} of the way to their paragraphs' teacher vectors")
    if student_path is not None:
        (student, record), components = existing_student(student_path, teacher, config.max_length, sentences,
                                                         vectors), None
    else:
        student, components, record = build_student(teacher, config, vectors)
    targets = vectors if components is None else vectors @ components.T
    started = time.perf_counter()
    checkpoints = checkpoint_dir_for(out_dir) if loop.checkpoint_every > 0 else None
    held_out = None
    if judge is None and unseen and validation is not None and components is None:  # agreement: the teacher's space
        held_out = (list(unseen), teacher_vectors(teacher, resolved, list(unseen), cache_dir, precision=precision))
    training = train_student(student, teacher, sentences, targets, config, validation, log, loop, checkpoints,
                             unseen=held_out, terms=terms, judge=judge)
    training["seconds"] = time.perf_counter() - started
    sample = sentences[:64]
    agreement = None
    if components is None:
        agreement = float(np.mean(np.sum(student.encode(sample) * teacher.encode(sample), axis=1)))
    metrics = {"train_sentences": len(sentences), "steps": training["steps"], "train_time_s": training["train_time_s"],
               "mixed_precision": training.get("mixed_precision"),
               **({"agreement_train_sample": agreement} if agreement is not None else {})}
    metrics.update(training.get("kept_measures", {}))  # the kept epoch's (epoch 0: the untrained start's)
    if rate:
        metrics["teacher_vectors"] = rate
    if held_out is not None:
        metrics["unseen_lines"] = len(held_out[0])
    if pulled:
        metrics["query_pull"] = {"weight": pull, "questions": pulled}
    norms = np.linalg.norm(student.encode(sample[:8]), axis=1)
    checks = [check("unit_vectors", bool(np.allclose(norms, 1, atol=1e-4)), f"norms of 8 training sentences' vectors "
                    f"{norms.min():.5f}..{norms.max():.5f}")]
    parents = [resolved] + ([resolve_model(str(student_path))] if student_path is not None else [])
    if not is_main_process():  # several processes (accelerate launch): the main one writes the artifact
        wait_for_everyone()
        return Path(out_dir)
    saved = save_student(student, out_dir, stage="distill", parents=parents, seed=config.seed, checks=checks,
                        config={**asdict(config), **{name: weight for name, (weight, _) in (terms or {}).items()},
                                "teacher": str(teacher_path),
                                **({"student": str(student_path)} if student_path is not None else {})},
                        metrics=metrics,
                        extra={"init": record, "training": training, **(extra or {})}, data=data)
    if checkpoints is not None:
        remove_checkpoints(checkpoints)
    wait_for_everyone()
    return saved
