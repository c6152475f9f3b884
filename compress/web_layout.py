"""The web target of a bundle (`shrinkbert bundle --target web`): the folder transformers.js
(npm `@huggingface/transformers`, in Node or a browser) loads as it is, beside the Python bundle.

    config.json               the model's config, with "transformers.js_config": {"dtype": "q8"}
    tokenizer.json            the same tokenizer the Python bundle runs
    tokenizer_config.json     (and special_tokens_map.json), model_max_length set to the bundle's
                              max_length, so transformers.js truncates where the Python bundle does
    onnx/model_quantized.onnx the int8 graph: transformers.js's file for dtype 'q8', so its default picks it
    index.html, app.js        a static page: type a text, see label, score and milliseconds
    calls.mjs                 one pipeline call, shared by the page and Node: a text, a QA question and
                              context, or a sentence pair (transformers.js's text-classification takes none)

The Python bundle reads the same graph (labels.json or embedding.json "model_file"), so there is
one copy of the weights. A sentence-embedding graph pools and normalises inside itself; its output
is renamed `last_hidden_state`, the name transformers.js's feature-extraction pipeline reads, so the
pipeline's default call (`pooling: 'none'`) returns the bundle's sentence vectors as they are. The page imports ./transformers.min.js and ONNX Runtime's wasm files from beside it: copy
them from the pinned npm package (`bash scripts/web_runtime.sh BUNDLE`), no build step.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

QUANTIZED = "onnx/model_quantized.onnx"
WEB_VECTOR_OUTPUT = "last_hidden_state"  # what feature-extraction reads first (then logits, token_embeddings)
PAGE = Path(__file__).with_name("web")


def write_web_layout(bundle: Path, src_dir: Path, pipeline: str, max_length: int) -> dict:
    """Write the transformers.js files into `bundle` (the caller puts the graph at QUANTIZED);
    `pipeline`: the transformers.js pipeline, named as Hugging Face names tasks (the kind's
    `export_task`: text-classification, token-classification, question-answering, feature-extraction).
    Returns the labels.json (embedding.json) entries that tell the page and the Python bundle where
    things are."""
    config = json.loads((src_dir / "config.json").read_text())
    config["transformers.js_config"] = {"dtype": "q8"}
    (bundle / "config.json").write_text(json.dumps(config, indent=2))
    if (src_dir / "special_tokens_map.json").is_file():
        shutil.copy2(src_dir / "special_tokens_map.json", bundle / "special_tokens_map.json")
    tokenizer_config = (json.loads((src_dir / "tokenizer_config.json").read_text())
                        if (src_dir / "tokenizer_config.json").is_file() else {})
    tokenizer_config["model_max_length"] = max_length
    (bundle / "tokenizer_config.json").write_text(json.dumps(tokenizer_config, indent=2, ensure_ascii=False))
    for name in ("index.html", "app.js", "calls.mjs"):
        text = (PAGE / name).read_text().replace("{{PIPELINE}}", pipeline)
        (bundle / name).write_text(text)
    return {"model_file": QUANTIZED, "web": {"pipeline": pipeline, "dtype": "q8"}}


def copy_renaming_output(src: Path, dst: Path, old: str, new: str) -> None:
    """Copy an ONNX graph with its output `old` renamed `new` (and every node that writes it)."""
    import onnx

    model = onnx.load(str(src))
    for node in model.graph.node:
        node.output[:] = [new if name == old else name for name in node.output]
        node.input[:] = [new if name == old else name for name in node.input]
    for output in model.graph.output:
        if output.name == old:
            output.name = new
    dst.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(dst))
