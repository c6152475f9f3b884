"""The distill stage: teacher -> student of a target size (or into an existing model).

    python -m shrinkbert.students.distill --teacher runs/teacher --task movie-snippets --target 25%
    python -m shrinkbert.students.distill --teacher T --task data.csv --layers 4 --hidden 192
    python -m shrinkbert.students.distill --teacher T --task movie-snippets --student runs/pruned  # recovery
    python -m shrinkbert.students.distill --teacher MLM_T --mode general --corpus sotu,wordnet --target 25%

Task distillation (mode task) trains on the task's labelled train split with the losses you
switch on (weights; 0 = off): soft logits (default), hidden states, attentions, embeddings,
hard labels. General distillation (mode general) trains a masked-LM student on raw text: both
models see the same randomly masked tokens; KD on the MLM logits at masked positions plus any
hidden/attention losses; its student is a BertForMaskedLM artifact for a later task distillation
(`--student`).

With logits-only losses (and `cache` on, the default) the teacher's logits are computed once per
(teacher, tokenized data, max_length) and reused: the teacher is not even loaded on a cache hit.
Hidden and attention losses use the cache too (`cache_hidden`, on by default: fp16 on disk, only
the mapped layers, only each row's real tokens); `--no-cache-hidden` or `--no-cache` run the
teacher live for them. Mode general always runs it live (its inputs are masked afresh each step).

Token tasks (tagging) distil per token: the soft-logit (and hard) losses compare the labelled
words' first sub-tokens, the hidden/attention losses every real token; the cache keeps the
teacher's per-token logits. Transfer sets (--augment, --transfer-corpus) are for sequence tasks.

The saved student is a plain BertConfig model that AutoModelForSequenceClassification (or
AutoModelForTokenClassification / AutoModelForMaskedLM) loads with no custom code. The learned projections used by the hidden and
embedding losses are training-only and are not saved (the manifest says so).
"""
from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from shrinkbert.core.config import field, stage_main, to_dict
from shrinkbert.core.dataspec import DataConfig, load_splits, resolve_spec
from shrinkbert.core.errors import ShrinkbertError
from shrinkbert.core.masking import Masker
from shrinkbert.core.predict import accuracy, score_split
from shrinkbert.core.tagging import IGNORE, primary_metric
from shrinkbert.core.train import TrainConfig, checkpoint_dir_for, remove_checkpoints, train
from shrinkbert.students.ensemble import (TeacherEnsemble, describe_teachers, primary_teacher, split_teachers,
                                          teacher_source)
from shrinkbert.students.losses import DistillLoss, LossWeights, format_layer_map, parse_layer_map
from shrinkbert.students.projection import attach_projection, fold_projection

PROJECTIONS_NOTE = ("hidden/embedding losses used learned projections from the student's width to the "
                    "teacher's; they are training-only and were not saved (the student never uses them)")
MODEL_INPUTS = ("input_ids", "attention_mask", "token_type_ids")


@dataclasses.dataclass
class Config(TrainConfig, DataConfig):
    teacher: str = field("", "teacher artifact directory (a fine-tuned classifier; an MLM model for mode general); a "
                             "distilled student works too (a teacher assistant); several, comma-separated: an "
                             "ensemble whose soft labels are averaged (students/ensemble.py)", group="model")
    mode: str = field("task", "task: distil on labelled data | general: MLM distillation on raw text", choices=("task", "general"), group="data")
    corpus: str = field("", "mode general: comma-separated corpora (sotu, wordnet, .txt files)", group="data")
    mlm_probability: float = field(0.15, "mode general: share of tokens masked", above=0, max=1, group="data")
    max_train_rows: int = field(0, "use only the first N training rows/lines (0: all)", min=0, group="data")
    max_eval_rows: int = field(0, "evaluate on only the first N test rows (0: all)", min=0, group="data")
    augment: int = field(0, "mode task: add up to N perturbed copies of each training text (masking + n-gram "
                            "sampling), labelled by the teacher alone (students/augment.py); 0 = off", min=0, group="data")
    transfer_corpus: str = field("", "mode task: corpora (imdb, rotten-tomatoes, sotu, wordnet, .txt files) whose "
                                     "lines join the training set unlabelled, taught by the teacher's soft logits "
                                     "alone (TinyBERT's transfer set); the task's validation/test rows and "
                                     "near-duplicates are removed (core/leakguard.py)", group="data")
    max_transfer_rows: int = field(0, "at most N transfer-corpus lines: a fixed sample, the same for every --seed, "
                                      "so the teacher's pass over them is cached once (0: all)", min=0, group="data")
    output_dir: str = field("runs/student", "where the student artifact is written", group="output")
    # The student
    target: str = field("", "size target: 25% (of the teacher's parameters), 20MB (fp32 file) or 4ms "
                            "(batch-1 latency at max_length); explicit shape fields below pin dimensions", group="student shape")
    layers: int = field(0, "student layers (0: from the target, else the teacher's)", min=0, group="student shape")
    hidden: int = field(0, "student hidden size (0: from the target, else the teacher's)", min=0, group="student shape")
    heads: int = field(0, "student attention heads (0: hidden / the teacher's head size)", min=0, group="student shape")
    intermediate: int = field(0, "student FFN width (0: the teacher's FFN/hidden ratio)", min=0, group="student shape")
    student: str = field("", "distil INTO this existing model artifact (e.g. a pruned one) instead of a new shape", group="model")
    init: str = field("teacher", "teacher: start from (sliced) teacher weights | random", choices=("teacher", "random"), group="student shape")
    init_layers: str = field("", "teacher layers (1-based) the student layers start from, e.g. 2,4,6 (default: uniform)", group="student shape")
    init_embeddings: str = field("columns", "the student's residual stream from the teacher's: columns (the dims "
                                            "--init-keep picks) | pca (the top principal components of the "
                                            "teacher's embedding table) | projected (pca, then the teacher's table "
                                            "through a learned projection, folded into a plain table when saved)",
                                 choices=("columns", "pca", "projected"), group="student shape")
    init_keep: str = field("norm", "which dims to keep when narrower: norm (largest weights) | first", choices=("norm", "first"), group="student shape")
    threads: int = field(0, "threads for a latency target's timing (0: all cores)", min=0, group="student shape")
    latency_runtime: str = field("torch", "runtime a latency target is timed on: torch (PyTorch fp32), onnx (fp32 ONNX "
                                          "Runtime) or onnx-int8 (dynamic int8 with this CPU's defaults): pick the "
                                          "one the student ships in", choices=("torch", "onnx", "onnx-int8"), group="student shape")
    # The losses
    layer_map: str = field("", "student:teacher layers for hidden/attention losses, e.g. 1:2,2:4,3:6 (0 = "
                               "embeddings); default uniform: student i <- teacher round(i*T/S)", group="losses")
    logits_weight: float = field(1.0, "weight of soft-logit KD (KL, T^2-scaled); 0 = off", min=0, group="losses")
    hidden_weight: float = field(0.0, "weight of hidden-state MSE (projected when widths differ); 0 = off", min=0, group="losses")
    attention_weight: float = field(0.0, "weight of attention-probability transfer; 0 = off", min=0, group="losses")
    embedding_weight: float = field(0.0, "weight of embedding-output MSE; 0 = off", min=0, group="losses")
    hard_weight: float = field(0.0, "weight of cross-entropy with the gold labels; 0 = off", min=0, group="losses")
    temperature: float = field(2.0, "softmax temperature of the logit KD", above=0, group="losses")
    attention_loss: str = field("kl", "kl | mse between attention probabilities", choices=("kl", "mse"), group="losses")
    # Teacher outputs
    cache: bool = field(True, "cache the teacher's outputs on disk and reuse them across runs", group="teacher outputs")
    cache_hidden: bool = field(True, "also cache the hidden states and attention maps the losses need (fp16, "
                                     "real tokens only); off: the teacher runs live for those losses", group="teacher outputs")
    max_length: int = field(128, "tokens per example (and the sequence length of a latency target)", min=8, max=8192, group="data")
    eval_batch_size: int = field(64, "batch size for the teacher pass and the test evaluation", min=1, group="training loop")
    learning_rate: float = field(1e-4, "peak learning rate (AdamW)", above=0, group="training loop")


def loss_weights(cfg: Config) -> LossWeights:
    return LossWeights(logits=cfg.logits_weight, hidden=cfg.hidden_weight, attention=cfg.attention_weight,
                       embedding=cfg.embedding_weight, hard=cfg.hard_weight)


def _state():
    """Accelerate's process state, opted in to CPU multi-process (gloo) the way core.train's
    Accelerator is: PartialState is a singleton and its first creation decides, so a bare
    PartialState() before training would leave each process training alone."""
    from accelerate import PartialState

    return PartialState(cpu=not torch.cuda.is_available())


def _log(message: str) -> None:
    if _state().is_main_process:
        print(message, flush=True)


def _is_mlm(config) -> bool:
    return any(a.endswith(("ForMaskedLM", "ForPreTraining")) for a in (config.architectures or []))


def _int_list(text: str) -> list[int] | None:
    if not text:
        return None
    try:
        return [int(x) for x in str(text).replace(" ", "").split(",") if x]
    except ValueError:
        raise ShrinkbertError(f"init_layers must be comma-separated layer numbers, got {text!r}") from None


def teacher_cache_dir(cfg: Config) -> Path:
    """Teacher outputs live in the one shrinkbert cache, beside the stored splits."""
    from shrinkbert.core.data import default_cache_dir

    return (Path(cfg.cache_dir).expanduser() if cfg.cache_dir else default_cache_dir()) / "teacher-outputs"


def make_collate(tokenizer):
    """Pad model inputs; carry labels and row indices through as tensors."""

    tokenizer.deprecation_warnings["Asking-to-pad-a-fast-tokenizer"] = True  # pad() is right here: pre-tokenized rows

    def collate(features: list[dict]) -> dict:
        inputs = [{k: f[k] for k in MODEL_INPUTS if k in f} for f in features]
        batch = dict(tokenizer.pad(inputs, padding=True, return_tensors="pt"))
        for key in ("labels", "row_idx"):
            if key in features[0]:
                values = [f[key] for f in features]
                if isinstance(values[0], (list, tuple)):  # a tagger's labels: padded to the inputs with IGNORE
                    width = batch["input_ids"].shape[1]
                    values = [list(v) + [IGNORE] * (width - len(v)) for v in values]
                batch[key] = torch.tensor(values, dtype=torch.long)
        return batch

    return collate


def _with_row_index(dataset):
    keep = [c for c in dataset.column_names if c in (*MODEL_INPUTS, "labels")]
    dataset = dataset.select_columns(keep)
    return dataset.add_column("row_idx", list(range(len(dataset))))


def _head_kwargs(need_attentions: bool) -> dict:
    return {"attn_implementation": "eager"} if need_attentions else {}


# ---------------------------------------------------------------------------------------------
# Data


def load_data(cfg: Config, tokenizer, spec=None, record: dict | None = None):
    """(task or None, train dataset, test dataset or None), tokenized and row-indexed; `record`
    receives what the transfer set and the leak guard did (for the manifest)."""
    record = {} if record is None else record
    if cfg.mode == "task":
        from shrinkbert.core.data import tokenize_task

        if spec is None:
            raise ShrinkbertError("no task given: --task NAME_OR_FILE (or --mode general --corpus ...)")
        task, splits = load_splits(spec, cfg.cache_dir)
        if task.is_token and (cfg.augment or cfg.transfer_corpus):
            raise ShrinkbertError(f"--augment and --transfer-corpus make sentence-level transfer sets; task "
                                  f"'{task.name}' is a token task")
        tokenized = tokenize_task(splits, tokenizer, task, max_length=cfg.max_length)
        train_set, test_set = tokenized["train"], tokenized["test"]
        if cfg.max_train_rows:
            train_set = train_set.select(range(min(cfg.max_train_rows, len(train_set))))
        if cfg.augment or cfg.transfer_corpus:
            from shrinkbert.core.leakguard import LeakGuard

            source = splits["train"].select(range(len(train_set)))
            guard = LeakGuard.for_splits(splits, name=task.name)  # nothing of validation/test trains
            train_set = _with_transfer_rows(train_set, source, task, tokenizer, cfg, guard, record)
        if cfg.max_eval_rows:
            test_set = test_set.select(range(min(cfg.max_eval_rows, len(test_set))))
        return task, _with_row_index(train_set), _with_row_index(test_set)
    if cfg.mode == "general":
        import datasets

        from shrinkbert.core.data import load_corpus

        lines = load_corpus([c for c in cfg.corpus.split(",") if c], max_lines=cfg.max_train_rows or None,
                            cache_dir=cfg.cache_dir or None)
        if spec is not None:  # the teacher's task (or --task): its validation/test rows never train
            from shrinkbert.core.leakguard import LeakGuard, describe

            guard = LeakGuard.for_spec(spec, cfg.cache_dir or None)
            total = len(lines)
            lines, removed = guard.filter(lines)
            record["leak_guard"] = {"task": guard.name, "removed": removed, "of": total}
            _log(describe(removed, total, guard, "corpus lines"))
        encoded = tokenizer(lines, truncation=True, max_length=cfg.max_length, return_token_type_ids=True,
                            return_attention_mask=True)
        train_set = datasets.Dataset.from_dict({k: encoded[k] for k in MODEL_INPUTS})
        return None, _with_row_index(train_set), None
    raise ShrinkbertError(f"mode must be 'task' or 'general', got {cfg.mode!r}")


def _with_transfer_rows(train_set, source, task, tokenizer, cfg: Config, guard, record: dict):
    """The tokenized training rows followed by teacher-labelled rows (label NO_LABEL): perturbed
    copies of them (--augment) and transfer-corpus lines (--transfer-corpus), minus leaks."""
    import datasets

    from shrinkbert.core.leakguard import describe
    from shrinkbert.students.augment import NO_LABEL, TRANSFER_SAMPLE_SEED, transfer_rows

    texts, pairs = [], [] if task.pair else None
    if cfg.augment:
        if tokenizer.mask_token is None:
            raise ShrinkbertError("--augment needs a tokenizer with a mask token")
        # Fixed like the corpus sample, not --seed: the copies are then the same for every seed, so one
        # cached teacher pass serves them all (a 110k-row transfer set took 7 min of teacher per seed).
        texts, pairs = transfer_rows(source["text"], source["text_pair"] if task.pair else None, cfg.augment,
                                     TRANSFER_SAMPLE_SEED, tokenizer.mask_token)
    copies, corpus_lines = len(texts), 0
    if cfg.transfer_corpus:
        from shrinkbert.students.augment import corpus_transfer_rows

        lines, seen, leaks = corpus_transfer_rows(cfg.transfer_corpus, cfg.max_transfer_rows, guard,
                                                  cfg.cache_dir or None)
        record["transfer_corpus"] = {"corpus": cfg.transfer_corpus, "rows": len(lines), "lines_read": seen,
                                     "leaks_removed": leaks}
        _log(f"transfer corpus {cfg.transfer_corpus}: {len(lines):,} lines, labelled by the teacher; "
             + describe(leaks, seen, guard, "lines read"))
        texts, corpus_lines = texts + lines, len(lines)
        if pairs is not None:  # a pair task: a corpus line is a first text with an empty second one
            pairs = pairs + [""] * len(lines)
    keep = guard.keep_mask(texts, pairs)
    if not all(keep):
        texts = [t for t, k in zip(texts, keep) if k]
        pairs = [p for p, k in zip(pairs, keep) if k] if pairs is not None else None
    record["transfer_rows"] = {"augment_copies": copies, "total": len(texts), "leaks_removed": keep.count(False)}
    if not texts:
        return train_set
    encoded = tokenizer(texts, pairs, truncation=True, max_length=cfg.max_length, return_token_type_ids=True,
                        return_attention_mask=True)
    extra = datasets.Dataset.from_dict({**{k: encoded[k] for k in MODEL_INPUTS}, "labels": [NO_LABEL] * len(texts)})
    train_set = train_set.cast_column("labels", datasets.Value("int64"))  # a ClassLabel cannot hold NO_LABEL
    extra = extra.cast(datasets.Features({k: train_set.features[k] for k in extra.column_names}))
    _log(f"transfer set: {len(texts):,} rows ({copies:,} perturbed copies of {len(source):,} training rows and "
         f"{corpus_lines:,} corpus lines, less {keep.count(False):,} leaks), labelled by the teacher alone")
    return datasets.concatenate_datasets([train_set.select_columns(extra.column_names), extra])


# ---------------------------------------------------------------------------------------------
# Models


def load_teacher(cfg: Config, need_attentions: bool):
    from transformers import AutoConfig, AutoModel, AutoModelForMaskedLM

    from shrinkbert.core.models import check_model_dir, load_model

    teachers = split_teachers(cfg.teacher)
    if len(teachers) > 1:
        return TeacherEnsemble([load_teacher(dataclasses.replace(cfg, teacher=t), need_attentions) for t in teachers],
                               cfg.temperature)
    check_model_dir(cfg.teacher)
    config = AutoConfig.from_pretrained(cfg.teacher)
    if cfg.mode == "general":
        cls = AutoModelForMaskedLM if _is_mlm(config) else AutoModel
    else:
        cls = _classifier_class(config)
    return load_model(cls, cfg.teacher, **_head_kwargs(need_attentions)).eval()


def _is_token(config) -> bool:
    return any(str(a).endswith("ForTokenClassification") for a in (config.architectures or []))


def _classifier_class(teacher_config, auto: bool = True):
    """The Auto (or Bert) class of a classifier like the teacher's: token or sequence."""
    from transformers import (AutoModelForSequenceClassification, AutoModelForTokenClassification,
                              BertForSequenceClassification, BertForTokenClassification)

    if _is_token(teacher_config):
        return AutoModelForTokenClassification if auto else BertForTokenClassification
    return AutoModelForSequenceClassification if auto else BertForSequenceClassification


def build_student(cfg: Config, teacher_config, weights: LossWeights, log=_log):
    """(student model, record for the manifest): an existing model, or a new shape initialised."""
    from transformers import AutoModelForMaskedLM, BertForMaskedLM

    from shrinkbert.core.models import load_model
    from shrinkbert.students.init import init_from_teacher
    from shrinkbert.students.shape import shape_config, teacher_shape

    kwargs = _head_kwargs(bool(weights.attention))
    general = cfg.mode == "general"
    if cfg.student:
        if cfg.target or cfg.layers or cfg.hidden or cfg.heads or cfg.intermediate:
            raise ShrinkbertError("--student distils into an existing model: do not also give a target or shape")
        cls = AutoModelForMaskedLM if general else _classifier_class(teacher_config)
        from transformers import AutoConfig

        student_arch = AutoConfig.from_pretrained(cfg.student).architectures or []
        head = "ForTokenClassification" if _is_token(teacher_config) else "ForSequenceClassification"
        new_head = not general and not any(a.endswith(head) for a in student_arch)
        if new_head:  # e.g. a general-distilled MLM student: the task's labels come from the teacher
            kwargs.update(num_labels=teacher_config.num_labels, id2label=teacher_config.id2label,
                          label2id=teacher_config.label2id)
        torch.manual_seed(cfg.seed)  # a new classifier head is initialised from the global RNG
        student = load_model(cls, cfg.student, **kwargs)
        if student.config.vocab_size != teacher_config.vocab_size:
            raise ShrinkbertError(f"student {cfg.student} has a {student.config.vocab_size}-token vocabulary and the "
                                  f"teacher {teacher_config.vocab_size}: both must read the same token ids, so "
                                  "distil before trimming the vocabulary")
        record = {"how": f"existing model {cfg.student}", "shape": dataclasses.asdict(teacher_shape(student.config))}
        if new_head:
            from shrinkbert.students.init import carry_heads

            record["heads_from_teacher"] = carry_heads(student, load_teacher(_first_teacher(cfg), need_attentions=False))
            log(f"{cfg.student} has no classifier: pooler/classifier "
                f"{'from the teacher' if record['heads_from_teacher'] else 'newly initialised (widths differ)'}")
        return student, record

    shape, record = _choose_shape_once(cfg, teacher_config, general, log)
    config = shape_config(teacher_config, shape)
    config.architectures = None
    torch.manual_seed(cfg.seed)
    cls = BertForMaskedLM if general else _classifier_class(teacher_config, auto=False)
    student = cls._from_config(config, **kwargs)
    if cfg.init == "teacher":
        from shrinkbert.students.init import stream_basis

        teacher_for_init = load_teacher(_first_teacher(cfg), need_attentions=False)
        embeddings = "pca" if cfg.init_embeddings == "projected" else cfg.init_embeddings
        record["init"] = init_from_teacher(student, teacher_for_init, layer_ids=(
            [i - 1 for i in _int_list(cfg.init_layers)] if cfg.init_layers else None), keep=cfg.init_keep,
            embeddings=embeddings)
        if cfg.init_embeddings == "projected":
            record["init"].update(attach_projection(student, teacher_for_init, stream_basis(
                teacher_for_init, student.config.hidden_size, cfg.init_keep, embeddings)))
        del teacher_for_init
        log(f"student initialised from teacher layers {record['init']['layers_from_teacher']} "
            f"(carried: {', '.join(record['init']['carried'])})")
    elif cfg.init != "random":
        raise ShrinkbertError(f"init must be 'teacher' or 'random', got {cfg.init!r}")
    else:
        record["init"] = {"random": True}
    return student, record


def _choose_shape_once(cfg: Config, teacher_config, general: bool, log):
    """The shape, chosen on the main process and shared, so that every process of a multi-process
    run builds the same student even when a latency target's timings differ between them."""
    from accelerate.utils import broadcast_object_list

    from shrinkbert.students.shape import choose_shape

    state = _state()
    result = [None]
    if state.is_main_process:
        result = [choose_shape(teacher_config, target=cfg.target or None, layers=cfg.layers or None,
                               hidden=cfg.hidden or None, heads=cfg.heads or None,
                               intermediate=cfg.intermediate or None, seq_len=cfg.max_length,
                               threads=cfg.threads or None, head="mlm" if general else "classifier", log=log,
                               runtime=cfg.latency_runtime)]
    if state.num_processes > 1:
        result = broadcast_object_list(result, from_process=0)
    return result[0]


def _model_inputs(batch: dict) -> dict:
    return {k: batch[k] for k in MODEL_INPUTS if k in batch}


# ---------------------------------------------------------------------------------------------
# The loss function the training loop calls


def make_loss_fn(distill_loss: DistillLoss, teacher=None, cache=None, tokenizer=None,
                 general: bool = False, mlm_probability: float = 0.15, token: bool = False):
    """loss_fn(student, batch) -> (loss, logs). Uses the cache when given, else runs the teacher.
    token: a tagger's logits are compared at its labelled words' first sub-tokens only."""
    need_hidden, need_attn = distill_loss.needs_hidden, distill_loss.needs_attentions
    teacher_hidden_layers = distill_loss.teacher_hidden_layers()
    masker = Masker(tokenizer, mlm_probability) if general else None
    teacher_attention_layers = distill_loss.teacher_attention_layers()

    def loss_fn(student, batch):
        inputs = _model_inputs(batch)
        positions = labels = None
        if general:
            labels = inputs["input_ids"]
            masked_ids, mlm_labels = masker(inputs["input_ids"])
            positions = mlm_labels != -100
            if not positions.any():  # keep the MLM terms defined on tiny batches
                positions = inputs["attention_mask"].bool().clone()
            inputs = {**inputs, "input_ids": masked_ids}
        elif token:
            labels = batch["labels"]
            positions = labels != IGNORE
        out = student(**inputs, output_hidden_states=need_hidden, output_attentions=need_attn)
        if cache is not None:
            target = cache.lookup(batch["row_idx"], inputs["input_ids"].shape[1], inputs["input_ids"].device)
            if need_hidden and any(layer not in target.get("hidden_states", {}) for layer in teacher_hidden_layers):
                raise RuntimeError("the teacher-output cache lacks hidden layers the losses need")
            if any(layer not in target.get("attentions", {}) for layer in teacher_attention_layers):
                raise RuntimeError("the teacher-output cache lacks attention layers the losses need")
        else:
            with torch.no_grad():
                t_out = teacher(**inputs, output_hidden_states=need_hidden, output_attentions=need_attn)
            target = {"logits": getattr(t_out, "logits", None), "hidden_states": t_out.hidden_states,
                      "attentions": t_out.attentions}
        return distill_loss(out, target, batch, labels=labels, positions=positions)

    return loss_fn


# ---------------------------------------------------------------------------------------------
# The stage


def _teacher_test_scores(cfg, teacher_loader, test_set, collate, task, log) -> dict[str, float]:
    """The teacher's scores on the test rows (a sequence task's from its cached logits)."""
    if task is not None and task.is_token:
        return score_split(teacher_loader(), test_set, collate, task, cfg.eval_batch_size)
    return {"accuracy": _teacher_test_accuracy(cfg, teacher_loader, test_set, collate, log)[0]}


def _teacher_test_accuracy(cfg, teacher_loader, test_set, collate, log) -> tuple[float, np.ndarray]:
    from shrinkbert.students.cache import compute_teacher_outputs, load_or_compute

    if cfg.cache:
        cache, _, _ = load_or_compute(teacher_source(cfg.teacher, cfg.temperature), teacher_loader, test_set, collate, cfg.max_length,
                                      cache_dir=teacher_cache_dir(cfg),
                                      batch_size=cfg.eval_batch_size, log=log)
    else:
        cache = compute_teacher_outputs(teacher_loader(), test_set, collate, batch_size=cfg.eval_batch_size, log=log)
    logits = cache.logits.numpy()
    return accuracy(logits, test_set["labels"]), logits


def _first_teacher(cfg: Config) -> Config:
    """The config with only the first teacher: the one a student's weights start from."""
    return dataclasses.replace(cfg, teacher=primary_teacher(cfg.teacher))


def validate(cfg: Config) -> None:
    if not cfg.teacher:
        raise ShrinkbertError("no teacher given: --teacher DIR")
    if cfg.init_embeddings != "columns" and (cfg.init != "teacher" or cfg.student or cfg.mode != "task"):
        raise ShrinkbertError(f"--init-embeddings {cfg.init_embeddings} shapes a new student initialised from the "
                              "teacher in mode task (not with --init random, --student or mode general)")
    if cfg.mode == "general" and not cfg.corpus:
        raise ShrinkbertError("mode general needs --corpus (sotu, wordnet or .txt files)")
    # temperature > 0, weights >= 0 and augment >= 0 are the fields' own bounds (checked when parsed)
    weights = loss_weights(cfg)
    if not weights.active():
        raise ShrinkbertError("every loss weight is 0: switch at least one on (e.g. --logits-weight 1)")
    if cfg.augment and cfg.mode != "task":
        raise ShrinkbertError(f"--augment works in mode task only, got {cfg.augment} in mode {cfg.mode}")
    if cfg.transfer_corpus and cfg.mode != "task":
        raise ShrinkbertError("--transfer-corpus works in mode task only (mode general reads --corpus)")
    if (cfg.augment or cfg.transfer_corpus) and not (weights.logits or weights.hidden or weights.attention
                                                     or weights.embedding):
        raise ShrinkbertError("transfer-set rows (--augment, --transfer-corpus) have no gold label: switch on a "
                              "teacher loss (e.g. --logits-weight 1)")


def run(cfg: Config) -> Path:
    """Distil; write the student artifact to cfg.output_dir and return its path."""
    from transformers import AutoConfig

    from shrinkbert.core.artifacts import save_model_artifact
    from shrinkbert.core.models import count_parameters, load_tokenizer
    from shrinkbert.students.cache import load_or_compute

    validate(cfg)
    started = time.perf_counter()
    weights = loss_weights(cfg)
    from shrinkbert.core.models import check_model_dir

    teacher_config = AutoConfig.from_pretrained(check_model_dir(primary_teacher(cfg.teacher)))
    general = cfg.mode == "general"
    if general and weights.logits and not _is_mlm(teacher_config):
        raise ShrinkbertError(f"teacher {cfg.teacher} has no MLM head, so mode general cannot distil its MLM "
                              "logits: use --logits-weight 0 with --hidden-weight/--attention-weight, or an MLM teacher")
    tokenizer = load_tokenizer(primary_teacher(cfg.teacher), teacher_config)
    spec = resolve_spec(cfg, split_teachers(cfg.teacher), required=False)
    data_record: dict[str, Any] = {}
    task, train_set, test_set = load_data(cfg, tokenizer, spec, data_record)
    if general:
        spec = None  # it only guarded the corpus: a general student carries no task
    if task is not None and task.num_labels != teacher_config.num_labels:
        raise ShrinkbertError(f"task '{task.name}' has {task.num_labels} labels but the teacher predicts "
                              f"{teacher_config.num_labels}: distil a teacher fine-tuned on this task")
    if task is not None:
        teacher_labels = [str(teacher_config.id2label[i]) for i in range(teacher_config.num_labels)]
        generic = all(name == f"LABEL_{i}" for i, name in enumerate(teacher_labels))
        if not generic and teacher_labels != list(task.label_names):
            raise ShrinkbertError(f"the teacher's labels {teacher_labels} are not the task's {list(task.label_names)} "
                                  "(in index order): distil a teacher fine-tuned on this task")
    collate = make_collate(tokenizer)

    student, student_record = build_student(cfg, teacher_config, weights)
    s_layers, t_layers = student.config.num_hidden_layers, teacher_config.num_hidden_layers
    layer_map = parse_layer_map(cfg.layer_map or None, s_layers, t_layers)
    distill_loss = DistillLoss(weights, layer_map, student.config.hidden_size, teacher_config.hidden_size,
                               cfg.temperature, cfg.attention_loss)

    teacher_holder: dict[str, Any] = {}

    def teacher_loader():
        if "model" not in teacher_holder:
            teacher_holder["model"] = load_teacher(cfg, need_attentions=bool(weights.attention))
        return teacher_holder["model"]

    cache = None
    cache_record: dict[str, Any] = {"used": False}
    live = (general or not cfg.cache
            or ((distill_loss.needs_hidden or distill_loss.needs_attentions) and not cfg.cache_hidden))
    if not live:
        hidden_layers = distill_loss.teacher_hidden_layers() if distill_loss.needs_hidden else []
        attention_layers = distill_loss.teacher_attention_layers()
        with _state().main_process_first():  # the others then find the main process's cache
            cache, cache_file, hit = load_or_compute(teacher_source(cfg.teacher, cfg.temperature), teacher_loader, train_set, collate,
                                                     cfg.max_length, hidden_layers,
                                                     teacher_cache_dir(cfg),
                                                     cfg.eval_batch_size, log=_log, attention_layers=attention_layers)
        cache_record = {"used": True, "file": str(cache_file), "hit": hit, "hidden_layers": hidden_layers,
                        "attention_layers": [i + 1 for i in attention_layers]}
    _log(f"distilling: losses {weights.active()}, layer map {format_layer_map(layer_map)}, teacher "
         f"{'live' if live else 'from cache'}, {len(train_set):,} training rows")

    teacher = teacher_loader() if live else None
    loss_fn = make_loss_fn(distill_loss, teacher=teacher, cache=cache, tokenizer=tokenizer,
                           general=general, mlm_probability=cfg.mlm_probability,
                           token=task is not None and task.is_token)
    out_dir = Path(cfg.output_dir)
    checkpoint_dir = checkpoint_dir_for(out_dir)
    # The whole stage config, not just the loop's knobs: a resume with another teacher, temperature
    # or loss weight would silently mix two runs.
    train_metrics = train(student, train_set, collate, loss_fn, cfg, checkpoint_dir,
                          extra_modules=[distill_loss], frozen_modules=[teacher] if teacher is not None else [],
                          desc="distill")

    state = _state()
    metrics: dict[str, Any] = {k: v for k, v in train_metrics.items() if k != "history"}
    if state.is_main_process:
        student = student.cpu().eval()
        judged_by, judged_name = primary_metric(task)
        if test_set is not None:
            scores = score_split(student, test_set, collate, task, cfg.eval_batch_size)
            metrics.update({f"test_{k}": v for k, v in scores.items() if k != "loss"})
            teacher_scores = _teacher_test_scores(cfg, teacher_loader, test_set, collate, task, _log)
            metrics.update({f"teacher_test_{k}": v for k, v in teacher_scores.items() if k != "loss"})
            # retention: of the task's primary metric (accuracy; entity F1 for a seqeval task)
            metrics["retention"] = metrics[f"test_{judged_by}"] / max(metrics[f"teacher_test_{judged_by}"], 1e-12)
            metrics["test_rows"] = len(test_set)
        metrics["train_rows"] = len(train_set)  # transfer-set copies (--augment) included
        num_parameters = count_parameters(student)
        teacher_parameters = _teacher_parameters(primary_teacher(cfg.teacher), teacher_config, general)
        metrics["num_parameters"] = num_parameters
        metrics["parameter_ratio"] = num_parameters / teacher_parameters
        metrics["wall_time_s"] = time.perf_counter() - started
        if fold_projection(student):  # a learned embedding projection becomes a plain table: a plain BERT saved
            student_record["init"]["projection"] = "folded into the word-embedding table"
        student.config._attn_implementation = None  # back to the library default in the saved config
        student.config.architectures = None
        parents = split_teachers(cfg.teacher) + ([cfg.student] if cfg.student else [])
        save_model_artifact(out_dir, student, tokenizer, stage="distill", parents=parents, config=to_dict(cfg),
                            metrics=metrics, seed=cfg.seed, num_parameters=num_parameters,
                            data=spec.record(task, max_length=cfg.max_length, rows={"train": len(train_set)})
                            if spec is not None else None, extra={
                                "task": task.to_dict() if task is not None else None,
                                "student": {**student_record, "layer_map": format_layer_map(layer_map),
                                            "loss_weights": dataclasses.asdict(weights),
                                            "temperature": cfg.temperature,
                                            "projections": PROJECTIONS_NOTE if len(distill_loss.projections) else
                                            "none (student and teacher widths match, or no hidden losses)",
                                            "teacher_outputs": cache_record,
                                            "teachers": describe_teachers(cfg.teacher)},
                                "transfer": data_record,
                                "history": train_metrics.get("history", [])})
        if test_set is not None:
            _log(f"student test {judged_name} {metrics[f'test_{judged_by}']:.4f} vs teacher "
                 f"{metrics[f'teacher_test_{judged_by}']:.4f} (retention {metrics['retention']:.1%}), "
                 f"{num_parameters:,} parameters ({metrics['parameter_ratio']:.1%} of the teacher)")
        _log(f"student written to {out_dir}")
    remove_checkpoints(checkpoint_dir)
    return out_dir


def _teacher_parameters(teacher_dir, teacher_config, general: bool) -> int:
    from shrinkbert.core.artifacts import is_artifact, read_manifest
    from shrinkbert.students.shape import count_config_parameters

    if is_artifact(teacher_dir):
        recorded = read_manifest(teacher_dir).get("num_parameters")
        if recorded:
            return int(recorded)
    return count_config_parameters(teacher_config, head="mlm" if general and _is_mlm(teacher_config) else "classifier")


def main(argv: list[str] | None = None, prog: str | None = None, description: str | None = None) -> int:
    """The stage's command line (`shrinkbert NAME` passes its prog and one-line summary)."""
    return stage_main(Config, run, description or __doc__, argv, prog)


if __name__ == "__main__":
    raise SystemExit(main())
