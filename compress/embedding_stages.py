"""`shrinkbert export`, `quantize` and `bundle` for sentence-embedding artifacts.

The export, quantize and bundle stages hand an artifact whose manifest says kind embedding to these
functions (core/kinds/embedding.py `own_stages`), with their own Config:

    export    the encoder, pooling, projection and normalisation as one ONNX graph whose output is
              the sentence vector (compress/embedding_onnx.py), parity-checked against PyTorch;
    quantize  dynamic int8 of that graph (weights by this CPU's ISA, compress/int8.py), or static
              int8 with activation ranges calibrated on the task's train sentences; judged on the
              recorded scored-pairs task's validation Spearman where there is one, and always on the
              vectors' agreement with fp32; --exclude and --accuracy-aware keep modules float as
              they do for classifiers (the search judged on validation Spearman);
    bundle    the torch-free bundle (compress/static_bundle.py): an ONNX graph's, or a static
              student's (numpy and tokenizers only); its vectors are checked equal to the model's.

Each writes its artifact atomically with a manifest (kind embedding, its parent, the data record it
inherits), like every other stage. What
is not wired for embeddings says so in one line, and writes nothing: sparsify (its keep-or-drop check
is a classifier's accuracy) and trim-vocab (a drop-in embedding model must embed any text, like a QA
model reading unseen contexts).
"""
from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np

from shrinkbert.core.artifacts import atomic_artifact, check, is_artifact, read_manifest, write_manifest
from shrinkbert.core.data.dataspec import stage_max_length
from shrinkbert.core.errors import ShrinkbertError
from shrinkbert.core.kinds import get_kind

KIND = "embedding"
# Sentences the int8 check embeds when no scored-pairs task is recorded (short, long, empty).
CHECK_SENTENCES = ["A man is playing a guitar.", "The stock market fell sharply today.", "a cat", "",
                   "Three dogs run through the snow while a child watches from the porch window.",
                   "The committee will publish its findings after the summer recess.",
                   "How do I reset my password?", "Rain is expected across the north by Friday evening."]
MIN_INT8_AGREEMENT = 0.98  # mean cosine of int8 and fp32 vectors below which int8 has broken the model


def parent_record(path: Path) -> tuple[dict, dict | None]:
    """(the parent's manifest, its data record) — {} and None for a folder that is not an artifact."""
    if not is_artifact(path):
        return {}, None
    manifest = read_manifest(path)
    return manifest, manifest.get("data") or None


def is_static(path: Path) -> bool:
    from shrinkbert.students.static import STATIC_DIR

    return (path / STATIC_DIR).is_dir()


def _validation_pairs(data: dict | None, cache_dir: str, max_rows: int, split_name: str = "validation"):
    """The recorded scored-pairs task's pairs of a split (validation), or None where none is recorded."""
    if not data or not data.get("task"):
        return None
    from shrinkbert.core.data.dataspec import DataSpec
    from shrinkbert.core.data.scored_pairs import split_pairs

    fields = {k: data[k] for k in ("task", "text_column", "text_pair_column", "label_column", "split_seed",
                                   "tsv_quoting") if k in data}
    return split_pairs(DataSpec(**fields), split_name, max_rows, cache_dir)[1]


def quantize(cfg) -> Path:
    """The quantize stage for an exported embedding graph: dynamic or static int8, judged on Spearman
    and agreement; --exclude keeps modules float, --accuracy-aware keeps the fewest sensitive ones
    float to hold the validation Spearman drop within --tolerance (compress/accuracy_aware.py)."""
    import onnx

    from shrinkbert.compress import accuracy_aware
    from shrinkbert.compress.embedding_onnx import ONNX_FILE, OnnxEmbedder, quantize_static, static_ranges
    from shrinkbert.compress.embedding_onnx import quantize as quantize_graph
    from shrinkbert.compress.onnx_modules import node_groups, resolve
    from shrinkbert.core.sts import distinct_sentences, pairs_spearman, spearman_drop

    source = Path(cfg.model)
    cfg.max_length = stage_max_length(cfg, get_kind(KIND), [source])
    if cfg.mode not in ("dynamic", "static") or cfg.calibration_data:
        raise ShrinkbertError(f"embedding graphs are quantized with --mode dynamic or static (got --mode {cfg.mode}"
                              f"{', --calibration-data' if cfg.calibration_data else ''}): the rest is not wired for them")
    if not (source / ONNX_FILE).is_file():
        raise ShrinkbertError(f"{source} holds no {ONNX_FILE}: export the embedding model first")
    _, data = parent_record(source)
    # accuracy-aware: judged on the whole validation split, as the classifiers' search is
    rows = 0 if cfg.accuracy_aware else cfg.max_eval_rows
    pairs = _validation_pairs(data, cfg.cache_dir, rows) if (rows or cfg.accuracy_aware) else None  # 0: skip
    if cfg.accuracy_aware and pairs is None:
        raise ShrinkbertError(f"accuracy-aware int8 is judged on validation Spearman: {source} records no "
                              "scored-pairs task")
    groups = node_groups(onnx.load(str(source / ONNX_FILE), load_external_data=False))
    excluded_groups, exclude_nodes = resolve(cfg.exclude, groups) if cfg.exclude else ([], [])
    calibration = ranges = None
    if cfg.mode == "static":  # activation ranges from the task's train sentences (both sides of a pair)
        train = _validation_pairs(data, cfg.cache_dir, cfg.calibration_rows, "train")
        if train is None:
            raise ShrinkbertError(f"static int8 needs calibration sentences: {source} records no scored-pairs task "
                                  "(use --mode dynamic)")
        calibration = list(dict.fromkeys(train.first + train.second))[:cfg.calibration_rows]
        if len(calibration) < cfg.min_calibration_rows:
            raise ShrinkbertError(f"static int8 needs at least {cfg.min_calibration_rows} calibration sentences, "
                                  f"the task's train split gave {len(calibration)}")
        ranges = static_ranges(source, calibration, cfg.calibration, cfg.percentile, cfg.max_length, cfg.static_ops)

    def quantize_into(folder: Path, nodes: list[str]) -> dict:
        shutil.rmtree(folder, ignore_errors=True)  # the quantizers copy the source folder into a fresh one
        if calibration is None:
            return quantize_graph(source, folder, isa=cfg.isa, exclude_nodes=nodes)
        return quantize_static(source, folder, calibration, isa=cfg.isa, calibration=cfg.calibration,
                               percentile=cfg.percentile, max_length=cfg.max_length, keep_float=cfg.keep_float,
                               static_ops=cfg.static_ops, exclude_nodes=nodes, ranges=ranges)

    def probe(dst: Path, nodes: list[str]) -> Path:  # the search's quantizer: a folder OnnxEmbedder reads
        quantize_into(dst, nodes)
        return dst

    sentences = distinct_sentences(pairs) if pairs is not None else []

    def vectors(folder: Path) -> np.ndarray:
        return OnnxEmbedder(folder, threads=cfg.threads, max_length=cfg.max_length).encode(sentences)

    fp32 = OnnxEmbedder(source, threads=cfg.threads, max_length=cfg.max_length)
    fp32_vectors = fp32.encode(sentences) if pairs is not None else None  # once: the search's and the check's
    search = None
    if cfg.accuracy_aware:
        judge = accuracy_aware.Judge(lambda out: pairs_spearman(out, pairs) / 100,
                                     lambda before, after: spearman_drop(before, after, pairs), len(pairs.first))
        candidates = {g: nodes for g, nodes in groups.items() if g not in excluded_groups}
        search = accuracy_aware.search(source, candidates, exclude_nodes, probe, vectors, judge, fp32_vectors,
                                       cfg.tolerance, cfg.margin_z)
        accuracy_aware.require_met(search, cfg.tolerance, cfg.margin_z, cfg.allow_unmet,
                                   judged_on="validation pairs (Spearman)", margin="bootstrap se")
        excluded_groups += [g for g in search["kept_fp32"] if g not in excluded_groups]
        exclude_nodes += [n for g in search["kept_fp32"] for n in groups[g]]
    with atomic_artifact(cfg.output_dir) as tmp:
        choice = quantize_into(Path(tmp), exclude_nodes)
        int8 = OnnxEmbedder(tmp, threads=cfg.threads, max_length=cfg.max_length)
        agreement = float(np.mean(np.sum(fp32.encode(CHECK_SENTENCES) * int8.encode(CHECK_SENTENCES), axis=1)))
        checks = [check("int8_agreement", agreement >= MIN_INT8_AGREEMENT,
                        f"mean cosine of int8 and fp32 vectors {agreement:.4f} on {len(CHECK_SENTENCES)} sentences "
                        f"(at least {MIN_INT8_AGREEMENT})")]
        metrics = {"int8_agreement": agreement, "kept_fp32": excluded_groups}
        if pairs is not None:
            before, after = pairs_spearman(fp32_vectors, pairs), pairs_spearman(int8.encode(sentences), pairs)
            metrics.update(validation_spearman_fp32=before, validation_spearman_int8=after)
            checks.append(check("spearman_drop", before - after <= cfg.tolerance,
                                f"validation Spearman {before:.2f} -> {after:.2f} on {len(pairs.first)} pairs "
                                f"(tolerance {cfg.tolerance:g} points)"))
        if search is not None:  # the search's "accuracy" is Spearman / 100 here
            metrics["accuracy_aware"] = {
                "judged_on": "validation Spearman x100", "tolerance_points": cfg.tolerance, "met": search["met"],
                "validation_pairs": search["rows"], "loss_points": search["loss_points"],
                "bootstrap_se_points": search["se_points"], "margin_z": cfg.margin_z,
                "loss_bound_points": search["bound_points"], "kept_fp32_modules": search["kept_fp32"],
                "spearman_all_int8": round(100 * search["accuracy_all_int8"], 3),
                "sensitivity": [{"module": row["module"], "spearman_gain_points": row["accuracy_gain_points"],
                                 "mean_abs_vector_diff_when_kept_fp32": row["mean_abs_logit_diff_when_kept_fp32"]}
                                for row in search["table"]],
                "steps": [{"kept_fp32": step["kept_fp32"], "spearman": round(100 * step["accuracy"], 3),
                           "loss_points": step["loss_points"], "se_points": step["se_points"]}
                          for step in search["steps"]]}
        failed = [c for c in checks if not c["passed"]]
        if failed and not cfg.allow_unmet:
            raise ShrinkbertError(f"int8 {failed[0]['name']} failed: {failed[0]['detail']}: not written "
                                  "(--allow-unmet writes it, recorded)")
        write_manifest(tmp, stage="quantize", parents=[source], data=data, metrics=metrics, checks=checks,
                       config={"model": str(cfg.model), "output_dir": str(cfg.output_dir), "mode": cfg.mode,
                               "isa": cfg.isa, "max_length": cfg.max_length, "isa_choice": choice,
                               "exclude": list(cfg.exclude), "accuracy_aware": cfg.accuracy_aware,
                               "tolerance": cfg.tolerance},
                       extra={"kind": KIND, "runtime": "onnxruntime int8"})
    return Path(cfg.output_dir)


def bundle(cfg) -> Path:
    """The bundle stage for an embedding model: a static student's or an ONNX graph's torch-free bundle."""
    from shrinkbert.compress import static_bundle

    source = Path(cfg.model)
    if not cfg.output_dir:
        raise ShrinkbertError("bundle needs --output-dir")
    return static_bundle.run(source, cfg.output_dir, data=parent_record(source)[1], spin=cfg.spin, target=cfg.target)
