"""Keep or undo ONNX Runtime's SkipLayerNormalization fusion, whichever runs faster on this host.

O2 fuses each residual Add and the LayerNorm after it into one SkipLayerNormalization node. On some
hosts (AMD EPYC with AVX-512, for one) that node costs several times an Add plus a LayerNormalization,
and small int8 graphs gain most from undoing it (bench/skip_layer_norm.py measures both graphs). Which
holds is the host's business, so the export stage times both graphs, interleaved, on
the host it runs on and keeps the faster, and the quantize stage does the same for an int8 graph that
still has the node (the int8 graph gains most: a fp32 graph's choice is no guide to it); each
manifest records both figures and the choice.

Undoing is exact arithmetic rearranged: input + skip (+ bias), then LayerNormalization with the same
gamma, beta and epsilon; the parity check after it holds the graph to the PyTorch model as before.
"""
from __future__ import annotations

import functools
from pathlib import Path

import numpy as np

from shrinkbert.core.timing import interleaved_ms

FUSED = "SkipLayerNormalization"
SWITCH_MARGIN = 0.03  # undo the fusion only when that is at least 3% faster: within the noise, keep O2's graph


def unfuse(model) -> int:
    """Replace every SkipLayerNormalization node of an onnx ModelProto by Add(s) + LayerNormalization,
    in place; returns how many were replaced. A node whose mean or variance output is read is kept.
    The residual is added first and the bias after it: ONNX Runtime's optimiser, at session load, fuses a
    product + bias + residual + LayerNormalization chain back into the node, and the other order would give it
    that chain back (a slower graph: bench/graph_variants.py compares them)."""
    from onnx import helper

    read = {name for node in model.graph.node for name in node.input} | {o.name for o in model.graph.output}
    nodes, replaced = [], 0
    for node in model.graph.node:
        outputs = list(node.output) + [""] * (4 - len(node.output))
        if node.op_type != FUSED or node.domain != "com.microsoft" or any(o and o in read for o in outputs[1:3]):
            nodes.append(node)
            continue
        inputs = list(node.input) + [""] * (5 - len(node.input))
        x, skip, gamma, beta, bias = inputs[:5]
        epsilon = next((a.f for a in node.attribute if a.name == "epsilon"), 1e-12)
        total = f"{node.name or outputs[0]}/skip_sum"
        nodes.append(helper.make_node("Add", [x, skip], [total + ("_0" if bias else "")], name=f"{node.name}/Add"))
        if bias:
            nodes.append(helper.make_node("Add", [total + "_0", bias], [total], name=f"{node.name}/AddBias"))
        if outputs[3] and outputs[3] in read:  # the residual sum itself feeds a later node
            nodes.append(helper.make_node("Identity", [total], [outputs[3]], name=f"{node.name}/Sum"))
        nodes.append(helper.make_node("LayerNormalization", [total, gamma] + ([beta] if beta else []), [outputs[0]],
                                      name=f"{node.name}/LayerNorm", axis=-1, epsilon=epsilon))
        replaced += 1
    del model.graph.node[:]
    model.graph.node.extend(nodes)
    return replaced


def typed(model):
    """The model with every tensor's type and shape in value_info (ONNX Runtime's symbolic shape
    inference, which knows its contrib ops): ORT's quantizer asks onnx's own inference for a MatMul's
    output type, and on the undone ModernBERT graph (a contrib Gelu before its FFN's output MatMul) it
    found none. Run in a scratch folder: on an incomplete inference ORT saves its partial model (with
    external data files) into the working directory before raising."""
    import contextlib
    import tempfile

    from onnxruntime.tools.symbolic_shape_infer import SymbolicShapeInference

    with tempfile.TemporaryDirectory() as scratch, contextlib.chdir(scratch):
        inferred = SymbolicShapeInference.infer_shapes(model, auto_merge=True)
    if inferred is None:  # ORT declines models below opset 7
        raise ValueError("symbolic shape inference declined the model")
    return inferred


def _interleaved_ms(files: list[str], length: int, vocab_size: int, threads: int, rounds: int = 7,
                    calls: int = 20) -> list[float]:
    """Median over interleaved rounds of each graph's median call time at b1/`length`, in ms, in this
    process (which holds onnxruntime and numpy only: see `timed_apart`)."""
    import onnxruntime as ort

    sessions = []
    for file in files:
        options = ort.SessionOptions()
        if threads:
            options.intra_op_num_threads = threads
        sessions.append(ort.InferenceSession(file, options, providers=["CPUExecutionProvider"]))
    ids = np.random.default_rng(0).integers(min(100, vocab_size // 2), vocab_size, (1, length)).astype(np.int64)
    given = {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)}
    feeds = [{i.name: given[i.name] for i in session.get_inputs() if i.name in given} for session in sessions]
    runs = {str(index): functools.partial(session.run, None, feed)
            for index, (session, feed) in enumerate(zip(sessions, feeds))}
    return list(interleaved_ms(runs, rounds, calls, warmup=3).values())


def timed_apart(files: list[Path], length: int, vocab_size: int, threads: int) -> list[float]:
    """`_interleaved_ms` in a fresh process with no torch: a stage's own process holds PyTorch's thread
    pool, which slows a small ONNX graph beside it, and a bundle runs alone."""
    import json
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "shrinkbert.compress.skip_layer_norm", *map(str, files),
                           "--length", str(length), "--vocab-size", str(vocab_size), "--threads", str(threads)],
                          capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"timing the SkipLayerNormalization graphs failed: {done.stderr.strip()[-500:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def told(fusion: str) -> str:
    """The record's `chosen_by` for a fusion choice the user set (not timed)."""
    return f"--skip-layer-norm {fusion}"


def fusion_of(record: dict | None) -> str:
    """The fusion choice a later stage keeps from an earlier one's record: "fused" where the user set it (an
    int8 graph of such an export keeps the fusion too), else "auto"."""
    return "fused" if (record or {}).get("chosen_by") == told("fused") else "auto"


def choose(graph: Path, max_length: int, threads: int, vocab_size: int, fusion: str = "auto",
           needs_types: bool = True) -> dict | None:
    """Time `graph` (fused) against its unfused twin at batch 1 and max_length tokens, interleaved, in a
    process of their own, and leave the faster at `graph` (fusion auto), or keep/undo the fusion as told
    (fused, unfused); the record for the manifest, or None when the graph has no such node.
    `needs_types`: the graph will be quantized, so an undone graph must carry its types (`typed`); an
    int8 graph need not (ORT's symbolic inference does not complete on its quantized ops)."""
    import onnx

    from shrinkbert.core.device import describe_machine

    model = onnx.load(str(graph))
    if not any(node.op_type == FUSED for node in model.graph.node):
        return None
    if fusion == "fused":
        return {"kept": "fused", "chosen_by": told("fused")}
    replaced = unfuse(model)
    if not replaced:
        return None
    if needs_types:
        try:
            model = typed(model)
        except Exception as err:  # ORT's shape inference failed on the undone graph: keep ORT's own
            return {"kept": "fused", "chosen_by": f"the undone graph's types could not be inferred ({type(err).__name__})"}
    if fusion == "unfused":
        onnx.save(model, str(graph))
        return {"kept": "unfused", "nodes": replaced, "chosen_by": told("unfused")}
    twin = graph.with_name(graph.stem + ".unfused.onnx")
    onnx.save(model, str(twin))
    try:
        fused_ms, unfused_ms = timed_apart([graph, twin], max_length, vocab_size, threads)
        kept = "unfused" if unfused_ms < fused_ms * (1 - SWITCH_MARGIN) else "fused"
        if kept == "unfused":
            twin.replace(graph)
    finally:
        twin.unlink(missing_ok=True)
    return {"kept": kept, "nodes": replaced, "fused_ms_b1": round(fused_ms, 3),
            "unfused_ms_b1": round(unfused_ms, 3), "max_length": max_length,
            "threads": threads or "ort-default", "machine": describe_machine(),
            "chosen_by": f"timing: undone when at least {SWITCH_MARGIN:.0%} faster at b1/max_length, interleaved, "
                         "in a process without torch, spinning on"}


if __name__ == "__main__":  # the timing process of `timed_apart`: onnxruntime and numpy only
    import argparse
    import json

    parser = argparse.ArgumentParser(description="time ONNX graphs at b1, interleaved (skip_layer_norm.timed_apart)")
    parser.add_argument("files", nargs="+")
    parser.add_argument("--length", type=int, required=True)
    parser.add_argument("--vocab-size", type=int, required=True)
    parser.add_argument("--threads", type=int, default=0)
    args = parser.parse_args()
    print(json.dumps(_interleaved_ms(args.files, args.length, args.vocab_size, args.threads)))
