"""Map model module names (what users read and write) to ONNX node names (what ORT needs).

Optimum's TorchScript export names each node by the module path that produced it, e.g.
"/bert/encoder/layer.3/attention/self/query/MatMul" -> group "encoder.layer.3.attention". Users
name groups ("encoder.layer.3.attention", "encoder.layer.3.intermediate", "encoder.layer.3.output",
"embeddings", "pooler", "classifier") or a whole layer ("encoder.layer.3"); never raw node names.
"""
from __future__ import annotations

from collections import defaultdict

from shrinkbert.compress.common import BASE_PREFIXES, module_group
from shrinkbert.core.errors import ShrinkbertError

# Op types whose presence means ORT fusions (O2+) rewrote the graph and renamed what they fused.
FUSED_OPS = {"Attention", "MultiHeadAttention", "SkipLayerNormalization", "EmbedLayerNormalization",
             "BiasGelu", "FastGelu", "QAttention"}
QUANTIZABLE_OPS = {"MatMul", "Gemm", "Gather", "Attention", "EmbedLayerNormalization"}


def _order_key(group: str):
    parts = group.split(".")
    if group == "embeddings":
        return (0, 0, 0)
    if parts[0] == "encoder":
        return (1, int(parts[2]), ["attention", "intermediate", "output"].index(parts[3]))
    return (2, 0 if group == "pooler" else 1, 0)


def node_groups(model) -> dict[str, list[str]]:
    """{module group: [names of all nodes under it]}, in model order, for groups with a weight to quantize."""
    initializers = {i.name for i in model.graph.initializer}
    groups: dict[str, list[str]] = defaultdict(list)
    has_weight: set[str] = set()
    for node in model.graph.node:
        group = module_group(node.name)
        if not group:
            continue
        groups[group].append(node.name)
        if node.op_type in QUANTIZABLE_OPS and any(i in initializers for i in node.input):
            has_weight.add(group)
    return {g: groups[g] for g in sorted(has_weight, key=_order_key)}


def is_fused(model) -> bool:
    return any(node.op_type in FUSED_OPS for node in model.graph.node)


def normalise(name: str) -> str:
    name = name.strip().replace("/", ".")
    for prefix in BASE_PREFIXES:
        if name.startswith(prefix + "."):
            name = name[len(prefix) + 1:]
    return name


def resolve(names: list[str], groups: dict[str, list[str]]) -> tuple[list[str], list[str]]:
    """(module groups, ONNX node names) for user-given module names; unknown names -> one clear line."""
    chosen: list[str] = []
    for raw in names:
        name = normalise(raw)
        matches = [g for g in groups if g == name or g.startswith(name + ".")]
        if not matches:
            known = ", ".join(groups) if len(groups) <= 12 else ", ".join(list(groups)[:12]) + ", ..."
            raise ShrinkbertError(f"no module '{raw}' with quantizable weights in this ONNX graph (known: {known})")
        chosen.extend(m for m in matches if m not in chosen)
    nodes = [n for g in chosen for n in groups[g]]
    return chosen, nodes
