"""Embedding bundles: a folder that embeds texts without torch.

- A static student (students/static.py): vectors.npy (the token-vector table) and tokenizer.json;
  numpy and tokenizers only.
- A transformer embedder exported as one ONNX graph (compress/embedding_onnx.py, fp32 or int8):
  model.onnx, tokenizer.json and embedding.json (max_length, dim, padding id, and the "runtime"
  spinning default chosen by compress/bundle_runtime.py); numpy, tokenizers and onnxruntime.

Both get predict.py (a copy of compress/static_predictor.py: `Predictor.embed/similarity/search`,
`python predict.py --embed`), requirements.txt and shrinkbert.json. Before it is written, the
bundle's own Predictor embeds example sentences and must give the source model's vectors: exactly
for the static table; for the graph, the same graph run by onnxruntime on the kit's tokenizer
(compress/embedding_onnx.OnnxEmbedder), within 1e-5.

    python -m shrinkbert.compress.static_bundle --model runs/embedding/static-minilm-d256 --output-dir runs/bundle-static
    python -m shrinkbert.compress.static_bundle --model runs/embedding/student-int8 --output-dir runs/bundle-emb
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
from importlib import metadata
from pathlib import Path

import numpy as np

from shrinkbert.compress import bundle_files, static_predictor
from shrinkbert.compress.bundle_runtime import parse_threads
from shrinkbert.compress.mobile_layout import write_mobile_layout
from shrinkbert.compress.web_layout import WEB_VECTOR_OUTPUT, copy_renaming_output, write_web_layout
from shrinkbert.core.parity_texts import PARITY_SENTENCES, parity_texts
from shrinkbert.core.artifacts import atomic_artifact, check, write_manifest
from shrinkbert.core.errors import ShrinkbertError, error_line
from shrinkbert.students.static import StaticEmbedder

# The static student's tokenizer does not truncate (a mean has no length limit): its long texts are
# checked at the transformers' usual length.
STATIC_PARITY_LENGTH = 128


ONNX_TOLERANCE = 1e-5  # the same graph on the same token ids: only thread scheduling may differ


def requirements(onnx: bool = False) -> str:
    versions = {}
    for name, default in (("tokenizers", "0.15"), ("numpy", "1.24")) + ((("onnxruntime", "1.16"),) if onnx else ()):
        try:
            versions[name] = ".".join(metadata.version(name).split(".")[:2])
        except metadata.PackageNotFoundError:
            versions[name] = default
    return "".join(f"{name}>={version}\n" for name, version in versions.items())


def run(model: str | Path, output_dir: str | Path, data: dict | None = None, spin: str = "auto",
        target: str = "python", threads: str | int = "auto") -> Path:
    """Write the bundle of the static student (or embedding graph) at `model` into output_dir
    (atomically); `data`: the data record its manifest carries (the parent's), so eval of the bundle
    alone finds the task; `spin`, `threads`: a graph's ONNX Runtime defaults (compress/bundle_runtime.py);
    `target`: python, web (a graph's transformers.js folder, compress/web_layout.py) or mobile (a
    graph's .ort file beside it, compress/mobile_layout.py)."""
    if not output_dir:
        raise ShrinkbertError("give --output-dir for the bundle")
    parse_threads(threads)  # one line before any work, as the classifier bundle (a table bundle has no threads)
    if (Path(model) / static_predictor.ONNX_FILE).is_file():
        return run_onnx(model, output_dir, data, spin, target, threads)
    if target != "python":
        raise ShrinkbertError(f"--target {target}: a static student has no graph to convert (its bundle is a "
                              "vector table read with numpy); use --target python")
    student = StaticEmbedder.load(model)
    with atomic_artifact(output_dir) as tmp:
        np.save(tmp / static_predictor.VECTORS_FILE, student.vectors)
        student.tokenizer.save(str(tmp / static_predictor.TOKENIZER_FILE))
        shutil.copyfile(static_predictor.__file__, tmp / "predict.py")
        shutil.copyfile(bundle_files.__file__, tmp / "bundle_files.py")  # predict.py's check of its own files
        (tmp / "requirements.txt").write_text(requirements())
        texts = parity_texts(STATIC_PARITY_LENGTH)
        gap = float(np.abs(static_predictor.Predictor(tmp).embed(texts) - student.encode(texts)).max())
        if gap > 0:
            raise ShrinkbertError(f"the bundle's vectors differ from the student's by {gap:.2e}: not written")
        write_manifest(tmp, stage="bundle", parents=[model], num_parameters=int(student.vectors.size), data=data,
                       config={"model": str(model), "output_dir": str(output_dir)},
                       checks=[check("bundle_parity", True, f"{len(texts)} texts (two of {STATIC_PARITY_LENGTH} "
                                     "tokens and more), max |diff| 0")],
                       extra={"kind": "embedding", "dim": student.dim, "runtime": "numpy"})
    return Path(output_dir)


def run_onnx(model: str | Path, output_dir: str | Path, data: dict | None = None, spin: str = "auto",
             target: str = "python", threads: str | int = "auto") -> Path:
    """Write the bundle of an exported embedding graph (compress/embedding_onnx.py) into output_dir;
    its spinning and thread defaults are chosen like a classifier bundle's: timed ("auto"), or set.
    `target` web: the folder transformers.js's feature-extraction pipeline loads (compress/web_layout.py),
    whose one graph the Python Predictor runs too."""
    from shrinkbert.compress.bundle_runtime import choose_runtime
    from shrinkbert.compress.embedding_onnx import OnnxEmbedder  # deferred: it imports torch

    source = OnnxEmbedder(model)
    tokenizer = source.tokenizer
    if not tokenizer.is_fast:
        raise ShrinkbertError(f"{model}'s tokenizer has no tokenizer.json (a fast tokenizer): the bundle needs one")
    dim = int(source.encode(PARITY_SENTENCES[:1]).shape[1])
    texts = parity_texts(source.max_length)
    meta = {"max_length": source.max_length, "dim": dim, "pad_id": tokenizer.pad_token_id,
            "pad_token": tokenizer.pad_token, "pooling": source.spec.mode, "normalize": source.spec.normalize}
    with atomic_artifact(output_dir) as tmp:
        if target == "web":  # one graph, where transformers.js looks, its output under the name it reads
            meta.update(write_web_layout(tmp, Path(model), "feature-extraction", source.max_length),
                        output=WEB_VECTOR_OUTPUT)
            copy_renaming_output(Path(model) / static_predictor.ONNX_FILE, tmp / meta["model_file"],
                                 static_predictor.ONNX_OUTPUT, WEB_VECTOR_OUTPUT)
        else:
            shutil.copyfile(Path(model) / static_predictor.ONNX_FILE, tmp / static_predictor.ONNX_FILE)
        tokenizer.backend_tokenizer.save(str(tmp / static_predictor.TOKENIZER_FILE))
        (tmp / static_predictor.META_FILE).write_text(json.dumps(meta, indent=2))
        shutil.copyfile(static_predictor.__file__, tmp / "predict.py")
        shutil.copyfile(bundle_files.__file__, tmp / "bundle_files.py")  # predict.py's check of its own files
        (tmp / "requirements.txt").write_text(requirements(onnx=True))
        gap = float(np.abs(static_predictor.Predictor(tmp).embed(texts, batch_size=len(texts))
                           - source.encode(texts, batch_size=len(texts))).max())
        if gap > ONNX_TOLERANCE:
            raise ShrinkbertError(f"the bundle's vectors differ from the model's by {gap:.2e} (> {ONNX_TOLERANCE}): "
                                  "not written")
        if target == "mobile":  # ONNX Runtime Mobile's .ort file, held to the bundle's own vectors
            meta.update(write_mobile_layout(tmp, tmp / static_predictor.ONNX_FILE))
            (tmp / static_predictor.META_FILE).write_text(json.dumps(meta, indent=2))
            expected = static_predictor.Predictor(tmp).embed(texts, batch_size=len(texts))
            mobile = static_predictor.Predictor(tmp, model_file=meta["mobile"]["model_file"])
            mobile_gap = float(np.abs(mobile.embed(texts, batch_size=len(texts)) - expected).max())
            if mobile_gap > ONNX_TOLERANCE:
                raise ShrinkbertError(f"the bundle's {meta['mobile']['model_file']} gives vectors {mobile_gap:.2e} "
                                      f"from the bundle's (> {ONNX_TOLERANCE}): not written")
        runtime = choose_runtime(tmp, source.max_length, spin, meta_file=static_predictor.META_FILE, threads=threads)
        write_manifest(tmp, stage="bundle", parents=[model], data=data, metrics={"runtime": runtime},
                       config={"model": str(model), "output_dir": str(output_dir), "spin": spin, "threads": threads},
                       checks=[check("bundle_parity", True, f"{len(texts)} texts (two at and past max_length "
                                     f"{source.max_length}), max |diff| {gap:.1e}"
                                     + (f"; {meta['mobile']['model_file']} within {mobile_gap:.1e} of the bundle"
                                        if target == "mobile" else ""))],
                       extra={"kind": "embedding", "dim": dim, "runtime": "onnxruntime"})
    return Path(output_dir)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="bundle an embedding model without torch (a static student or an ONNX graph)")
    parser.add_argument("--model", required=True, help="a static student's folder or an exported embedding graph's")
    parser.add_argument("--output-dir", required=True)
    parser.add_argument("--spin", choices=("auto", "on", "off"), default="auto",
                        help="a graph's ONNX Runtime spinning default: timed both ways (auto) or set")
    parser.add_argument("--threads", default="auto", help="a graph's ONNX Runtime thread default: 'auto' (timed), "
                        "'default' or a number")
    args = parser.parse_args(argv)
    try:
        print(run(args.model, args.output_dir, spin=args.spin, threads=args.threads))
    except Exception as err:  # a user's error, a full disk or a refused folder: one line
        line = error_line(err)
        if line is None:
            raise
        print(f"error: {line}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
