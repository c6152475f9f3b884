"""The distill stage: teacher -> student of a target size (or into an existing model).

    python -m shrinkbert.students.distill --teacher runs/teacher --task movie-snippets --target 25%
    python -m shrinkbert.students.distill --teacher T --task data.csv --layers 4 --hidden 192
    python -m shrinkbert.students.distill --teacher T --task movie-snippets --student runs/pruned  # recovery
    python -m shrinkbert.students.distill --teacher MLM_T --mode general --corpus sotu,wordnet --target 25%

Task distillation (mode task) trains on the task's labelled train split with the losses you
switch on (weights; 0 = off): soft logits (default), hidden states, attentions, embeddings,
hard labels. General distillation (mode general) trains a masked-LM student on raw text: both
models see the same randomly masked tokens; KD on the MLM logits at masked positions plus any
hidden/attention losses; its student is a masked-LM artifact of the teacher's family (AutoModelForMaskedLM)
for a later task distillation (`--student`).

With logits-only losses (and `cache` on, the default) the teacher's logits are computed once per
(teacher, tokenized data, max_length) and reused: the teacher is not even loaded on a cache hit.
Hidden and attention losses use the cache too (`cache_hidden`, on by default: fp16 on disk, only
the mapped layers, only each row's real tokens); `--no-cache-hidden` or `--no-cache` run the
teacher live for them. Mode general always runs it live (its inputs are masked afresh each step).

Token tasks (tagging) distil per token: the soft-logit (and hard) losses compare the labelled
words' first sub-tokens, the hidden/attention losses every real token; the cache keeps the
teacher's per-token logits. Transfer sets (--augment, --transfer-corpus) are for sequence tasks.

The saved student is a plain model of the teacher's family (or of the pretrained student's: --student)
that its task kind's AutoModelFor… class (or AutoModelForMaskedLM) loads with no custom code. The learned
projections used by the hidden and embedding losses are training-only and are not saved (the manifest
says so).
"""
from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

from shrinkbert.core.artifacts import save_model_artifact
from shrinkbert.core.config import options, refuse_unread, stage_main, to_dict
from shrinkbert.core.builtin import resolve_model
from shrinkbert.core.data.dataspec import resolve_spec, stage_max_length
from shrinkbert.core.errors import ShrinkbertError
from shrinkbert.core.families import is_mlm
from shrinkbert.core.kinds import kind_for_mode, kind_of, primary_metric, score_split
from shrinkbert.core.models import check_model_dir, count_parameters, load_tokenizer
from shrinkbert.core.train import checkpoint_dir_for, remove_checkpoints, resolve_mixed_precision, train
from shrinkbert.students.cache import compute_teacher_outputs, load_or_compute
from shrinkbert.students.configs import EMBEDDING_ONLY_OPTIONS, DistillConfig as Config
from shrinkbert.students.distill_data import load_data, make_collate, teacher_cache_dir
from shrinkbert.students.distill_loss import loss_weights, make_loss_fn
from shrinkbert.students.distill_models import _teacher_parameters, build_student, load_teacher
from shrinkbert.students.dropout import override_dropout
from shrinkbert.students.ensemble import describe_teachers, primary_teacher, split_teachers, teacher_source
from shrinkbert.students.losses import DistillLoss, format_layer_map, parse_layer_map
from shrinkbert.students.processes import log_main, process_state
from shrinkbert.students.projection import fold_projection
from shrinkbert.students.vocab_map import VOCABULARY_SAMPLE

PROJECTIONS_NOTE = ("hidden/embedding losses used learned projections from the student's width to the "
                    "teacher's; they are training-only and were not saved (the student never uses them)")


# ---------------------------------------------------------------------------------------------
# The stage (its data: distill_data.py; its models: distill_models.py; its loss mix: distill_loss.py)


def _teacher_test_scores(cfg, teacher_loader, test_set, collate, task, log) -> dict[str, float]:
    """The teacher's scores on the test rows: from its cached outputs where the task's kind can
    score those (sequence), else from a pass of the teacher."""
    kind = kind_of(task)
    if kind.per_token_outputs or not kind.cacheable_outputs:  # scoring needs the model's own pass
        return score_split(teacher_loader(), test_set, collate, task, cfg.eval_batch_size)
    return kind.score_cached(task, _teacher_test_logits(cfg, teacher_loader, test_set, collate, log), test_set)


def _teacher_test_logits(cfg, teacher_loader, test_set, collate, log) -> np.ndarray:
    if cfg.cache:
        cache, _, _ = load_or_compute(teacher_source(cfg.teacher, cfg.temperature), teacher_loader, test_set, collate, cfg.max_length,
                                      cache_dir=teacher_cache_dir(cfg),
                                      batch_size=cfg.eval_batch_size, log=log)
    else:
        cache = compute_teacher_outputs(teacher_loader(), test_set, collate, batch_size=cfg.eval_batch_size, log=log)
    return cache.logits.numpy()


def _kind_of_teacher(cfg: Config):
    """The kind the student is distilled as: mode embeddings reads any teacher as an embedding model
    (all-MiniLM-L6-v2 as it ships); otherwise the teacher's own kind."""
    teacher = Path(primary_teacher(cfg.teacher))
    return kind_for_mode(cfg.mode, teacher if teacher.is_dir() else None)


def validate(cfg: Config) -> None:
    if not cfg.teacher:
        raise ShrinkbertError("no teacher given: --teacher DIR")
    # what only an embedding student reads (students/distill_vectors.py) is refused here in one line
    refuse_unread(cfg, {o.name for o in options(type(cfg))} - EMBEDDING_ONLY_OPTIONS,
                  f"in mode {cfg.mode} (mode embeddings only)")
    if cfg.init_embeddings not in ("auto", "columns") and (cfg.init != "teacher" or cfg.student or cfg.mode != "task"):
        raise ShrinkbertError(f"--init-embeddings {cfg.init_embeddings} shapes a new student initialised from the "
                              "teacher in mode task (not with --init random, --student or mode general)")
    if cfg.freeze_embeddings and cfg.init_embeddings == "projected":
        raise ShrinkbertError("--freeze-embeddings would freeze the projection --init-embeddings projected learns: "
                              "use one of them")
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


def small_data_line(record: dict) -> str:
    """The log's line for what --small-data switched on, or left off (students/distill_data.py)."""
    def options(chosen: dict) -> str:
        return ", ".join(f"--{k.replace('_', '-')} {v:g}" for k, v in chosen.items())
    if record["switched_on"]:
        return (f"{record['train_rows']:,} training rows is few to distil on: switched on "
                f"{options(record['switched_on'])} (--small-data off distils on the options as given)")
    return (f"{record['train_rows']:,} training rows is few to distil on; --small-data off left "
            f"{options(record['left_off'])} off (--small-data auto switches them on)")


def run(cfg: Config) -> Path:
    """Distil; write the student artifact to cfg.output_dir and return its path. What the student
    learns follows what the kind's models give: the teacher's logits (and hidden states, attentions)
    on the task's rows, here; or the teacher's sentence vectors of unlabelled text
    (students/distill_vectors.py)."""
    kind = _kind_of_teacher(cfg)
    if kind.sentence_vectors:
        from shrinkbert.students.distill_vectors import distill_vectors

        cfg.max_length = stage_max_length(cfg, kind, [primary_teacher(cfg.teacher)])
        return distill_vectors(cfg)
    return distill_logits(cfg)


def distill_logits(cfg: Config) -> Path:
    """A student of a logit-giving kind (see `run`)."""
    from transformers import AutoConfig

    validate(cfg)
    started = time.perf_counter()
    weights = loss_weights(cfg)

    teacher_config = AutoConfig.from_pretrained(check_model_dir(primary_teacher(cfg.teacher)))
    cfg.max_length = stage_max_length(cfg, kind_of(teacher_config), [primary_teacher(cfg.teacher)])
    general = cfg.mode == "general"
    if general and weights.logits and not is_mlm(teacher_config):
        raise ShrinkbertError(f"teacher {cfg.teacher} has no MLM head, so mode general cannot distil its MLM "
                              "logits: use --logits-weight 0 with --hidden-weight/--attention-weight, or an MLM teacher")
    tokenizer = load_tokenizer(primary_teacher(cfg.teacher), teacher_config)
    spec = resolve_spec(cfg, split_teachers(cfg.teacher), required=False)
    data_record: dict[str, Any] = {}
    task, train_set, test_set = load_data(cfg, tokenizer, spec, data_record)
    small_data = data_record.pop("small_data", None) or {}
    if small_data:  # few rows: load_data may have switched on a transfer set and the hidden loss
        weights = loss_weights(cfg)
        log_main(f"note: {small_data_line(small_data)}")
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
    collate = make_collate(tokenizer, kind_of(task).target_columns)

    student_dir = resolve_model(cfg.student) if cfg.student else ""  # "minilm": the installed folder, the parent
    sample = (tokenizer.batch_decode(train_set[:VOCABULARY_SAMPLE]["input_ids"], skip_special_tokens=True)
              if student_dir else None)  # an existing student of another vocabulary is checked on it
    student, student_record = build_student(dataclasses.replace(cfg, student=student_dir), teacher_config, weights,
                                            tokenizer=tokenizer, sample=sample)
    if cfg.freeze_embeddings:  # no gradient, clipping or AdamW state for the (vocab x hidden) table at all
        student.get_input_embeddings().requires_grad_(False)
        student_record["frozen"] = "word embeddings"
    restore_dropout: Callable[[], None] = lambda: None
    if cfg.dropout is not None:
        restore_dropout = override_dropout(student, cfg.dropout)
        student_record["dropout"] = cfg.dropout
    s_layers, t_layers = student.config.num_hidden_layers, teacher_config.num_hidden_layers
    layer_map = parse_layer_map(cfg.layer_map or None, s_layers, t_layers)
    distill_loss = DistillLoss(weights, layer_map, student.config.hidden_size, teacher_config.hidden_size,
                               cfg.temperature, cfg.attention_loss)

    teacher_holder: dict[str, Any] = {}

    def teacher_loader():
        if "model" not in teacher_holder:
            # on the process's device (a GPU where there is one): the teacher's pass over the rows is
            # most of a cache miss's time, and slow on a CPU for a base-sized teacher
            teacher_holder["model"] = load_teacher(cfg, need_attentions=bool(weights.attention)).to(process_state().device)
        return teacher_holder["model"]

    cache = None
    cache_record: dict[str, Any] = {"used": False}
    live = (general or not cfg.cache or not kind_of(task).cacheable_outputs
            or ((distill_loss.needs_hidden or distill_loss.needs_attentions) and not cfg.cache_hidden))
    if not live:
        hidden_layers = distill_loss.teacher_hidden_layers() if distill_loss.needs_hidden else []
        attention_layers = distill_loss.teacher_attention_layers()
        # The teacher's pass runs in the precision --mixed-precision resolves to for the teacher's width: under
        # `auto`, bf16 on a CPU with bf16 for a teacher of H160 and up: a faster pass, and students as
        # accurate (bench/teacher_outputs_bf16.py times the pass; bench/edge_arms.py compares the students).
        teacher_precision = resolve_mixed_precision(cfg.mixed_precision, width=teacher_config.hidden_size)
        with process_state().main_process_first():  # the others then find the main process's cache
            cache, cache_file, hit = load_or_compute(teacher_source(cfg.teacher, cfg.temperature), teacher_loader, train_set, collate,
                                                     cfg.max_length, hidden_layers,
                                                     teacher_cache_dir(cfg),
                                                     cfg.eval_batch_size, log=log_main, attention_layers=attention_layers,
                                                     kind=kind_of(task), precision=teacher_precision)
        cache_record = {"used": True, "file": str(cache_file), "hit": hit, "hidden_layers": hidden_layers,
                        "attention_layers": [i + 1 for i in attention_layers], "precision": teacher_precision}
    log_main(f"distilling: losses {weights.active()}, layer map {format_layer_map(layer_map)}, teacher "
         f"{'live' if live else 'from cache'}, {len(train_set):,} training rows")

    teacher = teacher_loader() if live else None
    loss_fn = make_loss_fn(distill_loss, teacher=teacher, cache=cache, tokenizer=tokenizer,
                           general=general, mlm_probability=cfg.mlm_probability, kind=kind_of(task))
    out_dir = Path(cfg.output_dir)
    checkpoint_dir = checkpoint_dir_for(out_dir)
    # The whole stage config, not just the loop's knobs: a resume with another teacher, temperature
    # or loss weight would silently mix two runs.
    train_metrics = train(student, train_set, collate, loss_fn, cfg, checkpoint_dir,
                          extra_modules=[distill_loss], frozen_modules=[teacher] if teacher is not None else [],
                          desc="distill")
    restore_dropout()

    state = process_state()
    metrics: dict[str, Any] = {k: v for k, v in train_metrics.items() if k != "history"}
    if state.is_main_process:
        student = student.cpu().eval()
        judged_by, judged_name = primary_metric(task)
        if test_set is not None:
            scores = score_split(student, test_set, collate, task, cfg.eval_batch_size)
            metrics.update({f"test_{k}": v for k, v in scores.items() if k != "loss"})
            teacher_scores = _teacher_test_scores(cfg, teacher_loader, test_set, collate, task, log_main)
            metrics.update({f"teacher_test_{k}": v for k, v in teacher_scores.items() if k != "loss"})
            # retention: of the task's primary metric (accuracy; entity F1 for a seqeval task)
            metrics["retention"] = metrics[f"test_{judged_by}"] / max(metrics[f"teacher_test_{judged_by}"], 1e-12)
            metrics["test_rows"] = len(test_set)
        metrics["train_rows"] = len(train_set)  # transfer-set copies (--augment) included
        if fold_projection(student):  # a learned embedding projection becomes a plain table: a plain BERT saved
            student_record["init"]["projection"] = "folded into the word-embedding table"
        num_parameters = count_parameters(student)  # after folding: the model as saved
        teacher_parameters = _teacher_parameters(primary_teacher(cfg.teacher), teacher_config, general)
        metrics["num_parameters"] = num_parameters
        metrics["parameter_ratio"] = num_parameters / teacher_parameters
        metrics["wall_time_s"] = time.perf_counter() - started
        student.config._attn_implementation = None  # back to the library default in the saved config
        student.config.architectures = None
        parents = split_teachers(cfg.teacher) + ([student_dir] if student_dir else [])
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
                                **({"small_data": small_data} if small_data else {}),
                                "history": train_metrics.get("history", [])})
        if test_set is not None:
            log_main(f"student test {judged_name} {metrics[f'test_{judged_by}']:.4f} vs teacher "
                 f"{metrics[f'teacher_test_{judged_by}']:.4f} (retention {metrics['retention']:.1%}), "
                 f"{num_parameters:,} parameters ({metrics['parameter_ratio']:.1%} of the teacher)")
        log_main(f"student written to {out_dir}")
    remove_checkpoints(checkpoint_dir)
    return out_dir


def main(argv: list[str] | None = None, prog: str | None = None, description: str | None = None) -> int:
    """The stage's command line (`shrinkbert NAME` passes its prog and one-line summary)."""
    return stage_main(Config, run, description or __doc__, argv, prog)


if __name__ == "__main__":
    raise SystemExit(main())
