"""The parts of a bundle whose model gives sentence vectors (its kind's `gives`: "sentence vectors").

The bundle stage (compress/bundle.py) writes every bundle; this module supplies what a vector
model's bundle holds and how it is checked. Both kinds of source get predict.py (a copy of
compress/static_predictor.py: `Predictor.embed/similarity/search`, `python predict.py --embed`):

- A transformer embedder exported as one graph (compress/embedding_onnx.py, fp32 or int8):
  model.onnx, tokenizer.json and embedding.json (max_length, dim, padding id, and the "runtime"
  defaults the stage times); numpy, tokenizers and onnxruntime. Its vectors must be the source
  graph's run by onnxruntime on the kit's tokenizer (compress/embedding_onnx.OnnxEmbedder), within
  ONNX_TOLERANCE, on texts at and past max_length.
- A static student (compress/static_table.py): vectors.npy (the token-vector table) and tokenizer.json;
  numpy and tokenizers only. Its vectors must be the student's exactly.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np

from shrinkbert.compress import static_predictor, token_ids
from shrinkbert.compress.configs import LOGIT_BUNDLE
from shrinkbert.compress.mobile_layout import write_mobile_layout
from shrinkbert.compress.static_table import StaticTable
from shrinkbert.compress.web_layout import WEB_VECTOR_OUTPUT, copy_renaming_output, write_web_layout
from shrinkbert.core.artifacts import check, is_artifact, read_manifest
from shrinkbert.core.config import options, refuse_unread
from shrinkbert.core.configs import DataConfig
from shrinkbert.core.errors import ShrinkbertError
from shrinkbert.core.parity_texts import PARITY_SENTENCES, parity_texts

PREDICTOR = Path(static_predictor.__file__)
HELPERS = (Path(token_ids.__file__),)  # what static_predictor imports from beside itself
ONNX_TOLERANCE = 1e-5  # the same graph on the same token ids: only thread scheduling may differ
# The static student's tokenizer does not truncate (a mean has no length limit): its long texts are
# checked at the transformers' usual length.
STATIC_PARITY_LENGTH = 128
# A vector bundle is checked on the kit's own parity texts against its own source: the options that
# choose rows, a reference and a logit tolerance (the logit-bundle and data sections of --help) are a logit
# bundle's, refused here in one line. The cache directory, a data option, is every stage's.
def vector_reads(config_cls) -> set[str]:
    return {o.name for o in options(config_cls)
            if o.group not in (LOGIT_BUNDLE, DataConfig.OPTION_GROUP) or o.name == "cache_dir"}


def parent_data(path: Path) -> dict | None:
    """The data record of the source's manifest (its task, for eval of the bundle alone), or None."""
    return (read_manifest(path).get("data") or None) if is_artifact(path) else None


def vector_bundle(src_dir: Path, cfg):
    """The parts of the bundle of the vector model at `src_dir`: its graph's, or its table's."""
    refuse_unread(cfg, vector_reads(type(cfg)),
                  "for a sentence-embedding bundle (its parity is checked on the kit's texts against its source)")
    if (src_dir / static_predictor.ONNX_FILE).is_file():
        return GraphVectorBundle(src_dir, cfg)
    return TableVectorBundle(src_dir, cfg)


class GraphVectorBundle:
    """An exported embedding graph: its Predictor runs ONNX Runtime (the stage times threads and spinning)."""
    predictor, helpers = PREDICTOR, HELPERS
    meta_file = static_predictor.META_FILE
    runs_graph = True
    typical_tokens = None  # no task rows here: its threads are chosen at b1/s128 (compress/bundle_runtime.py)

    def __init__(self, src_dir: Path, cfg):
        from shrinkbert.compress.embedding_onnx import OnnxEmbedder  # deferred: it imports torch

        self.cfg, self.src_dir = cfg, src_dir
        self.source = OnnxEmbedder(src_dir)
        self.tokenizer = self.source.tokenizer
        if not self.tokenizer.is_fast:
            raise ShrinkbertError(f"{src_dir}'s tokenizer has no tokenizer.json (a fast tokenizer): the bundle needs one")
        # --max-length where given (the bundle truncates there, and is checked there), else the source's own
        self.max_length = self.source.max_length = cfg.max_length or self.source.max_length
        self.dim = int(self.source.encode(PARITY_SENTENCES[:1]).shape[1])
        self.meta = {"max_length": self.max_length, "dim": self.dim, "pad_id": self.tokenizer.pad_token_id,
                     "pad_token": self.tokenizer.pad_token, "pooling": self.source.spec.mode,
                     "normalize": self.source.spec.normalize}
        self.parents, self.num_parameters, self.data = [str(src_dir)], None, parent_data(src_dir)
        self.manifest_extra = {"kind": "embedding", "dim": self.dim, "runtime": "onnxruntime"}

    def write(self, tmp: Path) -> None:
        """The graph (a web bundle's where transformers.js looks, its output under the name it reads),
        the tokenizer and embedding.json into `tmp`."""
        meta, graph = self.meta, self.src_dir / static_predictor.ONNX_FILE
        if self.cfg.target == "web":
            meta.update(write_web_layout(tmp, self.src_dir, "feature-extraction", self.max_length),
                        output=WEB_VECTOR_OUTPUT)
            copy_renaming_output(graph, tmp / meta["model_file"], static_predictor.ONNX_OUTPUT, WEB_VECTOR_OUTPUT)
        else:
            shutil.copyfile(graph, tmp / static_predictor.ONNX_FILE)
        self.tokenizer.backend_tokenizer.save(str(tmp / static_predictor.TOKENIZER_FILE))
        if self.cfg.target == "mobile":  # ONNX Runtime Mobile's .ort file, held to the bundle's own vectors below
            meta.update(write_mobile_layout(tmp, tmp / static_predictor.ONNX_FILE))
        (tmp / self.meta_file).write_text(json.dumps(meta, indent=2))

    def check(self, tmp: Path) -> tuple[dict, list]:
        texts = parity_texts(self.max_length)
        embed = dict(batch_size=len(texts))
        bundle = static_predictor.Predictor(tmp)
        gap = float(np.abs(bundle.embed(texts, **embed) - self.source.encode(texts, **embed)).max())
        if gap > ONNX_TOLERANCE:
            raise ShrinkbertError(f"the bundle's vectors differ from the model's by {gap:.2e} (> {ONNX_TOLERANCE}): "
                                  "not written")
        metrics = {"vs_source": {"texts": len(texts), "max_abs_diff": gap, "tolerance": ONNX_TOLERANCE}}
        detail = f"{len(texts)} texts (two at and past max_length {self.max_length}), max |diff| {gap:.1e}"
        if self.cfg.target == "mobile":
            mobile_file = self.meta["mobile"]["model_file"]
            mobile = static_predictor.Predictor(tmp, model_file=mobile_file)
            mobile_gap = float(np.abs(mobile.embed(texts, **embed) - bundle.embed(texts, **embed)).max())
            if mobile_gap > ONNX_TOLERANCE:
                raise ShrinkbertError(f"the bundle's {mobile_file} gives vectors {mobile_gap:.2e} from the bundle's "
                                      f"(> {ONNX_TOLERANCE}): not written")
            metrics["vs_source"]["mobile_ort_max_abs_diff"] = mobile_gap
            detail += f"; {mobile_file} within {mobile_gap:.1e} of the bundle"
        return metrics, [check("bundle_parity", True, detail)]


class TableVectorBundle:
    """A static student's token-vector table: numpy alone, nothing to time."""
    predictor, helpers = PREDICTOR, HELPERS
    meta_file = None
    runs_graph = False
    typical_tokens = None

    def __init__(self, src_dir: Path, cfg):
        if cfg.target != "python":
            raise ShrinkbertError(f"--target {cfg.target}: a static student has no graph to convert (its bundle is a "
                                  "vector table read with numpy); use --target python")
        self.cfg, self.src_dir = cfg, src_dir
        if cfg.max_length:
            raise ShrinkbertError(f"--max-length {cfg.max_length}: a static table's bundle averages every token of a "
                                  "text (a mean has no length limit); drop it")
        self.student = StaticTable.load(src_dir)
        self.max_length = None
        self.parents, self.data = [str(src_dir)], parent_data(src_dir)
        self.num_parameters = int(self.student.vectors.size)
        self.manifest_extra = {"kind": "embedding", "dim": self.student.dim, "runtime": "numpy"}

    def write(self, tmp: Path) -> None:
        np.save(tmp / static_predictor.VECTORS_FILE, self.student.vectors)
        self.student.tokenizer.save(str(tmp / static_predictor.TOKENIZER_FILE))

    def check(self, tmp: Path) -> tuple[dict, list]:
        texts = parity_texts(STATIC_PARITY_LENGTH)
        gap = float(np.abs(static_predictor.Predictor(tmp).embed(texts) - self.student.encode(texts)).max())
        if gap > 0:
            raise ShrinkbertError(f"the bundle's vectors differ from the student's by {gap:.2e}: not written")
        return ({"vs_source": {"texts": len(texts), "max_abs_diff": gap, "tolerance": 0.0}},
                [check("bundle_parity", True, f"{len(texts)} texts (two of {STATIC_PARITY_LENGTH} tokens and more), "
                                              "max |diff| 0")])
