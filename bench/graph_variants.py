"""Two graph rewrites, measured on one model: the embedding fusion and the order of the
undone SkipLayerNormalization's Adds, each as dynamic int8 with the kit's defaults for this host.

    python bench/graph_variants.py runs/demo/edge-trimmed --cases 1x25,1x128 --threads 1,2

From the model folder (a trimmed, fine-tuned classifier) it builds four int8 graphs, O2 with:
  eln0-residual  the kit's graph: no EmbedLayerNormalization (Optimum's default, which says the fusion does
                 not quantize), the fusion undone as `compress/skip_layer_norm.unfuse` writes it (the
                 residual added to the product, then the bias)
  eln0-bias      the same, the bias added to the product first, then the residual: the form in which
                 ONNX Runtime's int8 product fusion takes the bias in
  eln1-residual  EmbedLayerNormalization fused, which ONNX Runtime's quantizer turns into
                 QEmbedLayerNormalization (the embedding gather in int8, one node for the ~14 of the
                 embeddings); the residual first
  eln1-bias      both
It scores each on the model's own test rows (accuracy, agreement with the fp32 O2 graph) and times them
interleaved (rounds of calls, median of medians; flushed denormals, as a bundle runs) at each case and
thread count, beside the kit's graph loaded at ONNX Runtime's lower graph optimisation levels (the
session's own rewrites at load; a bundle loads at ORT's default, all of them). Prints the CPU (vendor,
family/model, ISA).
"""
from __future__ import annotations

import argparse
import functools
import shutil
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def optimized(plain: Path, out: Path, embed_fusion: bool) -> Path:
    from optimum.onnxruntime import ORTOptimizer
    from optimum.onnxruntime.configuration import OptimizationConfig

    with tempfile.TemporaryDirectory() as work:
        optimizer = ORTOptimizer.from_pretrained(str(plain), file_names=["model.onnx"])
        optimizer.optimize(OptimizationConfig(optimization_level=2, disable_embed_layer_norm_fusion=not embed_fusion),
                           save_dir=work)
        shutil.copy(next(Path(work).glob("*.onnx")), out)
    return out


def unfuse_bias_first(model) -> None:
    """`skip_layer_norm.unfuse` with the other order: (product + bias) + residual, then LayerNorm."""
    from onnx import helper

    producer = {name: node for node in model.graph.node for name in node.output}
    nodes = []
    for node in model.graph.node:
        if node.op_type != "SkipLayerNormalization":
            nodes.append(node)
            continue
        x, skip, gamma, beta, bias = (list(node.input) + [""] * 5)[:5]
        if "MatMul" not in getattr(producer.get(x), "op_type", ""):
            x, skip = skip, x
        if bias:
            nodes.append(helper.make_node("Add", [x, bias], [node.name + "/biased"], name=node.name + "/AddBias"))
            x = node.name + "/biased"
        nodes.append(helper.make_node("Add", [x, skip], [node.name + "/sum"], name=node.name + "/Add"))
        epsilon = next((a.f for a in node.attribute if a.name == "epsilon"), 1e-12)
        nodes.append(helper.make_node("LayerNormalization", [node.name + "/sum", gamma, beta], [node.output[0]],
                                      name=node.name + "/LayerNorm", axis=-1, epsilon=epsilon))
    del model.graph.node[:]
    model.graph.node.extend(nodes)


def session(path: Path, threads: int, level: str = "ORT_ENABLE_ALL"):
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.graph_optimization_level = getattr(ort.GraphOptimizationLevel, level)
    options.add_session_config_entry("session.set_denormal_as_zero", "1")
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def ran(path: Path) -> str:
    """The graph a session really runs after ONNX Runtime's own rewrites at load: node count and the
    residual/normalisation ops, from the optimised model it is told to save."""
    import collections

    import onnx
    import onnxruntime as ort

    with tempfile.TemporaryDirectory() as scratch:
        options = ort.SessionOptions()
        options.optimized_model_filepath = str(Path(scratch) / "ran.onnx")
        options.log_severity_level = 3  # its warning that a saved optimised model is host-specific
        ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        ops = collections.Counter(node.op_type for node in onnx.load(options.optimized_model_filepath).graph.node)
    return (f"{sum(ops.values())} nodes, " + ", ".join(f"{ops[op]} {op}" for op in
                                                       ("SkipLayerNormalization", "Add", "LayerNormalization")))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", help="a fine-tuned classifier folder of the kit (e.g. runs/demo/edge-trimmed)")
    p.add_argument("--cases", default="1x25,1x128", help="BATCHxTOKENS, comma-separated")
    p.add_argument("--threads", default="1,2")
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--calls", type=int, default=40)
    p.add_argument("--out", default=str(ROOT / "runs/bench/graph-variants"))
    args = p.parse_args(argv)
    import onnx

    from shrinkbert.compress import int8, skip_layer_norm
    from shrinkbert.compress.common import ort_logits
    from shrinkbert.compress.export import export_graph
    from shrinkbert.core.data.dataspec import resolve_spec
    from shrinkbert.core.device import describe_machine, detect_isa
    from shrinkbert.core.models import load_tokenizer
    from shrinkbert.core.timing import interleaved_ms
    from shrinkbert.eval.rows import load_test_rows

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    export_graph(args.model, out / "plain")
    qconfig, choice = int8.quantization_config(detect_isa(), False, None, [])
    graphs = {}
    for embed_fusion in (False, True):
        fused = optimized(out / "plain", out / f"o2-eln{int(embed_fusion)}.onnx", embed_fusion)
        if not embed_fusion:
            graphs["fp32"] = fused
        for order in ("residual", "bias"):
            model = onnx.load(str(fused))
            skip_layer_norm.unfuse(model) if order == "residual" else unfuse_bias_first(model)
            typed = out / f"eln{int(embed_fusion)}-{order}.fp32.onnx"
            onnx.save(skip_layer_norm.typed(model), str(typed))
            graphs[f"eln{int(embed_fusion)}-{order}"] = int8.quantize_file(typed, out / f"eln{int(embed_fusion)}-{order}.onnx",
                                                                          qconfig, fused=True)
    print(f"machine: {describe_machine()}; int8 defaults: {choice['why']}", flush=True)

    test = load_test_rows(resolve_spec(SimpleNamespace(), [args.model]))
    rows = [{"text": text, "text_pair": test.pairs[i] if test.pairs else None, "label": label}
            for i, (text, label) in enumerate(zip(test.texts, test.labels))]
    tokenizer = load_tokenizer(args.model)

    def logits(sess) -> np.ndarray:  # the kit's own feed (compress/common.ort_logits), 16 rows a call
        return ort_logits(sess, tokenizer, rows, batch_size=16)

    labels = np.asarray(test.labels)
    reference = logits(session(graphs["fp32"], 2)).argmax(1)
    print(f"fp32 O2: accuracy {np.mean(reference == labels):.4f} on {len(labels)} test rows")
    int8_graphs = {name: path for name, path in graphs.items() if name != "fp32"}
    for name, path in int8_graphs.items():
        predicted = logits(session(path, 2)).argmax(1)
        nodes = len(onnx.load(str(path)).graph.node)
        print(f"{name:14s} {nodes} nodes, accuracy {np.mean(predicted == labels):.4f}, "
              f"agrees with fp32 {np.mean(predicted == reference):.2%}; as ONNX Runtime runs it: {ran(path)}",
              flush=True)
    for threads in [int(t) for t in args.threads.split(",")]:
        for case in args.cases.split(","):
            batch, length = (int(n) for n in case.split("x"))
            ids = np.random.default_rng(0).integers(1000, 5000, (batch, length)).astype(np.int64)
            given = {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)}
            sessions = {name: session(path, threads) for name, path in int8_graphs.items()}
            sessions.update({f"eln0-residual@{level.split('_')[-1].lower()}": session(int8_graphs["eln0-residual"], threads, level)
                             for level in ("ORT_ENABLE_BASIC", "ORT_ENABLE_EXTENDED")})
            runs = {name: functools.partial(s.run, None, {i.name: given[i.name] for i in s.get_inputs()})
                    for name, s in sessions.items()}
            ms = interleaved_ms(runs, args.rounds, args.calls, warmup=5)
            print(f"{threads} thread(s) b{batch}/s{length}: " + ", ".join(f"{n} {v:.3f} ms" for n, v in ms.items()),
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
