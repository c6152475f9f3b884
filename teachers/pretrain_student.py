"""A student shape to pretrain (teachers/pretrain.py with --teacher): built as distill builds one, and
the MLM-KD term that lets a teacher's MLM head teach it.

Turc et al. 2019 ("Well-Read Students Learn Better"): a compact model pre-trained with MLM before
task distillation beats the same model started from teacher slices, most of all for the smallest
shapes. Here the student's shape comes from the same fields as `shrinkbert distill` (--layers
--hidden --heads --intermediate; 0 = the teacher's) and students/shape.py, its weights from the
teacher's slices (students/init.py, --init teacher) or random (--init random), its tokenizer is the
teacher's, and it is the teacher's family's masked-LM model (BertForPreTraining with --nsp, which
only BERT has): `shrinkbert distill --student <this artifact>` then distils
the task into it (a new classifier head, its pooler/classifier from the teacher when widths agree).

MLM-KD: with --kd-weight > 0 an MLM teacher (--kd-teacher, default --teacher) sees the same masked
batch, and the student also learns its softened distribution over the vocabulary at the masked
positions (core/kinds/losses.py's kd_logits_loss at --temperature). The fine-tuned
classifier teacher has no MLM head: name its domain-MLM parent as --kd-teacher.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from shrinkbert.core.errors import ShrinkbertError
from shrinkbert.core.families import is_mlm, next_sentence_prediction
from shrinkbert.core.models import check_model_dir, load_model, load_tokenizer
from shrinkbert.students.distill_models import teacher_layer_ids
from shrinkbert.students.init import init_from_teacher
from shrinkbert.students.shape import choose_shape, shape_config
from shrinkbert.teachers.common import resolve_model_dir

if TYPE_CHECKING:  # the stage's Config, for annotations only (pretrain.py imports this module)
    from shrinkbert.teachers.configs import PretrainConfig as Config


def wants_student(cfg: Config) -> bool:
    return bool(cfg.teacher)


def check(cfg: Config) -> None:
    """The student fields' rules (one line each for a user)."""
    shape_given = cfg.layers or cfg.hidden or cfg.heads or cfg.intermediate
    if not cfg.teacher:
        if shape_given or cfg.kd_weight:
            raise ShrinkbertError("a student shape (--layers/--hidden/--heads/--intermediate) and --kd-weight need "
                                  "--teacher (the model the student is cut from and shares a tokenizer with)")
        return
    if cfg.model:
        raise ShrinkbertError("give either --model (continue pretraining it) or --teacher (pretrain a new student "
                              "of that teacher), not both")
    if cfg.kd_weight <= 0 and cfg.mlm_weight <= 0:
        raise ShrinkbertError("both --mlm-weight and --kd-weight are 0: switch one on")


def build_student(cfg: Config, model_cls):
    """(student, tokenizer, parents, record): a new shape of the teacher's, sliced from it or random."""
    from transformers import AutoConfig, AutoModel, AutoModelForMaskedLM

    teacher_dir = check_model_dir(resolve_model_dir(cfg.teacher))
    teacher_config = AutoConfig.from_pretrained(teacher_dir)
    if cfg.nsp and not next_sentence_prediction(teacher_config):
        raise ShrinkbertError(f"{cfg.teacher} is a {teacher_config.model_type} model: next-sentence prediction is "
                              "BERT's objective (pretrain its student without --nsp)")
    shape, record = choose_shape(teacher_config, layers=cfg.layers or None, hidden=cfg.hidden or None,
                                 heads=cfg.heads or None, intermediate=cfg.intermediate or None,
                                 seq_len=cfg.max_length, head="mlm")
    config = shape_config(teacher_config, shape)
    config.architectures = None
    torch.manual_seed(cfg.seed)
    # the teacher's family (shape_config keeps it): its masked-LM class, or BERT's with NSP's head too
    student = model_cls._from_config(config) if cfg.nsp else AutoModelForMaskedLM.from_config(config)
    if cfg.init == "teacher":
        teacher = load_model(AutoModelForMaskedLM if is_mlm(teacher_config) else AutoModel, teacher_dir).eval()
        record["init"] = init_from_teacher(student, teacher, layer_ids=teacher_layer_ids(cfg.init_layers),
                                           embeddings=cfg.init_embeddings)
        del teacher
    else:
        record["init"] = {"random": True}
    tokenizer = load_tokenizer(teacher_dir, teacher_config)
    return student, tokenizer, [str(teacher_dir)], record


def kd_teacher_dir(cfg: Config) -> str:
    """The MLM-KD teacher's directory ('' when KD is off)."""
    return str(resolve_model_dir(cfg.kd_teacher or cfg.teacher)) if cfg.kd_weight > 0 else ""


def load_kd_teacher(cfg: Config, vocab_size: int):
    """The MLM teacher for the KD term (eval mode, frozen), or None when --kd-weight is 0."""
    path = kd_teacher_dir(cfg)
    if not path:
        return None
    from transformers import AutoConfig, AutoModelForMaskedLM

    path = check_model_dir(resolve_model_dir(path))
    config = AutoConfig.from_pretrained(path)
    if not is_mlm(config):
        raise ShrinkbertError(f"the MLM-KD teacher {path} has no MLM head: name an MLM model (e.g. the teacher's "
                              "domain-MLM parent) with --kd-teacher, or use --kd-weight 0")
    if config.vocab_size != vocab_size:
        raise ShrinkbertError(f"the MLM-KD teacher {path} has a {config.vocab_size}-token vocabulary and the "
                              f"student {vocab_size}: both must read the same token ids")
    teacher = load_model(AutoModelForMaskedLM, path).eval()
    teacher.requires_grad_(False)
    return teacher
