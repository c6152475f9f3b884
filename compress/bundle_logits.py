"""The parts of a bundle whose model gives logits (its kind's `gives`: sequence and pair classifiers,
taggers, QA).

The bundle stage (compress/bundle.py) writes every bundle; this module supplies what a logit model's
bundle holds and how it is checked. Its files: model.onnx (normally int8), tokenizer.json,
labels.json (labels, max_length, the kind's own entries), predict.py (a copy of
compress/edge_predictor.py) and the task kind's torch-free postprocessing beside it (a copy of
core/kinds/edge/<kind>_edge.py).

The bundle's own Predictor runs on real rows and must reproduce the source ONNX model run through
transformers' tokenizer (same graph, so any difference is tokenization or packaging); when a
reference artifact is given (the fp32 ONNX or PyTorch model) the bundle's labels must agree with it
on at least `reference_agreement` of those rows (int8 may flip a few borderline rows, so the logits
are recorded, not held to the source tolerance). Rows where the reference's top two logits lie
within TIE_MARGIN are ties and are not counted: int8's rounding breaks a tie either way, and a
barely trained model (a --quick run's student) may have nothing else.

Parity is checked on the rows the task kind scores: a token classifier's are words (each word's
first sub-token's logits; agreement is the share of words whose tag matches), and a task judged by
another metric than accuracy (entity F1) records it beside accuracy.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np

from shrinkbert.compress.common import (accuracy, align_labels, check_onnx_file, judged_scores, load_pt, load_rows,
                                        mean_tokens, onnx_file, ort_logits, ort_session, parity, torch_logits)
from shrinkbert.compress.mobile_layout import write_mobile_layout
from shrinkbert.compress.web_layout import write_web_layout
from shrinkbert.core.artifacts import check, read_manifest
from shrinkbert.core.compact import is_compact
from shrinkbert.core.data.dataspec import resolve_spec, stage_max_length
from shrinkbert.core.errors import ShrinkbertError, require
from shrinkbert.core.kinds import kind_of

PREDICTOR = Path(__file__).with_name("edge_predictor.py")
META_FILE = "labels.json"
TIE_MARGIN = 0.01  # logits: a reference label this close to its runner-up is a tie


def decisive_agreement(reference: np.ndarray, candidate: np.ndarray) -> dict:
    """Label agreement on the rows the reference decides: its top two logits TIE_MARGIN or more apart."""
    top_two = np.sort(reference, axis=-1)[..., -2:]
    decisive = (top_two[..., 1] - top_two[..., 0]) >= TIE_MARGIN
    same = reference.argmax(-1) == candidate.argmax(-1)
    return {"decisive_rows": int(decisive.sum()), "tie_margin": TIE_MARGIN,
            "label_agreement_decisive": float(same[decisive].mean()) if decisive.any() else 1.0}


def labels_json(src: Path, tokenizer, max_length: int) -> tuple[dict, object]:
    from shrinkbert.core.models import load_config

    config = load_config(src)
    kind = kind_of(config)
    return {"id2label": {str(k): v for k, v in sorted(config.id2label.items())},
            "label2id": {v: int(k) for k, v in config.id2label.items()},
            "max_length": max_length, "pad_token_id": tokenizer.pad_token_id, "pad_token": tokenizer.pad_token,
            "model_file": "model.onnx", "kind": kind.name, "kind_module": kind.bundle_module,
            **kind.bundle_meta(config)}, config


def reference_logits(path: str, rows, max_length: int) -> np.ndarray:
    ref = Path(path)
    if any(ref.glob("*.onnx")):
        from transformers import AutoTokenizer

        return ort_logits(ort_session(ref), AutoTokenizer.from_pretrained(str(ref), use_fast=True), rows, max_length)
    model, tokenizer = load_pt(ref)
    return torch_logits(model, tokenizer, rows, max_length)


class LogitBundle:
    """A logit model's bundle: read the source graph and the parity rows (here), write its files
    (`write`), check the written bundle (`check`)."""
    predictor, helpers = PREDICTOR, ()
    meta_file = META_FILE
    runs_graph = True  # its Predictor runs ONNX Runtime: the stage times its threads and spinning

    def __init__(self, src_dir: Path, cfg):
        from transformers import AutoTokenizer

        self.cfg, self.src_dir = cfg, src_dir
        self.src = onnx_file(src_dir)  # first: a missing model is named as such before anything reads it
        check_onnx_file(self.src)
        self.kind = kind_of(src_dir)
        self.max_length = stage_max_length(cfg, self.kind, [src_dir])
        require((src_dir / "tokenizer.json").is_file(), f"{src_dir} has no tokenizer.json (a fast tokenizer is needed)")
        self.tokenizer = AutoTokenizer.from_pretrained(str(src_dir), use_fast=True)
        self.meta, config = labels_json(src_dir, self.tokenizer, self.max_length)
        if cfg.target == "web" and is_compact(config):  # transformers.js loads the model types it knows
            raise ShrinkbertError(f"--target web loads the graph through transformers.js, which knows no "
                                  f"{config.model_type} model: bundle it for python or mobile")
        self.kind = kind_of(self.meta["kind"])
        self.spec = resolve_spec(cfg, [cfg.model, cfg.reference], required=False)  # no task anywhere: built-in sentences
        self.rows, self.task = load_rows(self.spec, "validation", cfg.parity_rows, cfg.cache_dir, kind=self.kind)
        self.labels = align_labels(self.rows, self.task, config.id2label, self.tokenizer, self.max_length)
        # Same batches on both sides: dynamic int8 scales depend on the whole batch (padding included).
        self.session = ort_session(self.src)
        self.source = ort_logits(self.session, self.tokenizer, self.rows, self.max_length, batch_size=16)
        # where its runtime is timed (compress/bundle_runtime.py): the length its task's texts have
        self.typical_tokens = mean_tokens(self.tokenizer, self.rows, self.max_length)
        self.meta.update(self.kind.bundle_validation_meta(self.task, self.source, self.labels))  # chosen on these rows
        self.parents = [cfg.model] + ([cfg.reference] if cfg.reference else [])
        self.num_parameters = (read_manifest(src_dir).get("num_parameters")
                               if (src_dir / "shrinkbert.json").is_file() else None)
        self.data = self.spec.record(self.task) if self.spec else None
        self.manifest_extra: dict = {}

    def write(self, tmp: Path) -> None:
        """The graph, the tokenizer, labels.json and the kind's postprocessing file into `tmp`."""
        cfg, meta = self.cfg, self.meta
        if cfg.target == "web":  # one copy of the graph, where transformers.js looks for dtype 'q8'
            meta.update(write_web_layout(tmp, self.src_dir, self.kind.export_task, self.max_length))
        model_file = tmp / meta.get("model_file", "model.onnx")
        model_file.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(self.src, model_file)
        shutil.copy2(self.src_dir / "tokenizer.json", tmp / "tokenizer.json")
        if cfg.target == "mobile":  # ONNX Runtime Mobile's .ort file beside the graph, checked below
            meta.update(write_mobile_layout(tmp, model_file))
        (tmp / META_FILE).write_text(json.dumps(meta, indent=2, ensure_ascii=False))
        shutil.copy2(self.kind.bundle_module_path(), tmp / self.kind.bundle_module)

    def check(self, tmp: Path) -> tuple[dict, list]:
        """The written bundle's Predictor against the source graph (and the reference): its metrics and
        checks; raises, so nothing is written, where parity fails and failure is not allowed."""
        from shrinkbert.compress.edge_predictor import Predictor

        cfg, meta, src, src_dir, rows, task, labels = (self.cfg, self.meta, self.src, self.src_dir, self.rows,
                                                       self.task, self.labels)
        kind, unit, session, tokenizer, source = self.kind, self.kind.scored_unit, self.session, self.tokenizer, self.source
        predictor = Predictor(tmp)
        bundle = predictor.rows_logits(rows, 16)  # the same rows and batches as the source's ort_logits
        require(bundle.shape == source.shape,
                f"the bundle's predictor gives {bundle.shape[0]} outputs where {src} gives {source.shape[0]} "
                f"on the same {len(rows)} rows; no bundle written")
        vs_source = parity(source, bundle)
        long_rows = kind.long_parity_rows(self.max_length, task)  # at and past max_length: where truncation shows

        def long_logits(model) -> list[np.ndarray]:  # one row a batch, as a user's single call runs
            return [model.rows_logits([row], 1) for row in long_rows]
        if long_rows:
            vs_long = parity(ort_logits(session, tokenizer, long_rows, self.max_length, batch_size=1),
                             np.concatenate(long_logits(predictor)))
            vs_source["long_texts"] = vs_long
            vs_source["max_abs_logit_diff"] = max(vs_source["max_abs_logit_diff"], vs_long["max_abs_logit_diff"])
        if cfg.target == "mobile":  # the .ort file on the same rows and batches as the bundle, long ones too
            mobile = Predictor(tmp, model_file=meta["mobile"]["model_file"])
            vs_source["mobile_ort"] = parity(np.concatenate([bundle, *long_logits(predictor)]),
                                             np.concatenate([mobile.rows_logits(rows, 16), *long_logits(mobile)]))
            vs_source["max_abs_logit_diff"] = max(vs_source["max_abs_logit_diff"],
                                                  vs_source["mobile_ort"]["max_abs_logit_diff"])
        passed = vs_source["max_abs_logit_diff"] <= cfg.tolerance
        agreement = kind.bundle_agreement(predictor, rows, task, tokenizer, self.max_length,
                                          lambda part: ort_logits(session, tokenizer, part, self.max_length), meta)
        if agreement is not None:
            vs_source["predictions_identical"] = agreement
            passed = passed and agreement["same"] == agreement["of"]
        metrics = {"vs_source": {**vs_source, "tolerance": cfg.tolerance, "passed": passed,
                                 "rows_source": self.spec.task if self.spec else "builtin-sentences"},
                   "bundle_mb": round(sum(f.stat().st_size for f in tmp.rglob("*") if f.is_file()) / 1e6, 3),
                   "model_mb": round(src.stat().st_size / 1e6, 3),
                   "val_accuracy_bundle": accuracy(bundle, labels), "parity_failure_allowed": False}
        labelled = metrics["val_accuracy_bundle"] is not None  # the task's own metric too, where rows have labels
        if unit != "rows":  # vs_source/vs_reference "rows" count the kind's units (words) here
            metrics.update(kind=kind.name, parity_texts=len(rows))
        if labelled:
            metrics.update(judged_scores(task, labels, bundle=bundle))
        if cfg.reference:
            ref = reference_logits(cfg.reference, rows, self.max_length)
            require(ref.shape == bundle.shape,
                    f"reference {cfg.reference} gives {ref.shape[0]} outputs of {ref.shape[-1]} labels for "
                    f"{bundle.shape[0]} {unit} of {bundle.shape[-1]} (not the same kind of classifier?); "
                    "no bundle written")
            vs_reference = {**parity(ref, bundle), **decisive_agreement(ref, bundle)}
            agreed = vs_reference["label_agreement_decisive"] >= cfg.reference_agreement
            metrics["vs_reference"] = {**vs_reference, "reference": str(Path(cfg.reference).resolve()),
                                       "val_accuracy_reference": accuracy(ref, labels),
                                       "min_label_agreement": cfg.reference_agreement, "passed": agreed}
            if labelled:
                metrics["vs_reference"].update(judged_scores(task, labels, reference=ref))
            if not agreed and not cfg.allow_parity_failure:
                raise ShrinkbertError(
                    f"bundle parity failed: its labels agree with {cfg.reference} on "
                    f"{vs_reference['label_agreement_decisive']:.1%} of the {vs_reference['decisive_rows']} {unit} "
                    f"it decides (of {vs_reference['rows']}; ties, its top two logits within {TIE_MARGIN}, are not "
                    f"counted), need {cfg.reference_agreement:.0%}; no bundle written")
            passed = passed and agreed
        if not passed:
            if not cfg.allow_parity_failure:
                raise ShrinkbertError(
                    f"bundle parity failed: its predictor differs from {src} by up to "
                    f"{vs_source['max_abs_logit_diff']:.2e} in logits (tolerance {cfg.tolerance:.0e})"
                    + (f" and predicts as it does on {agreement['same']} of {agreement['of']} texts" if agreement else "")
                    + "; no bundle written")
            metrics["parity_failure_allowed"] = True
        checks = [check("parity", vs_source["max_abs_logit_diff"] <= cfg.tolerance,
                        f"max |logit diff| vs {src_dir.name} {vs_source['max_abs_logit_diff']:.2e} "
                        f"(tolerance {cfg.tolerance:.0e}) on {vs_source['rows']} {unit}"
                        + (f" and {len(long_rows)} texts at and past {self.max_length} tokens" if long_rows else "")
                        + (f"; {meta['mobile']['model_file']} within "
                           f"{vs_source['mobile_ort']['max_abs_logit_diff']:.2e} of the bundle" if "mobile" in meta else ""))]
        if agreement is not None:
            checks.append(check("predictions_identical", agreement["same"] == agreement["of"],
                                f"the bundle's own predictions equal {src_dir.name}'s on {agreement['same']} of "
                                f"{agreement['of']} parity texts"))
        if cfg.reference:
            checks.append(check("reference_agreement", metrics["vs_reference"]["passed"],
                                f"labels agree with {cfg.reference} on "
                                f"{metrics['vs_reference']['label_agreement_decisive']:.1%} of the "
                                f"{metrics['vs_reference']['decisive_rows']} {unit} it decides, of "
                                f"{metrics['vs_reference']['rows']} (need {cfg.reference_agreement:.0%}; "
                                f"{metrics['vs_reference']['label_agreement']:.1%} of all)"))
        return metrics, checks
