"""recipes/embeddings.yaml and recipes/mpnet-embeddings.yaml run end to end in miniature, and the
embedding kind's stages from the CLI.

Each recipe's own YAML goes through `shrinkbert run --quick` with a tiny random model of its teacher's
family in place of the teacher (a BERT for MiniLM, an MPNet for all-mpnet-base-v2; read as an
embedding model: mean pooling, normalised), a text file of a few dozen sentences
in place of the corpora, and the real STS-B from ../shared/data (its splits cut small): the same
stage graph and code paths (distill --objective vectors, --student static, export, quantize, bundle,
eval's embedding report).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from fixtures import make_tiny_bert, make_tiny_family, run_cli, tiny_sentences, write_tiny_csv
from shrinkbert.core.artifacts import artifact_hash, read_manifest
from shrinkbert.recipe import load_recipe

ROOT = Path(__file__).resolve().parents[1]
STSB = ROOT.parent / "shared" / "data" / "stsb"
pytestmark = pytest.mark.skipif(not STSB.is_dir(), reason=f"{STSB} is absent (../shared/data is not beside the clone)")


@pytest.fixture(scope="module", params=["embeddings.yaml", "mpnet-embeddings.yaml"])
def recipe_file(request) -> Path:
    return ROOT / "recipes" / request.param


@pytest.fixture(scope="module")
def ran(recipe_file, tmp_path_factory):
    """The recipe's quick run, shrunk: (its output dir, the tiny teacher: a BERT for MiniLM's recipe,
    an MPNet for all-mpnet-base-v2's)."""
    work = tmp_path_factory.mktemp("emb-recipe")
    if recipe_file.name.startswith("mpnet"):
        teacher = make_tiny_family(work / "teacher", "mpnet", hidden=32, layers=2, intermediate=64)
    else:
        teacher = make_tiny_bert(work / "teacher", hidden=32, layers=2, intermediate=64)
    corpus = work / "corpus.txt"
    corpus.write_text("\n".join(text for text, _ in tiny_sentences(120, seed=3)) + "\n")
    out = work / "out"
    labelled = write_tiny_csv(work / "reviews.csv", n=96)  # the report's frozen-embedding classification task
    sets = {"student.teacher": str(teacher), "static.teacher": str(teacher),
            "student.corpus": str(corpus), "static.corpus": str(corpus),
            "student.task": str(STSB), "static.task": str(STSB),
            "student.max_train_rows": 80, "static.max_train_rows": 80, "student.max_eval_rows": 40,
            "static.max_eval_rows": 40, "student.layers": 1, "student.hidden": 32, "student.intermediate": 32, "student.batch_size": 16,
            "static.dim": 8, "student-int8.max_eval_rows": 40, "student-int8.tolerance": 100,
            "report.artifacts": [str(teacher), "${student}", "${student-int8}", "${bundle}", "${static}",
                                 "${static-bundle}"],
            "report.baseline": str(teacher), "report.index_corpus": str(corpus), "report.max_eval_rows": 40,
            "report.classify": str(labelled)}
    if recipe_file.name.startswith("mpnet"):  # timed in the report's own process: a worker per variant costs
        sets["report.timing"] = "inprocess"   # seconds of imports each; embeddings.yaml keeps the workers
    if recipe_file.name.startswith("mpnet"):  # all-MiniLM-L6-v2's stand-in: a narrower BERT of the same pieces
        for name in ("layers", "hidden", "intermediate"):
            del sets[f"student.{name}"]
        sets["student.student"] = str(make_tiny_bert(work / "pretrained", hidden=16, heads=2, layers=1, intermediate=32))
    cmd = ["run", str(recipe_file), "--quick", "--output-dir", str(out)]
    for key, value in sets.items():
        cmd += ["--set", f"{key}={json.dumps(value)}"]
    done = run_cli(cmd, ROOT)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-4000:]
    return out, teacher


def test_every_stage_writes_its_artifact_with_its_parents_checks_and_the_inherited_task(ran, recipe_file):
    out, _ = ran
    recipe = load_recipe(recipe_file, quick=True, output_dir=out)
    for stage in recipe.stages:
        if stage.uses == "eval":
            continue
        where = f"stage '{stage.name}'"
        manifest = read_manifest(out / stage.name)
        assert manifest["stage"] == stage.uses, where
        assert manifest["kind"] == "embedding", where
        assert manifest["hash"] == artifact_hash(out / stage.name), where
        parents = {Path(p["path"]).name: p["hash"] for p in manifest["parents"]}
        for dep in stage.depends_on:
            assert parents.get(dep) == read_manifest(out / dep)["hash"], (where, dep)
        assert manifest["checks"] and all(c["passed"] for c in manifest["checks"]), (where, manifest["checks"])
        assert manifest["data"]["task"] == str(STSB.resolve()), where  # named once by the distill stages
    assert read_manifest(out / "static")["dim"] == 8
    assert read_manifest(out / "student")["dim"] == 32  # the teacher's space, through its projection


def test_the_report_has_a_row_per_artifact_and_the_bundles_equal_their_models(ran, recipe_file):
    out, teacher = ran
    report = json.loads((out / "report" / "report.json").read_text())
    rows = {Path(v["path"]).name: v for v in report["variants"]}
    assert sorted(rows) == sorted(["teacher", "student", "student-int8", "bundle", "static", "static-bundle"])
    assert all(not v["error"] for v in rows.values()), {k: v["error"] for k, v in rows.items()}
    metrics = {name: v["metrics"] for name, v in rows.items()}
    assert metrics["teacher"]["recall_at_10"] == 1.0 and metrics["teacher"]["of_baseline"] == 1.0
    assert 0 <= metrics["student"]["recall_at_10"] <= 1 and -1 <= metrics["student"]["agreement"] <= 1
    # a bundle gives its model's vectors: the same Spearman on the same test pairs
    assert metrics["bundle"]["spearman"] == pytest.approx(metrics["student-int8"]["spearman"], abs=1e-6)
    assert metrics["static-bundle"]["spearman"] == pytest.approx(metrics["static"]["spearman"], abs=1e-9)
    assert "recall_at_10" not in metrics["static"]  # its own 8 dimensions: no drop-in figures
    assert report["test_pairs"] == 40 and all(m["p50_ms"] > 0 for m in metrics.values())
    timed = {name: v["timed_with"] for name, v in rows.items()}
    markdown = (out / "report" / "report.md").read_text()
    assert report["latency"]["process"] == ("shared" if recipe_file.name.startswith("mpnet") else "own")
    if report["latency"]["process"] == "shared":  # --timing inprocess (the mpnet miniature): all in the report's process
        assert {t["process"] for t in timed.values()} == {"shared"} and "every variant in the report's own" in markdown
        assert timed["bundle"]["runtime"].startswith("bundle") and timed["static"]["runtime"] == "numpy (static)"
    else:  # timed as deployed: each variant in a process of its own, holding only what it ships with
        assert {t["process"] for t in timed.values()} == {"own"} and "each variant in a process of its own" in markdown
        assert "torch" in timed["teacher"]["libraries"] and "torch" not in timed["static-bundle"]["libraries"]
        assert "torch" not in timed["static"]["libraries"]  # a static student is numpy and tokenizers
        assert timed["bundle"]["describe"] == "edge bundle Predictor.embed" and timed["static"]["runtime"] == "numpy (static)"
    assert "| student-int8 | ONNX Runtime int8 |" in (out / "report" / "report.md").read_text()
    # frozen-embedding classification (MTEB's protocol) on the labelled task, every variant
    assert report["classify"]["tasks"] == ["reviews"] and "| reviews acc |" in (out / "report" / "report.md").read_text()
    assert all(0 <= m["reviews_accuracy"] <= 100 for m in metrics.values())
    assert metrics["static-bundle"]["reviews_accuracy"] == metrics["static"]["reviews_accuracy"]  # the same vectors
    # retrieval on SQuAD paragraphs (eval/retrieval.py): the teacher in its own index; a student in the
    # teacher's (drop-in) and in its own; a student with its own dimension in its own only
    assert set(metrics["teacher"]["retrieval"]) == {"teacher"} and set(metrics["static"]["retrieval"]) == {"own"}
    assert set(metrics["student-int8"]["retrieval"]) == {"own", "drop_in"}
    for scores in metrics["student"]["retrieval"].values():
        assert all(s["low"] <= s["value"] <= s["high"] for s in scores.values())
    assert report["retrieval"]["questions"] == 200 and "## Retrieval: 200 questions" in (out / "report" / "report.md").read_text()
    # drop-in against the teacher on the same questions: a paired difference, for the drop-in variants only
    paired = metrics["student-int8"]["retrieval_drop_in_vs_teacher"]
    assert all(d["low"] <= d["value"] <= d["high"] for d in paired.values()) and set(paired) == {"recall_at_1", "recall_at_10"}
    assert "retrieval_drop_in_vs_teacher" not in metrics["static"] and "Drop-in minus teacher" in (out / "report" / "report.md").read_text()
    # similarity on another style of text: SNLI test pairs, entailed ranked above contradicted (300 of each, quick)
    assert report["nli"]["pairs"] == 600 and all(0 <= m["nli_auc"] <= 100 for m in metrics.values())
    assert metrics["static-bundle"]["nli_auc"] == pytest.approx(metrics["static"]["nli_auc"], abs=1e-9)
    assert metrics["teacher"]["nli_of_baseline"] == pytest.approx(1.0) and "| NLI AUC |" in (out / "report" / "report.md").read_text()


def test_the_student_epoch_is_kept_by_the_recipes_rule_and_agreement_is_measured_on_lines_never_trained_on(ran):
    from shrinkbert.students.embedding_distill import selection_score

    out, _ = ran
    manifest = read_manifest(out / "student")
    metrics, training = manifest["metrics"], manifest["training"]
    keep_by = manifest["config"]["keep_by"]  # MiniLM's recipe: validation + agreement; MPNet's: validation alone
    assert metrics["unseen_lines"] == 40  # the 120-line corpus past its 80 training lines
    assert -1 <= metrics["unseen_agreement"] <= 1
    assert ("unseen" in training["kept_by"]) == (keep_by == "validation+agreement")
    epochs = [e for e in training["epochs"] if "validation_spearman" in e]
    assert epochs and all("unseen_agreement" in e for e in epochs)
    kept = next((e for e in epochs if e["epoch"] == training["epoch_kept"]), None)
    if kept is not None:  # a trained epoch was kept: the best by the recipe's rule
        assert selection_score(kept, keep_by) == max(selection_score(e, keep_by) for e in epochs)
    assert selection_score({"validation_spearman": 80.0, "unseen_agreement": 0.9}) == pytest.approx(170.0)
    assert selection_score({"validation_spearman": 80.0}) == 80.0  # a student with its own --dim: STS alone


def test_the_static_bundle_predicts_without_torch_from_its_own_folder(ran):
    out, _ = ran
    done = subprocess.run([sys.executable, "predict.py", "--embed", "-"], input="a good film\na bad film\n",
                          cwd=out / "static-bundle", capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": ""})
    assert done.returncode == 0, done.stderr[-2000:]
    vectors = np.asarray(json.loads(done.stdout))
    assert vectors.shape == (2, 8) and np.allclose(np.linalg.norm(vectors, axis=1), 1, atol=1e-5)


# The stage-level checks below are not family-specific: they run on MiniLM's recipe only (the
# recipe-level ones above, and accuracy-aware's module names, run on both families).
MINILM_ONLY = pytest.mark.parametrize("recipe_file", ["embeddings.yaml"], indirect=True)
MPNET_ONLY = pytest.mark.parametrize("recipe_file", ["mpnet-embeddings.yaml"], indirect=True)


def test_artifact_load_gives_the_embedding_model_its_kind_loads(ran):
    """A PyTorch embedding artifact loads as the module the stages run (its pooling and normalisation
    included), not as a classifier with a fresh head."""
    import torch

    import shrinkbert
    from shrinkbert.core.kinds.embedder import Embedder

    out, _ = ran
    model = shrinkbert.Artifact(str(out / "student")).load()
    texts = ["a good film", "the plot was dull"]
    tokens = shrinkbert.Artifact(str(out / "student")).tokenizer()(texts, padding=True, return_tensors="pt")
    with torch.no_grad():
        vectors = model(input_ids=tokens["input_ids"], attention_mask=tokens["attention_mask"]).sentence_embedding
    np.testing.assert_allclose(vectors.numpy(), Embedder.load(out / "student").encode(texts), atol=1e-5)


@MINILM_ONLY
def test_distill_without_a_corpus_and_calibration_data_are_one_line(ran, tmp_path):
    out, teacher = ran
    done = run_cli(["distill", "--objective", "vectors", "--teacher", str(teacher), "--output-dir",
                    str(tmp_path / "s")], tmp_path)
    assert done.returncode == 2 and done.stderr.strip().startswith("error: ") and "--corpus" in done.stderr
    assert not (tmp_path / "s").exists()
    done = run_cli(["quantize", "--model", str(out / "student-onnx"), "--calibration-data", "x.npz", "--output-dir",
                    str(tmp_path / "q")], tmp_path)
    assert done.returncode == 2 and "--calibration-data" in done.stderr and not (tmp_path / "q").exists()
    assert len(done.stderr.strip().splitlines()) == 1


@MINILM_ONLY
@pytest.mark.parametrize("stage", ["sparsify", "trim-vocab"])  # prune: tests/test_embedding_prune.py
def test_the_stages_not_built_for_embeddings_refuse_in_one_line_and_write_nothing(ran, tmp_path, stage):
    out, _ = ran
    done = run_cli([stage, "--model", str(out / "student"), "--output-dir", str(tmp_path / "x")], tmp_path)
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr.strip().startswith(f"error: {stage} does not handle sentence embedding models")
    assert len(done.stderr.strip().splitlines()) == 1 and not (tmp_path / "x").exists()


@MPNET_ONLY  # one quantize code path for both recipes: run once, on the second family
def test_exclude_and_accuracy_aware_keep_modules_float_judged_on_spearman(ran, tmp_path):
    import onnx

    out, _ = ran
    unfused = tmp_path / "onnx"  # the recipe exports O2-fused; module names need the unfused graph
    done = run_cli(["export", "--model", str(out / "student"), "--optimization", "none", "--output-dir", str(unfused)],
                   tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    done = run_cli(["quantize", "--model", str(unfused), "--exclude", "encoder.layer.0.attention",
                    "--max-eval-rows", "40", "--tolerance", "100", "--output-dir", str(tmp_path / "x")], tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert read_manifest(tmp_path / "x")["metrics"]["kept_fp32"] == ["encoder.layer.0.attention"]
    graph = onnx.load(str(tmp_path / "x" / "model.onnx")).graph
    kept = [n for n in graph.node if "/encoder/layer.0/attention/" in n.name and n.op_type == "MatMul"]
    assert kept and not any("layer.0/attention" in n.name for n in graph.node if n.op_type == "MatMulInteger")
    assert any(n.op_type == "MatMulInteger" for n in graph.node)  # the rest is int8
    # accuracy-aware: every module's sensitivity on the validation Spearman, then the fewest kept float
    done = run_cli(["quantize", "--model", str(unfused), "--accuracy-aware", "--tolerance", "100",
                    "--output-dir", str(tmp_path / "aa")], tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    record = read_manifest(tmp_path / "aa")["metrics"]["accuracy_aware"]
    assert record["judged_on"] == "validation Spearman" and record["met"] and record["kept_fp32_modules"] == []
    assert {row["module"] for row in record["sensitivity"]} == {"embeddings", "encoder.layer.0.attention",
                                                               "encoder.layer.0.intermediate", "encoder.layer.0.output"}
    assert record["validation_rows"] > 40 and record["se_points"] >= 0  # the whole split; a bootstrap margin


@MINILM_ONLY
def test_static_int8_calibrates_on_the_recorded_tasks_sentences_and_keeps_the_vectors(ran, tmp_path):
    from shrinkbert.compress.embedding_onnx import OnnxEmbedder
    from shrinkbert.compress.int8 import quantized_node_count

    out, _ = ran
    unfused = tmp_path / "onnx"  # the recipe exports O2-fused; static int8 takes the unfused graph
    done = run_cli(["export", "--model", str(out / "student"), "--optimization", "none", "--output-dir", str(unfused)],
                   tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    done = run_cli(["quantize", "--model", str(unfused), "--approach", "static", "--calibration", "minmax",
                    "--calibration-rows", "48", "--max-eval-rows", "40", "--tolerance", "100",
                    "--output-dir", str(tmp_path / "q")], tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    manifest = read_manifest(tmp_path / "q")
    assert manifest["kind"] == "embedding" and manifest["config"]["approach"] == "static"
    assert manifest["metrics"]["calibration"] == "minmax" and manifest["metrics"]["int8_choice"]["calibration"] == "minmax"
    assert {c["name"] for c in manifest["checks"]} == {"int8_agreement", "spearman_drop"}
    assert quantized_node_count(tmp_path / "q" / "model.onnx") > 0
    texts = [text for text, _ in tiny_sentences(6, seed=9)]
    fp32, int8 = (OnnxEmbedder(path).encode(texts) for path in (out / "student-onnx", tmp_path / "q"))
    assert np.allclose(np.linalg.norm(int8, axis=1), 1, atol=1e-4)  # normalisation still inside the graph
    assert float(np.mean(np.sum(fp32 * int8, axis=1))) >= 0.98


def _pairs_dir(where: Path, score_of=lambda i: i % 6) -> Path:
    texts = [text for text, _ in tiny_sentences(24, seed=5)]
    where.mkdir()
    for split in ("train", "validation", "test"):
        rows = ["sentence1,sentence2,score"] + [f"{texts[i]},{texts[i + 1]},{score_of(i)}" for i in range(12)]
        (where / f"{split}.csv").write_text("\n".join(rows) + "\n")
    return where


@MINILM_ONLY
def test_finetune_on_scored_pairs_trains_an_embedding_model_and_records_the_task(ran, tmp_path):
    _, teacher = ran
    pairs = _pairs_dir(tmp_path / "pairs")
    done = run_cli(["finetune", "--model", str(teacher), "--task", str(pairs), "--epochs", "1", "--batch-size", "4",
                    "--output-dir", str(tmp_path / "ft")], tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    manifest = read_manifest(tmp_path / "ft")
    assert manifest["kind"] == "embedding" and manifest["data"]["task"] == str(pairs.resolve())
    assert manifest["metrics"]["train_examples"] == 12 and manifest["stage"] == "finetune"
    assert -100 <= manifest["metrics"]["validation_spearman"] <= 100 and -100 <= manifest["metrics"]["test_spearman"] <= 100
    assert (tmp_path / "ft" / "modules.json").is_file()  # a sentence-transformers folder


@MINILM_ONLY
def test_finetune_on_scores_outside_the_range_is_one_line_and_writes_nothing(ran, tmp_path):
    _, teacher = ran
    pairs = _pairs_dir(tmp_path / "pairs", score_of=lambda i: 9 if i == 3 else 1)
    done = run_cli(["finetune", "--model", str(teacher), "--task", str(pairs), "--output-dir", str(tmp_path / "ft")],
                   tmp_path)
    assert done.returncode == 2 and done.stderr.strip().startswith("error: ") and "9" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and not (tmp_path / "ft").exists()
