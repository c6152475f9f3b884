"""Initialise a student from its teacher: chosen layers, and the most important dims when narrower.

- Layers: student layer i (1-based) starts from teacher layer round(i*T/S) by default (the same
  uniform map the losses use; 6 -> 3 takes teacher layers 2, 4, 6), or from a list you give.
- Hidden (the residual stream): one set of kept dims, shared by the embeddings, every layer, the
  pooler and the classifier, so the student computes a consistent sliced copy of the teacher.
  "norm" keeps the dims with the largest word-embedding column norms; "first" keeps the first k;
  embeddings="pca" instead rotates the stream onto the top principal components of the teacher's
  word-embedding table (model2vec's ablation finds PCA of the embeddings "crucial" for its static
  students): every weight that reads or writes the stream is multiplied by that basis, so the
  student starts as the teacher seen through a rank-k projection rather than k of its coordinates.
- Attention: heads are kept whole. When the student's head size equals the teacher's, the heads
  with the largest weight norm (q, k, v rows and output columns) are kept; if the student's heads
  are smaller, the first dims of the chosen heads are kept (approximate); if they are larger than
  the teacher's, that layer's attention stays random-init (reported in the returned record).
- FFN: the neurons with the largest norm (input row x output column) are kept.
- Embeddings, pooler, classifier (and MLM head, when both have one) are carried over, sliced.
A student with the teacher's widths is an exact copy of the chosen teacher layers.
LayerNorm over fewer dims normalises differently, so a narrower student starts close to, not
equal to, a slice of the teacher; distillation closes the gap.
"""
from __future__ import annotations

import dataclasses

import torch

from shrinkbert.core.errors import ShrinkbertError
from shrinkbert.core.families import family_of

EMBEDDINGS = ("columns", "pca")  # how the student's residual stream is taken from the teacher's


def uniform_layer_ids(teacher_layers: int, student_layers: int) -> list[int]:
    """0-based teacher layer for each student layer: student i (1-based) <- teacher round(i*T/S)."""
    if not 1 <= student_layers <= teacher_layers:
        raise ShrinkbertError(f"student layers must be between 1 and the teacher's {teacher_layers}, "
                              f"got {student_layers}")
    return [int(i * teacher_layers / student_layers + 0.5) - 1 for i in range(1, student_layers + 1)]


def _base(model):
    return model.base_model


def _top(scores: torch.Tensor, k: int, how: str) -> torch.Tensor:
    if how == "first":
        return torch.arange(k)
    return torch.sort(torch.topk(scores, k).indices).values


@torch.no_grad()
def _copy(dst: torch.nn.Parameter | torch.Tensor, src: torch.Tensor) -> None:
    if dst.shape != src.shape:
        raise RuntimeError(f"shape mismatch {tuple(dst.shape)} vs {tuple(src.shape)}")
    dst.copy_(src)


# A kept set of dims is either indices (1-D: those coordinates) or a basis (2-D [teacher, student]:
# orthonormal columns the stream is projected on); indices are the special case of a 0/1 basis.
def _rows(tensor: torch.Tensor, keep) -> torch.Tensor:
    """The output side: tensor[keep], or basis^T @ tensor."""
    return tensor[keep] if keep.dim() == 1 else keep.T @ tensor


def _cols(weight: torch.Tensor, keep) -> torch.Tensor:
    """The input side: weight[:, keep], or weight @ basis."""
    return weight[:, keep] if keep.dim() == 1 else weight @ keep


def _linear(dst: torch.nn.Linear, src: torch.nn.Linear, out_idx=None, in_idx=None) -> None:
    weight = src.weight
    if out_idx is not None:
        weight = _rows(weight, out_idx)
    if in_idx is not None:
        weight = _cols(weight, in_idx)
    _copy(dst.weight, weight)
    if dst.bias is not None and src.bias is not None:
        _copy(dst.bias, src.bias if out_idx is None else _rows(src.bias, out_idx))


def _norm(dst: torch.nn.LayerNorm, src: torch.nn.LayerNorm, idx) -> None:
    # Under a basis the per-dim gain becomes the diagonal of basis^T diag(gain) basis (LayerNorm is
    # not rotation-invariant, so this is the nearest per-dim gain, not an exact copy); the bias is exact.
    _copy(dst.weight, src.weight[idx] if idx.dim() == 1 else (idx * idx).T @ src.weight)
    _copy(dst.bias, _rows(src.bias, idx))


def pca_basis(table: torch.Tensor, k: int) -> torch.Tensor:
    """[dims, k]: the top-k principal directions of an embedding table's rows (centred), orthonormal."""
    centred = table.double() - table.double().mean(dim=0, keepdim=True)
    _, _, vh = torch.linalg.svd(centred, full_matrices=False)
    return vh[:k].T.to(table.dtype).contiguous()


def _attention_dims(t_layer, layout, s_heads: int, s_head_dim: int, t_heads: int, t_head_dim: int,
                    keep: str) -> torch.Tensor | None:
    """Indices into the teacher's all-head dim for the kept heads (whole heads when sizes agree)."""
    if s_heads > t_heads or s_head_dim > t_head_dim:
        return None
    per_head = [t_layer.get_submodule(name).weight.view(t_heads, t_head_dim, -1).pow(2).sum(dim=(1, 2))
                for name in (layout.query, layout.key, layout.value)]
    per_head.append(t_layer.get_submodule(layout.attention_out).weight.view(-1, t_heads, t_head_dim).pow(2).sum(dim=(0, 2)))
    heads = _top(sum(per_head), s_heads, keep)
    return torch.cat([h * t_head_dim + torch.arange(s_head_dim) for h in heads.tolist()])


def _stream_dims(table: torch.Tensor, k: int, keep: str, embeddings: str) -> torch.Tensor:
    """The student's residual stream in the teacher's: k kept dims (indices) or a PCA basis."""
    if embeddings == "pca":
        return pca_basis(table, k)
    return _top(table.norm(dim=0), k, keep)


@torch.no_grad()
def stream_basis(teacher, k: int, keep: str = "norm", embeddings: str = "columns") -> torch.Tensor:
    """[teacher hidden, k]: the basis init_from_teacher projects the stream on (kept dims as one-hot
    columns), so that teacher_table @ basis is the student's initial word-embedding table."""
    table = teacher.get_input_embeddings().weight
    dims = _stream_dims(table, k, keep, embeddings)
    if dims.dim() == 2:
        return dims
    return torch.eye(table.shape[1], dtype=table.dtype)[:, dims]


@dataclasses.dataclass(frozen=True)
class Selection:
    """What a student takes from its teacher, decided from the teacher's weights before anything is
    copied: every weight the student starts from is the teacher's, sliced by these."""
    layers: list[int]
    """The 0-based teacher layer of each student layer."""
    stream: torch.Tensor
    """The residual stream: the kept dims (1-D indices) or a basis (2-D, [teacher, student])."""
    attention: list[torch.Tensor | None]
    """Each student layer's kept dims of the teacher layer's all-head dim (whole heads where the head
    sizes agree); None where the student's heads are wider than the teacher's (left random)."""
    ffn: list[torch.Tensor]
    """Each student layer's kept FFN neurons."""
    table_heads: torch.Tensor
    """The heads whose columns the tables shared by every layer keep (`Layout.head_tables`)."""


@torch.no_grad()
def select(student_config, teacher, layer_ids: list[int] | None = None, keep: str = "norm",
           embeddings: str = "columns") -> Selection:
    """The layers, stream dims, heads and FFN neurons a student of `student_config` takes from `teacher`
    (`init_from_teacher`'s arguments); a student this family cannot take from its teacher is refused
    in one line. A family that keeps the teacher's widths (no `Layout`) keeps every dim."""
    if keep not in ("norm", "first"):
        raise ShrinkbertError(f"init keep rule must be 'norm' or 'first', got {keep!r}")
    family = family_of(teacher)
    family.check_student(teacher.config, family.widths(student_config))
    if embeddings not in EMBEDDINGS:
        raise ShrinkbertError(f"init embeddings must be one of {', '.join(EMBEDDINGS)}, got {embeddings!r}")
    s_cfg, t_cfg = student_config, teacher.config
    if t_cfg.vocab_size != s_cfg.vocab_size:
        raise ShrinkbertError(f"student vocabulary ({s_cfg.vocab_size}) differs from the teacher's "
                              f"({t_cfg.vocab_size}); a student shares its teacher's tokenizer")
    if getattr(t_cfg, "pruned_heads", None):
        raise ShrinkbertError("the teacher has pruned heads; initialising a new student from it is not "
                              "supported (distil into the pruned model with --student instead)")
    s_w, t_w = family.widths(s_cfg), family.widths(t_cfg)
    s_h, t_h = s_w.hidden, t_w.hidden
    if s_h > t_h or s_w.intermediate > t_w.intermediate:
        raise ShrinkbertError(f"student ({s_h} hidden, {s_w.intermediate} FFN) is wider than the "
                              f"teacher ({t_h}, {t_w.intermediate}); init from the teacher needs it narrower")
    if s_cfg.max_position_embeddings > t_cfg.max_position_embeddings:
        raise ShrinkbertError("student has more positions than the teacher")
    layer_ids = list(layer_ids) if layer_ids is not None else uniform_layer_ids(
        t_cfg.num_hidden_layers, s_cfg.num_hidden_layers)
    if len(layer_ids) != s_cfg.num_hidden_layers or not all(0 <= i < t_cfg.num_hidden_layers for i in layer_ids):
        raise ShrinkbertError(f"init layers {[i + 1 for i in layer_ids]} must name {s_cfg.num_hidden_layers} "
                              f"teacher layers between 1 and {t_cfg.num_hidden_layers}")

    if not family.slices_width:  # the teacher's widths: whole layers
        return Selection(layer_ids, torch.arange(t_h), [torch.arange(t_h)] * len(layer_ids),
                         [torch.arange(t_w.intermediate)] * len(layer_ids), torch.arange(t_w.heads))
    layout = family.layout
    word_t = teacher.base_model.get_submodule(layout.embeddings).get_submodule(layout.word).weight
    stream = _stream_dims(word_t, s_h, keep, embeddings)
    t_heads, s_heads = t_w.heads, s_w.heads
    t_hd, s_hd = t_h // t_heads, s_h // s_heads
    attention, ffn, first_heads = [], [], None
    for t_i in layer_ids:
        tl = family.layers(teacher)[t_i]
        dims = _attention_dims(tl, layout, s_heads, s_hd, t_heads, t_hd, keep)
        if dims is not None and first_heads is None:
            first_heads = dims[::s_hd] // t_hd
        attention.append(dims)
        ffn_scores = tl.get_submodule(layout.ffn_in).weight.norm(dim=1) * tl.get_submodule(layout.ffn_out).weight.norm(dim=0)
        ffn.append(_top(ffn_scores, s_w.intermediate, keep))
    # the tables shared by every layer: the first layer's heads decide
    return Selection(layer_ids, stream, attention, ffn, first_heads if first_heads is not None else torch.arange(s_heads))


@torch.no_grad()
def init_from_teacher(student, teacher, layer_ids: list[int] | None = None, keep: str = "norm",
                      embeddings: str = "columns") -> dict:
    """Copy (sliced) teacher weights into `student` in place; return a record of what was kept.

    Works for any family's classifier / masked-LM / base-model pairs (core/families). `layer_ids` are
    0-based teacher layers, one per student layer (default: uniform). keep: "norm" or "first".
    embeddings: "columns" (the residual dims `keep` picks) or "pca" (the stream projected on the
    teacher word-embedding table's top principal components; heads and FFN neurons still by `keep`).
    What is taken is `select`'s.
    """
    chosen = select(student.config, teacher, layer_ids, keep, embeddings)
    family = family_of(teacher)
    if not family.slices_width:  # the teacher's widths: whole layers and everything else copied as they are
        return _copy_layers(student, teacher, chosen.layers, family)

    s_cfg = student.config
    s, t = _base(student), _base(teacher)
    layout = family.layout
    emb_t, emb_s = t.get_submodule(layout.embeddings), s.get_submodule(layout.embeddings)
    hid = chosen.stream
    _copy(emb_s.get_submodule(layout.word).weight, _cols(emb_t.get_submodule(layout.word).weight, hid))
    _copy(emb_s.get_submodule(layout.position).weight,
          _cols(emb_t.get_submodule(layout.position).weight[: s_cfg.max_position_embeddings], hid))
    if layout.token_type:
        _copy(emb_s.get_submodule(layout.token_type).weight, _cols(emb_t.get_submodule(layout.token_type).weight, hid))
    _norm(emb_s.get_submodule(layout.embedding_norm), emb_t.get_submodule(layout.embedding_norm), hid)

    random_attention = []
    for s_i, (t_i, dims, ffn) in enumerate(zip(chosen.layers, chosen.attention, chosen.ffn)):
        sl, tl = family.layers(student)[s_i], family.layers(teacher)[t_i]
        part_s, part_t = sl.get_submodule, tl.get_submodule
        if dims is None:
            random_attention.append(s_i + 1)
        else:
            for name in (layout.query, layout.key, layout.value):
                _linear(part_s(name), part_t(name), dims, hid)
            _linear(part_s(layout.attention_out), part_t(layout.attention_out), hid, dims)
        _norm(part_s(layout.attention_norm), part_t(layout.attention_norm), hid)
        _linear(part_s(layout.ffn_in), part_t(layout.ffn_in), ffn, hid)
        _linear(part_s(layout.ffn_out), part_t(layout.ffn_out), hid, ffn)
        _norm(part_s(layout.ffn_norm), part_t(layout.ffn_norm), hid)
    for table in layout.head_tables:
        _copy(s.get_submodule(table).weight, t.get_submodule(table).weight[:, chosen.table_heads])

    skip = (emb_s, family.layers(student), *(s.get_submodule(table) for table in layout.head_tables))
    carried = ["embeddings"] + _carry_rest(student, teacher, hid, skip=skip)
    return {"layers_from_teacher": [i + 1 for i in chosen.layers], "keep": keep, "embeddings": embeddings,
            "hidden_dims_kept": family.widths(s_cfg).hidden, "carried": carried,
            "random_attention_layers": random_attention}


def _where(model, module) -> str:
    """The dotted name of `module` inside `model` ("" for the model itself)."""
    return next(name for name, m in model.named_modules() if m is module)


def _outside(model, skip) -> dict[str, torch.nn.Module]:
    """The modules not under any of `skip`, named relative to the base model (heads by their own names)."""
    skipped = [_where(model, m) for m in skip]
    base = _where(model, model.base_model)
    named = {}
    for name, module in model.named_modules():
        if any(name == s or name.startswith(s + ".") for s in skipped):
            continue
        relative = name[len(base) + 1:] if base and name.startswith(base + ".") else name
        named[relative] = module
    return named


@torch.no_grad()
def _carry_rest(student, teacher, hid, skip) -> list[str]:
    """Pooler, classifier and MLM heads, whatever a family names them: each Linear and LayerNorm the
    teacher has under the same name, sliced to the kept stream on each side that is the hidden size,
    and loose parameters (a decoder's bias) of equal shape. Returns the top-level names carried."""
    t_h, s_h = teacher.config.hidden_size, student.config.hidden_size
    theirs = _outside(teacher, ())
    carried: list[str] = []
    for name, dst in _outside(student, skip).items():
        src = theirs.get(name)
        if src is None or type(src) is not type(dst):
            continue
        if isinstance(dst, torch.nn.Linear):
            out_idx = hid if src.out_features == t_h else None
            in_idx = hid if src.in_features == t_h else None
            expected = (s_h if out_idx is not None else src.out_features, s_h if in_idx is not None else src.in_features)
            if tuple(dst.weight.shape) != expected:
                continue
            _linear(dst, src, out_idx, in_idx)
        elif isinstance(dst, torch.nn.LayerNorm):
            if src.weight.shape[0] != t_h or dst.weight.shape[0] != s_h:
                continue
            _norm(dst, src, hid)
        else:
            copied = False
            for key, param in dst.named_parameters(recurse=False):
                other = getattr(src, key, None)
                if isinstance(other, torch.Tensor) and other.shape == param.shape:
                    _copy(param, other)
                    copied = True
            if not copied:
                continue
        carried.append(name.split(".")[0])
    if hasattr(student, "tie_weights"):
        student.tie_weights()
    return list(dict.fromkeys(carried))


@torch.no_grad()
def _copy_layers(student, teacher, layer_ids: list[int], family) -> dict:
    """A student of the teacher's widths: its layers are the chosen teacher layers, and everything
    else (embeddings, shared relative-position tables, final norms, heads) the teacher's, by name."""
    def entries(model):
        layers, base = _where(model, family.layers(model)), _where(model, model.base_model)
        found = {}
        for name, tensor in list(model.named_parameters()) + list(model.named_buffers()):
            if name.startswith(layers + "."):
                index, rest = name[len(layers) + 1:].split(".", 1)
                found[("layer", int(index), rest)] = tensor
            elif base and name.startswith(base + "."):
                found[("base", name[len(base) + 1:])] = tensor
            else:
                found[("head", name)] = tensor
        return found

    theirs = entries(teacher)
    carried: list[str] = []
    for key, tensor in entries(student).items():
        source = theirs.get(("layer", layer_ids[key[1]], key[2]) if key[0] == "layer" else key)
        if source is None or source.shape != tensor.shape:
            continue
        _copy(tensor, source)
        carried.append("layers" if key[0] == "layer" else "embeddings" if key[0] == "base" else key[1].split(".")[0])
    if hasattr(student, "tie_weights"):
        student.tie_weights()
    return {"layers_from_teacher": [i + 1 for i in layer_ids], "keep": "all", "embeddings": "columns",
            "hidden_dims_kept": student.config.hidden_size, "carried": list(dict.fromkeys(carried)),
            "random_attention_layers": []}


@torch.no_grad()
def carry_heads(student, teacher) -> list[str]:
    """Copy the teacher's pooler and task head into a student of the same width whose own are new
    (e.g. a general-distilled MLM student now distilled on a task); returns what was copied. A head
    is whatever the family names it (BERT's classifier Linear, RoBERTa's and ELECTRA's dense +
    out_proj, DistilBERT's pre_classifier, ModernBERT's head): each part of the student outside its
    encoder whose every Linear and LayerNorm the teacher has under the same name and shape."""
    if student.config.hidden_size != teacher.config.hidden_size:
        return []
    copied = []
    for name, mine in _head_parts(student):
        if not _has(teacher, name):
            continue
        theirs = teacher.get_submodule(name)
        pairs = [(module, dict(theirs.named_modules()).get(key)) for key, module in mine.named_modules()
                 if isinstance(module, (torch.nn.Linear, torch.nn.LayerNorm))]
        if not pairs or not all(type(src) is type(dst) and src.weight.shape == dst.weight.shape for dst, src in pairs):
            continue
        for dst, src in pairs:
            for key, param in dst.named_parameters(recurse=False):
                _copy(param, getattr(src, key))
        copied.append(name.rsplit(".", 1)[-1])
    return copied


def _head_parts(model):
    """(name, module) of the parts outside the encoder: the base model's pooler and every top-level
    child but the base model."""
    base = model.base_model_prefix
    for name, module in model.named_children():
        if name != base:
            yield name, module
        elif getattr(module, "pooler", None) is not None:
            yield f"{name}.pooler", module.pooler


def _has(model, name: str) -> bool:
    try:
        model.get_submodule(name)
        return True
    except AttributeError:
        return False
