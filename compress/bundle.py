"""`shrinkbert bundle`: one directory that runs a model with numpy, tokenizers and (for a graph)
onnxruntime only, no torch, for every task kind.

Every bundle holds predict.py (its Predictor and command line), bundle_files.py (the check of its own
files, kept with their sizes and sha256 in its shrinkbert.json), the modules its predictor imports
from beside itself, requirements.txt, serve.py (its HTTP server, deploy/serve.py) with token_ids.py
(which counts a request's tokens) and requirements-serve.txt, and what its model needs. What that is,
and how the written bundle is checked against its source before anything is kept, depends on what the
model gives (its kind's `gives`), each answer's parts in a module of their own (`PARTS`):

- logits (sequence and pair classifiers, taggers, QA): the ONNX graph, tokenizer.json, labels.json
  and the kind's postprocessing file; parity with the source graph on the task's rows, and label
  agreement with a --reference (compress/bundle_logits.py);
- sentence vectors: an exported embedding graph or a static student's vector table, with
  embedding.json; its vectors equal to the source's on texts at and past max_length
  (compress/bundle_vectors.py).

A bundle that runs a graph gets the Predictor's thread and spinning defaults, chosen by timing it
(compress/bundle_runtime.py), in its meta file's "runtime". The directory is written atomically:
a failed check leaves nothing behind.
"""
from __future__ import annotations

import shutil
import sys
from importlib import metadata
from pathlib import Path

from shrinkbert.compress import bundle_files, token_ids
from shrinkbert.compress.bundle_logits import LogitBundle
from shrinkbert.compress.bundle_runtime import choose_runtime, parse_threads
from shrinkbert.compress.bundle_vectors import vector_bundle
from shrinkbert.compress.configs import BundleConfig as Config
from shrinkbert.core.artifacts import atomic_artifact, write_manifest
from shrinkbert.core.config import stage_main, to_dict
from shrinkbert.core.errors import require
from shrinkbert.core.kinds import kind_for_stage
from shrinkbert.deploy import serve as server


def floors(needed: list[tuple[str, str]]) -> str:
    """Requirement lines: the installed minor version of each (name, default floor), as a floor."""
    def floor(name: str, default: str) -> str:
        try:
            major, minor = metadata.version(name).split(".")[:2]
            return f"{name}>={major}.{minor}"
        except metadata.PackageNotFoundError:
            return f"{name}>={default}"
    return "\n".join(floor(name, default) for name, default in needed) + "\n"


def requirements(onnx: bool = True) -> str:
    """requirements.txt: the installed minor version of each library the Predictor imports, as a floor."""
    return floors(([("onnxruntime", "1.17")] if onnx else []) + [("tokenizers", "0.15"), ("numpy", "1.24")])


def serve_requirements() -> str:
    """requirements-serve.txt: what the bundle's serve.py adds to requirements.txt (its HTTP server)."""
    # httptools and uvloop: uvicorn picks them up when present, and they take a good share off each
    # request's cost (bench/serve_load.py); uvloop has no Windows build
    uvloop = floors([("uvloop", "0.19")]).strip() + '; sys_platform != "win32"\n'
    return floors([("uvicorn", "0.30"), ("orjson", "3.10"), ("prometheus-client", "0.20"), ("httptools", "0.6")]) + uvloop


# What a bundle holds and how it is checked, by what its model gives (TaskKind.gives): each reads its
# source in its constructor and offers predictor, helpers, meta_file, runs_graph, max_length,
# typical_tokens, parents, num_parameters, data, manifest_extra, write(dir) and check(dir).
PARTS = {"logits": LogitBundle, "sentence vectors": vector_bundle}


def bundle_parts(src_dir: Path, cfg):
    """What the bundle of the model at `src_dir` holds and how it is checked: its kind's answer to
    what the model gives."""
    return PARTS[kind_for_stage(src_dir, "bundle").gives](src_dir, cfg)


def run(cfg: Config) -> Path:
    require(bool(cfg.model) and bool(cfg.output_dir), "bundle needs --model and --output-dir")
    parse_threads(cfg.threads)  # a bad --threads is one line before any work
    parts = bundle_parts(Path(cfg.model), cfg)
    with atomic_artifact(cfg.output_dir) as tmp:
        tmp = Path(tmp)
        parts.write(tmp)
        shutil.copy2(parts.predictor, tmp / "predict.py")
        shutil.copy2(bundle_files.__file__, tmp / "bundle_files.py")  # predict.py's check of its own files
        for helper in parts.helpers:  # modules the predictor imports from beside itself
            shutil.copy2(helper, tmp / Path(helper).name)
        (tmp / "requirements.txt").write_text(requirements(onnx=parts.runs_graph))
        shutil.copy2(server.__file__, tmp / "serve.py")  # the bundle serves itself over HTTP (deploy/serve.py)
        shutil.copy2(token_ids.__file__, tmp / "token_ids.py")  # serve.py counts a request's tokens with it
        (tmp / "requirements-serve.txt").write_text(serve_requirements())
        metrics, checks = parts.check(tmp)  # raises where the bundle is not its source: nothing is kept
        if parts.runs_graph:  # also the meta file's "runtime": the Predictor's defaults
            metrics["runtime"] = choose_runtime(tmp, parts.max_length, cfg.spin, meta_file=parts.meta_file,
                                                threads=cfg.threads, typical_tokens=parts.typical_tokens)
        write_manifest(tmp, stage="bundle", parents=parts.parents, config=to_dict(cfg), metrics=metrics,
                       resolved={"max_length": parts.max_length},
                       num_parameters=parts.num_parameters, data=parts.data, checks=checks, extra=parts.manifest_extra)
    return Path(cfg.output_dir)


def main(argv: list[str] | None = None, prog: str | None = None, description: str | None = None) -> int:
    """The stage's command line (`shrinkbert NAME` passes its prog and one-line summary)."""
    return stage_main(Config, run, description or __doc__, argv, prog)


if __name__ == "__main__":
    sys.exit(main())
