"""The distill stage's models: loading the teacher(s) and building the student (a new shape or an existing model).

A new student's shape comes from a size target (chosen once on the main process and shared), its
classifier class from the teacher's task kind, and its weights from the (first) teacher unless
--init random.
"""
from __future__ import annotations

import dataclasses

import torch

from shrinkbert.core.artifacts import is_artifact, read_manifest
from shrinkbert.core.errors import ShrinkbertError
from shrinkbert.core.families import is_mlm
from shrinkbert.core.kinds import kind_of
from shrinkbert.core.models import check_model_dir, load_model
from shrinkbert.students.ensemble import TeacherEnsemble, primary_teacher, split_teachers
from shrinkbert.students.init import carry_heads, init_from_teacher, stream_basis
from shrinkbert.students.losses import LossWeights
from shrinkbert.students.processes import log_main, process_state
from shrinkbert.students.projection import attach_projection
from shrinkbert.students.shape import choose_shape, count_config_parameters, model_shape, shape_config


def init_embeddings(asked: str, student_hidden: int, teacher_hidden: int, masked_lm: bool = False) -> str:
    """The stream init students/init.py applies: "auto" is pca for a task student narrower than its
    teacher (where it keeps more of the teacher than columns: bench/plateau.py compares the inits)
    and columns at the teacher's width (there the columns are the whole stream, and a full-width
    rotation would only disturb LayerNorm) or in general distillation (not measured); "projected"
    starts as pca."""
    if asked == "auto":
        return "pca" if student_hidden < teacher_hidden and not masked_lm else "columns"
    return "pca" if asked == "projected" else asked


def _first_teacher(cfg):
    """The config with only the first teacher: the one a student's weights start from."""
    return dataclasses.replace(cfg, teacher=primary_teacher(cfg.teacher))


def teacher_layer_ids(text: str) -> list[int] | None:
    """init_layers as the user writes it (1-based, "2,4,6") -> 0-based teacher layer ids; None when empty."""
    if not text:
        return None
    try:
        return [int(x) - 1 for x in str(text).replace(" ", "").split(",") if x]
    except ValueError:
        raise ShrinkbertError(f"init_layers must be comma-separated layer numbers, got {text!r}") from None


def _head_kwargs(need_attentions: bool) -> dict:
    return {"attn_implementation": "eager"} if need_attentions else {}


def load_teacher(cfg, need_attentions: bool, masked_lm: bool = False):
    from transformers import AutoConfig, AutoModel, AutoModelForMaskedLM

    teachers = split_teachers(cfg.teacher)
    if len(teachers) > 1:
        return TeacherEnsemble([load_teacher(dataclasses.replace(cfg, teacher=t), need_attentions, masked_lm) for t in teachers],
                               cfg.temperature)
    check_model_dir(cfg.teacher)
    config = AutoConfig.from_pretrained(cfg.teacher)
    if masked_lm:
        cls = AutoModelForMaskedLM if is_mlm(config) else AutoModel
    else:
        cls = kind_of(config).model_class()
    return load_model(cls, cfg.teacher, **_head_kwargs(need_attentions)).eval()


def adopt_teacher_tokens(student, student_dir: str, teacher_tokenizer, teacher_config, sample: list[str]) -> dict | None:
    """An existing student of another family that splits text into the teacher's pieces (all-MiniLM-L6-v2,
    a BERT, for an MPNet teacher) reads the teacher's ids from here on: its word embeddings re-ordered by
    token string, special tokens by role (students/vocab_map.py), so it trains on the teacher's tokenized
    rows and ships with the teacher's tokenizer. The record of it; None where it reads them already (or
    has no tokenizer of its own to compare). One `error:` line where the two do not share their pieces."""
    from transformers import AutoTokenizer

    from shrinkbert.students.vocab_map import adopt_vocabulary, same_vocabulary

    try:
        student_tokenizer = AutoTokenizer.from_pretrained(student_dir, use_fast=True)
    except (OSError, ValueError):
        return None
    if same_vocabulary(student_tokenizer, teacher_tokenizer):
        return None
    return adopt_vocabulary(student, student_tokenizer, teacher_tokenizer, teacher_config.vocab_size, sample,
                            name=f"--student {student_dir}")


def build_student(cfg, teacher_config, weights: LossWeights, log=log_main, tokenizer=None,
                  sample: list[str] | None = None, masked_lm: bool = False):
    """(student model, record for the manifest): an existing model, or a new shape initialised.
    tokenizer / sample: the teacher's tokenizer and some of the training text, which an existing student
    of another vocabulary is re-indexed by (`adopt_teacher_tokens`)."""
    from transformers import AutoModelForMaskedLM

    kwargs = _head_kwargs(bool(weights.attention))
    if cfg.student:
        if cfg.target or cfg.layers or cfg.hidden or cfg.heads or cfg.intermediate:
            raise ShrinkbertError("--student distils into an existing model: do not also give a target or shape")
        kind = kind_of(teacher_config)
        cls = AutoModelForMaskedLM if masked_lm else kind.model_class()
        from transformers import AutoConfig

        student_arch = AutoConfig.from_pretrained(cfg.student).architectures or []
        new_head = not masked_lm and not kind.matches_architectures(student_arch)
        if new_head:  # e.g. a masked-LM student: the task's labels come from the teacher
            kwargs.update(num_labels=teacher_config.num_labels, id2label=teacher_config.id2label,
                          label2id=teacher_config.label2id)
        torch.manual_seed(cfg.seed)  # a new classifier head is initialised from the global RNG
        student = load_model(cls, cfg.student, **kwargs)
        tokens = adopt_teacher_tokens(student, cfg.student, tokenizer, teacher_config, sample or []) if tokenizer else None
        if tokens:
            log(f"{cfg.student} re-indexed to the teacher's token ids ({tokens['tokens_found']:,} tokens found)")
        if student.config.vocab_size != teacher_config.vocab_size:
            raise ShrinkbertError(f"student {cfg.student} has a {student.config.vocab_size}-token vocabulary and the "
                                  f"teacher {teacher_config.vocab_size}: both must read the same token ids, so "
                                  "distil before trimming the vocabulary")
        record = {"how": f"existing model {cfg.student}", "shape": model_shape(student.config),
                  **({"tokens": tokens} if tokens else {})}
        if new_head:
            record["heads_from_teacher"] = carry_heads(student, load_teacher(_first_teacher(cfg), need_attentions=False))
            log(f"{cfg.student} has no classifier: pooler/classifier "
                f"{'from the teacher' if record['heads_from_teacher'] else 'newly initialised (widths differ)'}")
        return student, record

    shape, record = _choose_shape_once(cfg, teacher_config, masked_lm, log)
    config = shape_config(teacher_config, shape)
    config.architectures = None
    torch.manual_seed(cfg.seed)
    cls = AutoModelForMaskedLM if masked_lm else kind_of(teacher_config).model_class()
    student = cls.from_config(config, **kwargs)
    if cfg.init == "teacher":
        teacher_for_init = load_teacher(_first_teacher(cfg), need_attentions=False, masked_lm=masked_lm)
        embeddings = init_embeddings(cfg.init_embeddings, config.hidden_size, teacher_config.hidden_size, masked_lm)
        record["init"] = init_from_teacher(student, teacher_for_init, layer_ids=teacher_layer_ids(cfg.init_layers),
                                           keep=cfg.init_keep, embeddings=embeddings)
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


def _choose_shape_once(cfg, teacher_config, masked_lm: bool, log):
    """The shape, chosen on the main process and shared, so that every process of a multi-process
    run builds the same student even when a latency target's timings differ between them."""
    from accelerate.utils import broadcast_object_list

    state = process_state()
    result = [None]
    if state.is_main_process:
        result = [choose_shape(teacher_config, target=cfg.target or None, layers=cfg.layers or None,
                               hidden=cfg.hidden or None, heads=cfg.heads or None,
                               intermediate=cfg.intermediate or None, seq_len=cfg.max_length,
                               threads=cfg.threads or None, head="mlm" if masked_lm else "classifier", log=log,
                               runtime=cfg.latency_runtime)]
    if state.num_processes > 1:
        result = broadcast_object_list(result, from_process=0)
    return result[0]


def _teacher_parameters(teacher_dir, teacher_config, masked_lm: bool) -> int:
    if is_artifact(teacher_dir):
        recorded = read_manifest(teacher_dir).get("num_parameters")
        if recorded:
            return int(recorded)
    return count_config_parameters(teacher_config, head="mlm" if masked_lm and is_mlm(teacher_config) else "classifier")
