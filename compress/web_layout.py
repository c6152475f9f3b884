"""The web target of a bundle (`shrinkbert bundle --target web`): the folder transformers.js
(npm `@huggingface/transformers`, in Node or a browser) loads as it is, beside the Python bundle.

    config.json               the model's config, with "transformers.js_config": {"dtype": "q8"}
    tokenizer.json            the same tokenizer the Python bundle runs
    tokenizer_config.json     (and special_tokens_map.json)
    onnx/model_quantized.onnx the int8 graph: transformers.js's file for dtype 'q8', so its default picks it
    index.html, app.js        a static page: type a text, see label, score and milliseconds

The Python bundle reads the same graph (labels.json "model_file"), so there is one copy of the
weights. The page imports ./transformers.min.js and ONNX Runtime's wasm files from beside it: copy
them from the pinned npm package (`bash scripts/web_runtime.sh BUNDLE`), no build step.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

QUANTIZED = "onnx/model_quantized.onnx"
PIPELINES = {"sequence": "text-classification", "token": "token-classification", "qa": "question-answering"}
PAGE = Path(__file__).with_name("web")


def write_web_layout(bundle: Path, src_dir: Path, kind_name: str) -> dict:
    """Write the transformers.js files into `bundle` (the graph already sits at QUANTIZED); returns
    the labels.json entries that tell the page and the Python bundle where things are."""
    config = json.loads((src_dir / "config.json").read_text())
    config["transformers.js_config"] = {"dtype": "q8"}
    (bundle / "config.json").write_text(json.dumps(config, indent=2))
    for name in ("tokenizer_config.json", "special_tokens_map.json"):
        if (src_dir / name).is_file():
            shutil.copy2(src_dir / name, bundle / name)
    pipeline = PIPELINES.get(kind_name, "text-classification")
    for name in ("index.html", "app.js"):
        text = (PAGE / name).read_text().replace("{{PIPELINE}}", pipeline)
        (bundle / name).write_text(text)
    return {"model_file": QUANTIZED, "web": {"pipeline": pipeline, "dtype": "q8"}}
