"""A learned projection of the teacher's embedding table, trained in distillation and folded away.

    --init-embeddings projected

The student's word embeddings start as `teacher_table @ basis` (the same kept dims or PCA basis
as students/init.py) and, while distilling, stay `teacher_table @ P` with the teacher's table frozen
and only P [teacher hidden, student hidden] learned: every token's embedding moves through one shared
map, so tokens rare in the training text move with the frequent ones instead of staying where the
slice left them. Before the student is saved the product is folded into a plain embedding table:
the saved model is an ordinary BERT with no extra module and no inference cost.
"""
from __future__ import annotations

import torch
from torch import nn

from shrinkbert.core.errors import ShrinkbertError


class ProjectedEmbedding(nn.Module):
    """Embedding lookups of a frozen table through a learned projection: table[ids] @ projection."""

    def __init__(self, table: torch.Tensor, basis: torch.Tensor, padding_idx: int | None = None):
        super().__init__()
        if table.shape[1] != basis.shape[0]:
            raise ShrinkbertError(f"projection basis {tuple(basis.shape)} does not fit a table of width {table.shape[1]}")
        self.register_buffer("table", table.detach().clone(), persistent=True)
        self.projection = nn.Parameter(basis.detach().clone().to(table.dtype))
        self.padding_idx = padding_idx
        self.embedding_dim = basis.shape[1]
        self.num_embeddings = table.shape[0]

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return nn.functional.embedding(input_ids, self.table) @ self.projection

    @torch.no_grad()
    def folded(self) -> nn.Embedding:
        """The plain embedding table this computes (table @ projection)."""
        embedding = nn.Embedding(self.num_embeddings, self.embedding_dim, padding_idx=self.padding_idx)
        embedding.weight.copy_(self.table @ self.projection)
        return embedding.to(self.projection.device)


def attach_projection(student, teacher, basis: torch.Tensor) -> dict:
    """Replace the student's word embeddings by the teacher's table through a learned projection
    initialised to `basis` (so the student computes exactly what it did); a record for the manifest."""
    if student.get_output_embeddings() is not None:
        raise ShrinkbertError("--init-embeddings projected works for classifiers only: an MLM student ties its "
                              "output layer to the embedding table, which the projection replaces")
    table = teacher.get_input_embeddings().weight
    padding_idx = student.get_input_embeddings().padding_idx
    student.set_input_embeddings(ProjectedEmbedding(table, basis, padding_idx))
    return {"embeddings": "projected", "projection": list(basis.shape), "table": "teacher's, frozen"}


def fold_projection(student) -> bool:
    """Fold a ProjectedEmbedding back into a plain table, in place; True when there was one."""
    embeddings = student.get_input_embeddings()
    if not isinstance(embeddings, ProjectedEmbedding):
        return False
    student.set_input_embeddings(embeddings.folded())
    return True
