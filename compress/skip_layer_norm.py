"""Keep or undo ONNX Runtime's SkipLayerNormalization fusion, whichever runs faster on this host (issue 42).

O2 fuses each residual Add and the LayerNorm after it into one SkipLayerNormalization node. On an AMD
EPYC (family 25 model 17, AVX-512) with onnxruntime 1.23 that node costs several times an Add plus a
LayerNormalization: the demo's edge int8 model ran 1.26x faster at b1/s128 (2 threads) and 1.66x on one
thread with the fusion undone, its fp32 graph 1.17x, the int8 teacher 1.17x (docs/latency.md). Whether
that holds elsewhere is the host's business, so the export stage times both graphs, interleaved, on
the host it runs on and keeps the faster; the manifest records both figures and the choice.

Undoing is exact arithmetic rearranged: input + skip (+ bias), then LayerNormalization with the same
gamma, beta and epsilon; the parity check after it holds the graph to the PyTorch model as before.
"""
from __future__ import annotations

import statistics
import time
from pathlib import Path

import numpy as np

FUSED = "SkipLayerNormalization"
SWITCH_MARGIN = 0.03  # undo the fusion only when that is at least 3% faster: within the noise, keep O2's graph


def unfuse(model) -> int:
    """Replace every SkipLayerNormalization node of an onnx ModelProto by Add(s) + LayerNormalization,
    in place; returns how many were replaced. A node whose mean or variance output is read is kept."""
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


def _interleaved_ms(sessions: dict, feed_for, rounds: int = 5, calls: int = 15) -> dict[str, float]:
    """Median over interleaved rounds of each session's median call time, in ms."""
    feeds = {name: feed_for(session) for name, session in sessions.items()}
    for name, session in sessions.items():
        for _ in range(3):
            session.run(None, feeds[name])
    times: dict[str, list[float]] = {name: [] for name in sessions}
    for _ in range(rounds):
        for name, session in sessions.items():
            samples = []
            for _ in range(calls):
                start = time.perf_counter()
                session.run(None, feeds[name])
                samples.append(time.perf_counter() - start)
            times[name].append(1000 * statistics.median(samples))
    return {name: statistics.median(values) for name, values in times.items()}


def choose(graph: Path, tokenizer, max_length: int, threads: int, mode: str = "auto") -> dict | None:
    """Time `graph` (O2, fused) against its unfused twin at batch 1 and max_length tokens, interleaved,
    and leave the faster at `graph` (mode auto), or keep/undo the fusion as told (fused, unfused); the
    record for the manifest, or None when the graph has no such node."""
    import onnx

    from shrinkbert.core.device import describe_machine
    from shrinkbert.core.ortsession import ort_session

    model = onnx.load(str(graph))
    if not any(node.op_type == FUSED for node in model.graph.node):
        return None
    if mode == "fused":
        return {"kept": "fused", "chosen_by": "--skip-layer-norm fused"}
    replaced = unfuse(model)
    if not replaced:
        return None
    if mode == "unfused":
        onnx.save(model, str(graph))
        return {"kept": "unfused", "nodes": replaced, "chosen_by": "--skip-layer-norm unfused"}
    twin = graph.with_name(graph.stem + ".unfused.onnx")
    onnx.save(model, str(twin))
    try:
        # spinning on, as a bundle or the report's worker runs the graph in a process of its own
        sessions = {"fused": ort_session(graph, threads or None, spin=True),
                    "unfused": ort_session(twin, threads or None, spin=True)}
        batch = tokenizer(["hello world " * max_length], truncation=True, max_length=max_length,
                          padding="max_length", return_tensors="np")

        def feed_for(session):
            names = {i.name for i in session.get_inputs()}
            return {k: v.astype(np.int64) for k, v in batch.items() if k in names}

        ms = _interleaved_ms(sessions, feed_for)
        del sessions
        kept = "unfused" if ms["unfused"] < ms["fused"] * (1 - SWITCH_MARGIN) else "fused"
        if kept == "unfused":
            twin.replace(graph)
    finally:
        twin.unlink(missing_ok=True)
    return {"kept": kept, "nodes": replaced, "fused_ms_b1": round(ms["fused"], 3),
            "unfused_ms_b1": round(ms["unfused"], 3), "max_length": max_length,
            "threads": threads or "ort-default", "machine": describe_machine(),
            "chosen_by": f"timing: undone when at least {SWITCH_MARGIN:.0%} faster at b1/max_length, interleaved"}
