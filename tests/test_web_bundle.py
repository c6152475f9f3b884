"""The web target (issue 40): `bundle --target web` writes the folder transformers.js loads as it is,
and transformers.js in Node gives the Python bundle's outputs on 100 rows, one call a row (the same
graph through onnxruntime-node: labels equal, probabilities within 1e-4)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
TRANSFORMERS_JS = ROOT / ".web" / "node_modules" / "@huggingface" / "transformers"
NODE_SCRIPT = """
import { pipeline, env } from '@huggingface/transformers';
import { readFileSync } from 'node:fs';
env.allowRemoteModels = false;
env.localModelPath = process.argv[2];
const texts = JSON.parse(readFileSync(process.argv[4], 'utf8'));
const classify = await pipeline('text-classification', process.argv[3]);  // no dtype: the bundle's config picks q8
const out = [];
for (const text of texts) out.push(await classify(text, { top_k: null }));
console.log(JSON.stringify(out));
"""


def _node_or_skip() -> str:
    node = shutil.which("node")
    ready = node is not None and (TRANSFORMERS_JS / "package.json").is_file()
    if not ready:
        reason = ("node is not installed" if node is None
                  else "transformers.js is not installed (bash scripts/web_install.sh)")
        if os.environ.get("CI"):
            pytest.fail(f"the web bundle's Node test cannot run on CI: {reason}")
        pytest.skip(reason)
    return node


@pytest.fixture(scope="module")
def web_bundle(tmp_path_factory) -> Path:
    import torch
    from transformers import AutoModelForSequenceClassification

    import shrinkbert
    from fixtures import make_tiny_bert, restamp, write_tiny_csv

    root = tmp_path_factory.mktemp("web")
    model_dir = make_tiny_bert(root / "model")
    model = AutoModelForSequenceClassification.from_pretrained(model_dir)
    with torch.no_grad():  # a decisive classifier, so that labels are not ties
        model.classifier.weight.mul_(20.0)
    model.save_pretrained(model_dir, safe_serialization=True)
    restamp(model_dir)
    task = write_tiny_csv(root / "tiny.csv", n=160)
    onnx = shrinkbert.export(model=str(model_dir), output_dir=str(root / "onnx"), task=str(task))
    int8 = shrinkbert.quantize(model=str(onnx.path), output_dir=str(root / "int8"), task=str(task))
    return Path(shrinkbert.bundle(model=str(int8.path), output_dir=str(root / "site" / "bundle"), target="web",
                                  task=str(task), max_length=32).path)


def test_the_layout_is_what_transformers_js_reads(web_bundle):
    names = {str(p.relative_to(web_bundle)) for p in web_bundle.rglob("*") if p.is_file()}
    assert {"config.json", "tokenizer.json", "tokenizer_config.json", "onnx/model_quantized.onnx", "index.html",
            "app.js", "predict.py", "labels.json"} <= names
    assert "model.onnx" not in names  # one copy of the graph, shared with the Python bundle
    assert json.loads((web_bundle / "config.json").read_text())["transformers.js_config"] == {"dtype": "q8"}
    assert "'text-classification'" in (web_bundle / "app.js").read_text()


def test_node_gives_the_python_bundles_outputs(web_bundle, tmp_path):
    from fixtures import tiny_sentences

    from shrinkbert.compress.edge_predictor import Predictor

    node = _node_or_skip()
    texts = [text for text, _ in tiny_sentences(100, seed=11)]
    (tmp_path / "texts.json").write_text(json.dumps(texts))
    script = TRANSFORMERS_JS.parents[1].parent / "web_bundle_check.mjs"  # beside node_modules: resolvable
    script.write_text(NODE_SCRIPT)
    done = subprocess.run([node, str(script), str(web_bundle.parent), web_bundle.name, str(tmp_path / "texts.json")],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    node_out = json.loads(done.stdout.strip().splitlines()[-1])
    predictor = Predictor(web_bundle)
    labels = predictor.labels
    python = np.stack([predictor.probabilities(predictor.encode([text]))[0] for text in texts])
    from_node = np.array([[next(r["score"] for r in row if r["label"] == label) for label in labels] for row in node_out])
    assert [labels[i] for i in python.argmax(1)] == [max(row, key=lambda r: r["score"])["label"] for row in node_out]
    assert np.abs(python - from_node).max() < 1e-4
