"""int8 ONNX through Optimum's ORTQuantizer: dynamic or static, per-tensor or per-channel.

- dynamic: weights int8, activations quantized at run time; no calibration needed.
- static: activation ranges from real rows (minmax, entropy or percentile calibration); QDQ format.
- isa: avx512_vnni / avx512 / avx2 / arm64, detected from the CPU by default.
- exclude: model modules kept fp32 ("encoder.layer.0.attention", "classifier", "encoder.layer.5").
- accuracy_aware: rank module sensitivity on validation rows and keep the fewest modules fp32
  that hold the accuracy loss within `tolerance` points (see compress.accuracy_aware).
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from shrinkbert.compress import accuracy_aware, int8, skip_layer_norm
from shrinkbert.compress.common import (accuracy, align_labels, check_onnx_file, copy_graph_files, copy_tokenizer_files, encode,
                                        load_rows, onnx_file, ort_logits, ort_session, parity,
                                        judged_scores)
from shrinkbert.compress.configs import QuantizeConfig as Config
from shrinkbert.compress.onnx_modules import is_fused, node_groups, resolve
from shrinkbert.core.artifacts import atomic_artifact, check, read_manifest, write_manifest
from shrinkbert.core.config import stage_main
from shrinkbert.core.data.dataspec import resolve_spec, length_records, resolve_max_length
from shrinkbert.core.errors import ShrinkbertError, require
from shrinkbert.core.kinds import kind_of


def tokenizer_of(model_dir: Path):
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(str(model_dir), use_fast=True)
    except (OSError, ValueError) as err:
        raise ShrinkbertError(f"no usable tokenizer in {model_dir}: {str(err).splitlines()[0]}") from None


def calibration_features(cfg: Config, tokenizer, input_names: list[str], spec=None) -> dict[str, np.ndarray]:
    if cfg.calibration_data:
        path = Path(cfg.calibration_data)
        require(path.is_file(), f"calibration file {path} does not exist")
        try:
            with np.load(path, allow_pickle=False) as npz:
                features = {k: npz[k] for k in npz.files}
        except (ValueError, OSError) as err:
            raise ShrinkbertError(f"calibration file {path} is not a readable .npz: {err}") from None
    else:
        require(spec is not None, "static int8 needs calibration rows: pass --task TASK or --calibration-data FILE.npz")
        rows, _task = load_rows(spec, "train", cfg.calibration_rows, cfg.cache_dir)
        features = dict(encode(tokenizer, rows, cfg.max_length, padding="max_length"))
    return int8.check_calibration(features, input_names, cfg.min_calibration_rows)


def run(cfg: Config) -> Path:
    require(bool(cfg.model) and bool(cfg.output_dir), "quantize needs --model and --output-dir")
    require(not cfg.calibration_data or cfg.approach == "static",
            f"--calibration-data calibrates static int8 (--approach static); --approach {cfg.approach} reads no calibration data")
    src_dir = Path(cfg.model).resolve()
    src = onnx_file(src_dir)  # first: a missing model is named as such before anything reads it
    graph = check_onnx_file(src)
    kind = kind_of(src_dir)
    cfg, asked = resolve_max_length(cfg, kind, [src_dir])
    session = ort_session(src, cfg.threads or None)
    input_names = [i.name for i in session.get_inputs()]
    tokenizer = tokenizer_of(src_dir)
    spec = resolve_spec(cfg, [src_dir], required=False)
    fused = is_fused(graph)
    groups = node_groups(graph)
    if (cfg.exclude or cfg.accuracy_aware) and fused:
        raise ShrinkbertError("--exclude and accuracy-aware mode need an unfused graph (export with optimization "
                              "none or O1): O2 fusions rename the nodes that map to modules")
    excluded_groups, exclude_nodes = resolve(cfg.exclude, groups) if cfg.exclude else ([], [])

    ranges = None
    if cfg.approach == "static":
        require(not fused, "static int8 needs an unfused graph: export with optimization none or O1")
        features = calibration_features(cfg, tokenizer, input_names, spec)
        ranges = int8.calibrate(src, features, cfg.calibration, percentile=cfg.percentile,
                                operators=cfg.static_ops or None)
    float_kinds = int8.float_nodes(graph, cfg.keep_float) if cfg.approach == "static" else {}
    float_only = sorted({n for nodes in float_kinds.values() for n in nodes})

    def quantize(dst: Path, nodes: list[str]) -> Path:
        if cfg.approach == "int4":
            return int8.quantize_int4(src, dst, cfg.int4_block_size, nodes, cfg.int4_accuracy_level)
        qconfig, _ = int8.quantization_config(cfg.isa, cfg.approach == "static", cfg.per_channel, list(nodes) + float_only,
                                              cfg.reduce_range, cfg.weight_type,
                                              cfg.static_ops if cfg.approach == "static" else None)
        return int8.quantize_file(src, dst, qconfig, ranges, fused)

    rows, labels, task = [], [], None
    if spec is not None and (cfg.max_eval_rows or cfg.accuracy_aware):
        from shrinkbert.core.models import load_config

        # accuracy-aware: the tolerance is judged on the whole validation split (a token task: on its
        # words' accuracy; entity F1 is reported beside it)
        model_config = load_config(src_dir)
        rows, task = load_rows(spec, "validation", None if cfg.accuracy_aware else cfg.max_eval_rows, cfg.cache_dir,
                               kind=kind)
        labels = align_labels(rows, task, model_config.id2label, tokenizer, cfg.max_length)

    def evaluate(path: Path, on: list | None = None) -> np.ndarray:
        return ort_logits(ort_session(path, cfg.threads or None), tokenizer, rows if on is None else on, cfg.max_length)

    fp32_logits = evaluate(src) if rows else None
    search = None
    if cfg.accuracy_aware:
        require(bool(rows) and labels and labels[0] is not None,
                "accuracy-aware mode needs labelled validation rows: pass --task TASK")
        candidates = {g: nodes for g, nodes in groups.items() if g not in excluded_groups}
        def holds(fp32_outputs, int8_outputs) -> bool:  # the kind's own int8 checks (embeddings: agreement)
            return all(c["passed"] for c in kind.int8_checks(task, fp32_outputs, int8_outputs, labels, cfg.tolerance))

        search = accuracy_aware.search(src, candidates, exclude_nodes, quantize, evaluate, labels, fp32_logits,
                                       cfg.tolerance, cfg.margin_z, holds=holds)
        accuracy_aware.require_met(search, cfg.tolerance, cfg.margin_z, cfg.allow_unmet)
        kept = search["kept_fp32"]
        excluded_groups = excluded_groups + [g for g in kept if g not in excluded_groups]
        exclude_nodes = exclude_nodes + [n for g in kept for n in groups[g]]

    _, choice = int8.quantization_config(cfg.isa, cfg.approach == "static", cfg.per_channel, [], cfg.reduce_range,
                                         cfg.weight_type, cfg.static_ops if cfg.approach == "static" else None)
    isa = choice["isa"]
    if cfg.approach == "int4":
        choice = {"isa": isa, "bits": 4, "block_size": cfg.int4_block_size, "symmetric": True,
                  "accuracy_level": cfg.int4_accuracy_level, "ops": ["MatMulNBits", "GatherBlockQuantized"]}
    elif cfg.approach == "static":
        choice["keep_float"] = {k: len(v) for k, v in float_kinds.items()}
        choice["calibration"] = cfg.calibration
    with atomic_artifact(cfg.output_dir) as tmp:
        tmp = Path(tmp)
        out = quantize(tmp / "model.onnx", exclude_nodes)
        # the export kept ORT's SkipLayerNormalization fusion (its fp32 graph was no faster without it, or it
        # was told to): the int8 graph is timed both ways here, unless the export was told
        parent = read_manifest(src_dir) if (src_dir / "shrinkbert.json").is_file() else {}
        layer_norm = skip_layer_norm.choose(out, cfg.max_length, cfg.threads, len(tokenizer),
                                            skip_layer_norm.fusion_of((parent.get("metrics") or {}).get("skip_layer_norm")),
                                            needs_types=False)
        ort_session(out)  # it must load
        copy_graph_files(src_dir, tmp, ["config.json", *kind.graph_files(src_dir)])  # an embedder's pooling files
        copy_tokenizer_files(src_dir, tmp)
        metrics = {"approach": cfg.approach, "isa": isa, "per_channel": choice.get("per_channel"), "int8_choice": choice,
                   "cpu": int8.cpu_description(), "fused_graph": fused,
                   "calibration": cfg.calibration if cfg.approach == "static" else None,
                   "kept_fp32": excluded_groups, "fp32_mb": round(src.stat().st_size / 1e6, 3),
                   "int8_mb": round(out.stat().st_size / 1e6, 3),
                   "size_ratio": round(src.stat().st_size / out.stat().st_size, 3),
                   "quantized_nodes": int8.quantized_node_count(out), "eval_rows": len(rows),
                   **({"skip_layer_norm": layer_norm} if layer_norm is not None else {})}
        int8_logits = evaluate(out) if rows else None
        if rows:
            metrics.update({"val_accuracy_fp32": accuracy(fp32_logits, labels),
                            "val_accuracy_int8": accuracy(int8_logits, labels),
                            "vs_fp32": parity(fp32_logits, int8_logits)})
            metrics.update(judged_scores(task, labels, fp32=fp32_logits, int8=int8_logits))
            if metrics["val_accuracy_fp32"] is not None:
                metrics["val_accuracy_loss_points"] = round(
                    100 * (metrics["val_accuracy_fp32"] - metrics["val_accuracy_int8"]), 3)
        if search is not None:
            metrics["accuracy_aware"] = {"judged_on": f"validation {accuracy_aware.judge_for(labels).name}",
                                         "tolerance_points": cfg.tolerance, "met": search["met"],
                                         "validation_rows": search["rows"], "loss_points": search["loss_points"],
                                         "se_points": search["se_points"], "margin_z": cfg.margin_z,
                                         "loss_bound_points": search["bound_points"],
                                         "kept_fp32_modules": search["kept_fp32"],
                                         "sensitivity": search["table"], "steps": search["steps"],
                                         "accuracy_all_int8": search["accuracy_all_int8"]}
        parent_params = parent.get("num_parameters")
        checks = []
        if search is not None:
            checks.append(check("accuracy_aware_tolerance", search["met"],
                                f"validation accuracy loss within {cfg.tolerance} points"))
        # what the kind's int8 must keep (embeddings: the vectors' directions and Spearman), on the
        # validation rows, or example rows where there are none
        probe, probe_labels = (rows, labels) if rows else (load_rows(None, kind=kind)[0], None)
        fp32_probe, int8_probe = ((fp32_logits, int8_logits) if rows else
                                  (evaluate(src, probe), evaluate(out, probe)))
        checks += kind.int8_checks(task, fp32_probe, int8_probe, probe_labels, cfg.tolerance)
        failed = [c for c in checks if not c["passed"]]
        if failed and not cfg.allow_unmet:
            lever = "" if cfg.accuracy_aware else ("; --accuracy-aware on a graph exported with --optimization none "
                                                   "keeps float the fewest modules that cause it")
            raise ShrinkbertError(f"int8 {failed[0]['name']} failed: {failed[0]['detail']}: not written "
                                  f"(--allow-unmet writes it, recorded{lever})")
        write_manifest(tmp, stage="quantize", parents=[cfg.model], **length_records(cfg, asked), metrics=metrics,
                       num_parameters=parent_params, data=spec.record(task) if spec else None, checks=checks,
                       extra={"kind": kind.name})
    return Path(cfg.output_dir)


def main(argv: list[str] | None = None, prog: str | None = None, description: str | None = None) -> int:
    """The stage's command line (`shrinkbert NAME` passes its prog and one-line summary)."""
    return stage_main(Config, run, description or __doc__, argv, prog)


if __name__ == "__main__":
    sys.exit(main())
