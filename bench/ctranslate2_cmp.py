"""CTranslate2 as a second runtime: a BERT sentence classifier converted to CTranslate2 int8, scored on
its task's test rows against the same model in PyTorch fp32, and timed at b1/s128 interleaved with PyTorch and
(where given) the kit's ONNX Runtime int8 graph of the same model.

    uv pip install ctranslate2        # not a kit dependency
    python bench/ctranslate2_cmp.py runs/demo/teacher=runs/demo/teacher-int8/model.onnx \\
        runs/demo/student-edge

Each MODEL[=GRAPH] is a PyTorch sequence-classification artifact (BERT: CTranslate2's encoder returns the
pooler's output, and the artifact's own classifier is applied to it) and optionally an int8 ONNX graph of it.
Prints the CPU (vendor, family/model, ISA), CTranslate2's version, and per model: accuracy in PyTorch fp32 and
in CTranslate2 int8, how often the two agree, the largest logit difference, and the p50 ms of each runtime
over --rounds interleaved rounds on --threads threads. The ONNX session flushes denormal floats to zero as the
bundle does, on the calling thread too, so PyTorch and CTranslate2 run flushed after the first graph is opened.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def test_rows(model_dir: str):
    from eval.rows import load_test_rows
    from shrinkbert.core.data.dataspec import resolve_spec

    return load_test_rows(resolve_spec(SimpleNamespace(), [model_dir]))


def timed(runners: dict, rounds: int, calls: int = 20) -> dict[str, float]:
    times: dict[str, list[float]] = {name: [] for name in runners}
    for _ in range(rounds):
        for name, call in runners.items():
            for _ in range(3):
                call()
            for _ in range(calls):
                start = time.perf_counter()
                call()
                times[name].append(time.perf_counter() - start)
    return {name: float(np.median(t) * 1000) for name, t in times.items()}


def compare(model_dir: str, graph: str | None, threads: int, rounds: int, max_length: int = 128) -> None:
    import ctranslate2
    import torch
    from ctranslate2.converters import TransformersConverter
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForSequenceClassification.from_pretrained(model_dir).eval()
    with tempfile.TemporaryDirectory() as converted:
        TransformersConverter(model_dir).convert(converted, quantization="int8", force=True)
        encoder = ctranslate2.Encoder(converted, device="cpu", compute_type="int8", intra_threads=threads,
                                      inter_threads=1)
    weight, bias = (p.detach().numpy() for p in (model.classifier.weight, model.classifier.bias))
    rows = test_rows(model_dir)
    torch_logits, ct2_logits = [], []
    with torch.no_grad():
        for i in range(0, len(rows.texts), 32):
            texts = rows.texts[i:i + 32]
            batch = tokenizer(texts, truncation=True, max_length=max_length, padding=True, return_tensors="pt")
            torch_logits.append(model(**batch).logits.numpy())
            tokens = [tokenizer.convert_ids_to_tokens(ids)
                      for ids in tokenizer(texts, truncation=True, max_length=max_length)["input_ids"]]
            ct2_logits.append(np.asarray(encoder.forward_batch(tokens).pooler_output) @ weight.T + bias)
    fp32, int8 = np.concatenate(torch_logits), np.concatenate(ct2_logits)
    labels = np.asarray(rows.labels)
    print(f"{model_dir}: {len(labels)} test rows; accuracy PyTorch fp32 {np.mean(fp32.argmax(1) == labels):.4f}, "
          f"CTranslate2 int8 {np.mean(int8.argmax(1) == labels):.4f}; they agree on "
          f"{np.mean(fp32.argmax(1) == int8.argmax(1)):.1%}, largest logit difference {np.abs(fp32 - int8).max():.3f}",
          flush=True)

    ids = np.random.default_rng(0).integers(1000, tokenizer.vocab_size, (1, max_length))
    ids[0, 0], ids[0, -1] = tokenizer.cls_token_id, tokenizer.sep_token_id
    ids_view = ctranslate2.StorageView.from_array(ids.astype(np.int32))
    lengths = ctranslate2.StorageView.from_array(np.array([max_length], dtype=np.int32))
    feed = {"input_ids": torch.tensor(ids), "attention_mask": torch.ones_like(torch.tensor(ids))}
    runners = {"PyTorch fp32": lambda: model(**feed), "CTranslate2 int8": lambda: encoder.forward_batch(ids_view, lengths)}
    if graph:
        from shrinkbert.core.ortsession import graph_feed, ort_session

        session = ort_session(graph, threads, spin=True, flush_denormals=True)  # as the bundle runs it
        onnx_feed = graph_feed({"input_ids": ids, "attention_mask": np.ones_like(ids)},
                               [i.name for i in session.get_inputs()])
        runners["ONNX Runtime int8"] = lambda: session.run(None, onnx_feed)
    torch.set_num_threads(threads)
    with torch.no_grad():
        p50 = timed(runners, rounds)
    print(f"  b1/s{max_length} p50 ms, {threads} threads, {rounds} interleaved rounds: "
          + ", ".join(f"{name} {ms:.3f}" for name, ms in p50.items()), flush=True)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("models", nargs="+", metavar="MODEL[=GRAPH]")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rounds", type=int, default=12)
    args = p.parse_args(argv)
    try:
        import ctranslate2
    except ImportError:
        raise SystemExit("error: CTranslate2 is not installed (uv pip install ctranslate2): not a kit dependency")
    from shrinkbert.core.device import describe_machine

    print(f"machine: {describe_machine()}; ctranslate2 {ctranslate2.__version__}", flush=True)
    for spec in args.models:
        model_dir, _, graph = spec.partition("=")
        compare(model_dir, graph or None, args.threads, args.rounds)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
