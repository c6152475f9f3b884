"""A new compact student (core/compact/: bilstm, cnn, bag) for a teacher: its shape from the options, its
token vectors from the teacher's.

The token vectors start as the teacher's input embeddings reduced to --token-dim by PCA (the top
principal components of its table, centred) and scaled to unit spread: the student reads the teacher's
token ids with the teacher's own sense of each token, and needs no vocabulary or word vectors of its
own. --init random starts them from noise instead.
"""
from __future__ import annotations

import torch

from shrinkbert.core.compact import build_config
from shrinkbert.core.errors import ShrinkbertError

DEFAULT_HIDDEN = {"bilstm": 150, "cnn": 100, "bag": 256}  # Tang et al.'s BiLSTM, Kim's filters, an MLP width
DEFAULT_TOKEN_DIM = 256
DEFAULT_POOLING = {"bilstm": "max", "cnn": "max", "bag": "mean"}
HEAD_WIDTH = 256  # the MLP head's hidden layer (a bag's: --hidden)


def compact_shape(cfg, teacher_config, pair: bool) -> dict:
    """The student's config fields from the options (each 0 or auto: its default)."""
    architecture = cfg.student
    if cfg.layers and architecture != "bilstm":
        raise ShrinkbertError(f"--layers stacks LSTM layers (--student bilstm); a {architecture} student has one "
                              "layer of its own")
    hidden = cfg.hidden or DEFAULT_HIDDEN[architecture]
    shape = {"embedding_dim": cfg.token_dim or min(DEFAULT_TOKEN_DIM, teacher_config.hidden_size),
             "hidden_size": hidden, "num_hidden_layers": cfg.layers or 1, "pair": pair,
             "pooling": DEFAULT_POOLING[architecture] if cfg.pooling == "auto" else cfg.pooling,
             "classifier_hidden": hidden if architecture == "bag" else HEAD_WIDTH,
             "dropout": 0.1 if cfg.dropout is None else cfg.dropout}
    if cfg.cross_attention:  # (a bag is refused with the options: students/objectives/logits.py)
        if not pair:
            raise ShrinkbertError("--cross-attention aligns a pair's two texts: this task has one text a row")
        shape["cross_attention"] = True
        if cfg.composition:
            shape["composition"] = True
    if shape["embedding_dim"] > teacher_config.hidden_size:
        raise ShrinkbertError(f"--token-dim {shape['embedding_dim']} is wider than the teacher's embeddings "
                              f"({teacher_config.hidden_size}): PCA keeps at most that many components")
    if architecture == "cnn":
        try:
            shape["kernel_sizes"] = [int(width) for width in str(cfg.kernel_sizes).split(",") if width.strip()]
        except ValueError:
            raise ShrinkbertError(f"--kernel-sizes must be comma-separated widths, got {cfg.kernel_sizes!r}") from None
        if not shape["kernel_sizes"] or min(shape["kernel_sizes"]) < 1:
            raise ShrinkbertError(f"--kernel-sizes must be widths of at least 1, got {cfg.kernel_sizes!r}")
    return shape


def teacher_token_vectors(table: torch.Tensor, dim: int) -> tuple[torch.Tensor, dict]:
    """The teacher's embedding table [V, H] reduced to [V, dim] by PCA and scaled to unit standard
    deviation, with the record of it."""
    from shrinkbert.students.init import pca_basis

    table = table.detach().float()
    centred = table - table.mean(dim=0, keepdim=True)
    basis = pca_basis(table, dim)
    reduced = centred @ basis
    kept = float(reduced.var(dim=0).sum() / centred.var(dim=0).sum())
    scale = float(reduced.std())
    return reduced / scale, {"token_vectors": f"teacher's input embeddings, PCA to {dim} dims, scaled to unit sd",
                             "variance_kept": round(kept, 4)}


def build_compact_student(cfg, teacher_config, tokenizer, pair: bool):
    """(student, record for the manifest): a new --student bilstm|cnn|bag for the teacher's task."""
    from transformers import AutoModelForSequenceClassification

    from shrinkbert.core.models import count_parameters
    from shrinkbert.students.distill_models import _first_teacher, load_teacher
    from shrinkbert.students.processes import log_main

    shape = compact_shape(cfg, teacher_config, pair)
    config = build_config(cfg.student, vocab_size=teacher_config.vocab_size, num_labels=teacher_config.num_labels,
                          id2label=dict(teacher_config.id2label), label2id=dict(teacher_config.label2id),
                          pad_token_id=tokenizer.pad_token_id, sep_token_id=tokenizer.sep_token_id, **shape)
    torch.manual_seed(cfg.seed)
    student = AutoModelForSequenceClassification.from_config(config)
    record = {"how": f"new {cfg.student} student", "architecture": cfg.student, "shape": shape}
    if cfg.init == "teacher":
        teacher = load_teacher(_first_teacher(cfg), need_attentions=False)
        vectors, record["init"] = teacher_token_vectors(teacher.get_input_embeddings().weight, shape["embedding_dim"])
        del teacher
        with torch.no_grad():
            student.get_input_embeddings().weight.copy_(vectors)
    else:
        record["init"] = {"random": True}
    record["num_parameters"] = count_parameters(student)
    log_main(f"{cfg.student} student: {shape['embedding_dim']}-dim token vectors "
             f"({'from the teacher' if cfg.init == 'teacher' else 'random'}), hidden {shape['hidden_size']}, "
             f"{record['num_parameters']:,} parameters")
    return student, record
