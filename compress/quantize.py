"""int8 ONNX through Optimum's ORTQuantizer: dynamic or static, per-tensor or per-channel.

- dynamic: weights int8, activations quantized at run time; no calibration needed.
- static: activation ranges from real rows (minmax, entropy or percentile calibration); QDQ format.
- isa: avx512_vnni / avx512 / avx2 / arm64, detected from the CPU by default.
- exclude: model modules kept fp32 ("encoder.layer.0.attention", "classifier", "encoder.layer.5").
- accuracy_aware: rank module sensitivity on validation rows and keep the fewest modules fp32
  that hold the accuracy loss within `tolerance` points (see compress.accuracy_aware).
"""
from __future__ import annotations

import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from shrinkbert.compress import accuracy_aware, int8
from shrinkbert.compress.common import (accuracy, align_labels, check_onnx_file, copy_tokenizer_files, encode, load_rows,
                             onnx_file, ort_logits, ort_session, parity)
from shrinkbert.compress.onnx_modules import is_fused, node_groups, resolve
from shrinkbert.core.artifacts import atomic_artifact, read_manifest, write_manifest
from shrinkbert.core.config import field, stage_main, to_dict
from shrinkbert.core.errors import ShrinkbertError, require


@dataclass
class Config:
    model: str = field("", "ONNX artifact (compress.export) to quantize")
    output_dir: str = field("", "where the int8 ONNX artifact is written")
    mode: str = field("dynamic", "'dynamic' or 'static' (calibrated activations)")
    calibration: str = field("minmax", "static calibration: minmax, entropy or percentile")
    percentile: float = field(99.999, "percentile for percentile calibration")
    calibration_rows: int = field(128, "train rows used for static calibration")
    min_calibration_rows: int = field(32, "refuse a calibration set smaller than this")
    calibration_data: str = field("", "optional .npz of pre-tokenized inputs (input_ids, attention_mask, ...) to calibrate on")
    per_channel: bool = field(False, "per-channel weight scales (else per-tensor)")
    isa: str = field("auto", "instruction set: auto, avx512_vnni, avx512, avx2, arm64")
    exclude: list[str] = field([], "model modules to keep fp32, e.g. encoder.layer.0.attention,classifier")
    accuracy_aware: bool = field(False, "keep the fewest sensitive modules fp32 to meet --tolerance")
    tolerance: float = field(0.5, "largest allowed validation accuracy loss, in points (accuracy-aware mode)")
    data: str = field("", "task: validation rows to score, train rows to calibrate")
    eval_rows: int = field(256, "validation rows for accuracy fp32 vs int8 (0: skip)")
    max_length: int = field(128, "tokens per row")
    threads: int = field(0, "ONNX Runtime threads for the checks (0: ORT default)")
    seed: int = field(0, "seed for the data split")


def tokenizer_of(model_dir: Path):
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(str(model_dir), use_fast=True)
    except (OSError, ValueError) as err:
        raise ShrinkbertError(f"no usable tokenizer in {model_dir}: {str(err).splitlines()[0]}") from None


def calibration_features(cfg: Config, tokenizer, input_names: list[str]) -> dict[str, np.ndarray]:
    if cfg.calibration_data:
        path = Path(cfg.calibration_data)
        require(path.is_file(), f"calibration file {path} does not exist")
        try:
            with np.load(path, allow_pickle=False) as npz:
                features = {k: npz[k] for k in npz.files}
        except (ValueError, OSError) as err:
            raise ShrinkbertError(f"calibration file {path} is not a readable .npz: {err}") from None
    else:
        require(bool(cfg.data), "static int8 needs calibration rows: pass --data TASK or --calibration-data FILE.npz")
        rows, _task = load_rows(cfg.data, "train", cfg.calibration_rows, cfg.seed)
        features = dict(encode(tokenizer, rows, cfg.max_length, padding="max_length"))
    return int8.check_calibration(features, input_names, cfg.min_calibration_rows)


def run(cfg: Config) -> Path:
    require(bool(cfg.model) and bool(cfg.output_dir), "quantize needs --model and --output-dir")
    require(cfg.mode in ("dynamic", "static"), f"mode must be 'dynamic' or 'static', got '{cfg.mode}'")
    src_dir = Path(cfg.model).resolve()
    src = onnx_file(src_dir)
    graph = check_onnx_file(src)
    session = ort_session(src, cfg.threads or None)
    input_names = [i.name for i in session.get_inputs()]
    tokenizer = tokenizer_of(src_dir)
    fused = is_fused(graph)
    groups = node_groups(graph)
    if (cfg.exclude or cfg.accuracy_aware) and fused:
        raise ShrinkbertError("--exclude and accuracy-aware mode need an unfused graph (export with optimization "
                              "none or O1): O2 fusions rename the nodes that map to modules")
    excluded_groups, exclude_nodes = resolve(cfg.exclude, groups) if cfg.exclude else ([], [])

    ranges = None
    if cfg.mode == "static":
        require(not fused, "static int8 needs an unfused graph: export with optimization none or O1")
        features = calibration_features(cfg, tokenizer, input_names)
        ranges = int8.calibrate(src, features, cfg.calibration, percentile=cfg.percentile)

    def quantize(dst: Path, nodes: list[str]) -> Path:
        qconfig, _ = int8.quantization_config(cfg.isa, cfg.mode == "static", cfg.per_channel, nodes)
        return int8.quantize_file(src, dst, qconfig, ranges, fused)

    rows, labels = [], []
    if cfg.data and cfg.eval_rows:
        from transformers import AutoConfig

        rows, task = load_rows(cfg.data, "validation", cfg.eval_rows, cfg.seed)
        labels = align_labels(rows, task, AutoConfig.from_pretrained(str(src_dir)).id2label)

    def evaluate(path: Path) -> np.ndarray:
        return ort_logits(ort_session(path, cfg.threads or None), tokenizer, rows, cfg.max_length)

    fp32_logits = evaluate(src) if rows else None
    search = None
    if cfg.accuracy_aware:
        require(bool(rows) and labels and labels[0] is not None,
                "accuracy-aware mode needs labelled validation rows: pass --data TASK")
        candidates = {g: nodes for g, nodes in groups.items() if g not in excluded_groups}
        search = accuracy_aware.search(src, candidates, exclude_nodes, quantize, evaluate, labels, fp32_logits,
                                       cfg.tolerance)
        kept = search["kept_fp32"]
        excluded_groups = excluded_groups + [g for g in kept if g not in excluded_groups]
        exclude_nodes = exclude_nodes + [n for g in kept for n in groups[g]]

    _, isa = int8.quantization_config(cfg.isa, cfg.mode == "static", cfg.per_channel, [])
    with atomic_artifact(cfg.output_dir) as tmp:
        tmp = Path(tmp)
        out = quantize(tmp / "model.onnx", exclude_nodes)
        ort_session(out)  # it must load
        for name in ("config.json",):
            if (src_dir / name).is_file():
                shutil.copy2(src_dir / name, tmp / name)
        copy_tokenizer_files(src_dir, tmp)
        metrics = {"mode": cfg.mode, "isa": isa, "per_channel": cfg.per_channel, "fused_graph": fused,
                   "calibration": cfg.calibration if cfg.mode == "static" else None,
                   "kept_fp32": excluded_groups, "fp32_mb": round(src.stat().st_size / 1e6, 3),
                   "int8_mb": round(out.stat().st_size / 1e6, 3),
                   "size_ratio": round(src.stat().st_size / out.stat().st_size, 3),
                   "quantized_nodes": int8.quantized_node_count(out), "eval_rows": len(rows)}
        if rows:
            int8_logits = evaluate(out)
            metrics.update({"val_accuracy_fp32": accuracy(fp32_logits, labels),
                            "val_accuracy_int8": accuracy(int8_logits, labels),
                            "vs_fp32": parity(fp32_logits, int8_logits)})
            if metrics["val_accuracy_fp32"] is not None:
                metrics["val_accuracy_loss_points"] = round(
                    100 * (metrics["val_accuracy_fp32"] - metrics["val_accuracy_int8"]), 3)
        if search is not None:
            metrics["accuracy_aware"] = {"tolerance_points": cfg.tolerance, "met": search["met"],
                                         "sensitivity": search["table"], "steps": search["steps"],
                                         "accuracy_all_int8": search["accuracy_all_int8"]}
        parent_params = read_manifest(src_dir).get("num_parameters") if (src_dir / "shrinkbert.json").is_file() else None
        write_manifest(tmp, stage="quantize", parents=[cfg.model], config=to_dict(cfg), metrics=metrics,
                       seed=cfg.seed, num_parameters=parent_params)
    return Path(cfg.output_dir)


def main(argv: list[str] | None = None) -> int:
    return stage_main(Config, run, "int8 ONNX via Optimum's ORTQuantizer (dynamic/static, accuracy-aware).",
                      argv, prog="python -m shrinkbert.compress.quantize")


if __name__ == "__main__":
    sys.exit(main())
