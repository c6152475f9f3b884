"""A pretrained student re-indexed to its teacher's vocabulary, where both split text into the same pieces.

all-MiniLM-L6-v2 (BERT's WordPiece) and all-mpnet-base-v2 share BERT's 30,522 uncased pieces; MPNet
numbers them four places on (<s> <pad> </s> <unk> first, <mask> last). A student that learns the
teacher's vectors reads the teacher's token ids (students/embedding_distill.py tokenizes once, with
the teacher's tokenizer), so the student's word embeddings are re-ordered to the teacher's ids: each
teacher token takes the student's row of the same string, a special token the row of the same role
([CLS] for <s>, [SEP] for </s> ...). The student then ships with the teacher's tokenizer.

Refused, in one line each, where the two do not share their pieces: too little of the teacher's
vocabulary found in the student's, or sample sentences split differently (another normalisation).
"""
from __future__ import annotations

import torch

from shrinkbert.core.errors import ShrinkbertError

SPECIAL_ROLES = ("cls_token", "sep_token", "pad_token", "unk_token", "mask_token")
MIN_SHARED = 0.99       # of the teacher's vocabulary found in the student's
MAX_SPLIT_DIFFERENT = 0.01  # of the sample sentences split into other pieces
VOCABULARY_SAMPLE = 200     # training sentences both tokenizers must split alike


def same_vocabulary(student_tokenizer, teacher_tokenizer) -> bool:
    return student_tokenizer.get_vocab() == teacher_tokenizer.get_vocab()


def token_map(student_tokenizer, teacher_tokenizer, rows: int) -> list[int | None]:
    """For each of the teacher's `rows` ids, the student's id of the same token (special tokens by
    role), or None where the student has no such token."""
    student_vocab = student_tokenizer.get_vocab()
    by_role = {getattr(teacher_tokenizer, role): getattr(student_tokenizer, role) for role in SPECIAL_ROLES
               if getattr(teacher_tokenizer, role, None) and getattr(student_tokenizer, role, None)}
    mapped: list[int | None] = [None] * rows
    for token, teacher_id in teacher_tokenizer.get_vocab().items():
        if teacher_id < rows:
            mapped[teacher_id] = student_vocab.get(by_role.get(token, token))
    return mapped


def split_differently(student_tokenizer, teacher_tokenizer, sample: list[str]) -> int:
    """How many of `sample`'s sentences the two tokenizers split into different pieces."""
    return sum(student_tokenizer.tokenize(text) != teacher_tokenizer.tokenize(text) for text in sample)


def adopt_vocabulary(model, student_tokenizer, teacher_tokenizer, teacher_rows: int, sample: list[str],
                     name: str = "the student") -> dict:
    """Re-order `model`'s word embeddings (in place) to the teacher's ids; return the record of it.
    teacher_rows: the teacher's embedding rows (its config's vocab_size)."""
    mapped = token_map(student_tokenizer, teacher_tokenizer, teacher_rows)
    found = sum(index is not None for index in mapped)
    named = len(teacher_tokenizer.get_vocab())
    if found < MIN_SHARED * min(named, teacher_rows):
        raise ShrinkbertError(f"{name} knows {found:,} of the teacher's {named:,} tokens: a pretrained "
                              "student needs the teacher's tokens (the same tokenizer model and pieces)")
    different = split_differently(student_tokenizer, teacher_tokenizer, sample)
    if different > MAX_SPLIT_DIFFERENT * len(sample):
        raise ShrinkbertError(f"{name} splits {different} of {len(sample)} sample sentences into other pieces than "
                              "the teacher: its tokenizer normalises text differently")
    old = model.get_input_embeddings().weight.detach()
    rows = old[[index if index is not None else 0 for index in mapped]].clone()
    missing = [row for row, index in enumerate(mapped) if index is None]
    if missing:  # the teacher's unused ids: the mean row, as resized embeddings start in transformers
        rows[missing] = old.mean(dim=0)
    pad = teacher_tokenizer.pad_token_id
    embeddings = torch.nn.Embedding(teacher_rows, old.shape[1], padding_idx=pad)
    with torch.no_grad():
        embeddings.weight.copy_(rows)
    model.set_input_embeddings(embeddings)
    model.config.vocab_size, model.config.pad_token_id = teacher_rows, pad
    return {"vocabulary": "re-ordered to the teacher's ids by token string (special tokens by role)",
            "tokens_found": found, "teacher_rows": teacher_rows, "sample_split_differently": different,
            "sample_sentences": len(sample)}
