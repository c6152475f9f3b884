"""`shrinkbert distill --objective vectors` and `finetune` on pairs from the CLI, on a tiny teacher.

What tests/test_embedding_recipe.py leaves out: the teacher's vectors reused by content on a second
distil (nothing re-encoded), the students' own vectors (shape, unit length) read back through the
kind, and the finetune stage's bad pairs files (no score column, an empty file) as one `error:` line.
"""
from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest

from fixtures import make_tiny_bert, run_cli, tiny_sentences
from shrinkbert.core.artifacts import read_manifest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    """(the work dir, a tiny teacher, a corpus file, the cache dir)."""
    work = tmp_path_factory.mktemp("emb-stages")
    teacher = make_tiny_bert(work / "teacher", hidden=32, layers=2, intermediate=64)
    corpus = work / "corpus.txt"
    corpus.write_text("\n".join(text for text, _ in tiny_sentences(60, seed=4)) + "\n")
    return work, teacher, corpus, work / "cache"


def _distill(work, out: str, *extra: str, objective: str = "vectors") -> tuple[subprocess.CompletedProcess, Path]:
    where, teacher, corpus, cache = work
    done = run_cli(["distill", "--objective", objective, "--teacher", str(teacher), "--corpus", str(corpus),
                    "--epochs", "1", "--batch-size", "16", "--output-dir", str(where / out), *extra], where,
                   SHRINKBERT_CACHE=str(cache))
    assert done.returncode == 0, done.stderr[-3000:]
    return done, where / out


def test_a_transformer_student_has_its_dim_parent_and_unit_vectors_and_a_rerun_reuses_the_teacher_vectors(work):
    from shrinkbert.core.kinds.embedder import Embedder

    _, out = _distill(work, "student", "--layers", "1", "--intermediate", "32", "--dim", "8")
    cached = sorted((work[3] / "embedding-teacher").glob("*.npy"))
    assert len(cached) == 1
    stamp = cached[0].stat().st_mtime_ns
    manifest = read_manifest(out)
    assert manifest["kind"] == "embedding" and manifest["dim"] == 8 and manifest["stage"] == "distill"
    assert Path(manifest["parents"][0]["path"]).resolve() == work[1].resolve()
    vectors = Embedder.load(out).encode(["a good film", "a bad film", "the end"])
    assert vectors.shape == (3, 8) and np.allclose(np.linalg.norm(vectors, axis=1), 1, atol=1e-4)
    # a second student of another shape on the same lines: the teacher's vectors come from the cache
    _distill(work, "student2", "--layers", "1", "--intermediate", "16")
    assert sorted((work[3] / "embedding-teacher").glob("*.npy")) == cached
    assert cached[0].stat().st_mtime_ns == stamp
    assert read_manifest(work[0] / "student2")["dim"] == 32  # the teacher's space through the projection


def test_a_static_student_writes_its_own_folder_with_unit_vectors_of_its_dim(work):
    from shrinkbert.students.static import StaticEmbedder

    _, out = _distill(work, "static", "--student", "static", "--dim", "8", objective="static")
    manifest = read_manifest(out)
    assert manifest["kind"] == "embedding" and manifest["dim"] == 8 and manifest["config"]["student"] == "static"
    vectors = StaticEmbedder.load(out).encode(["a good film", "a bad film"])
    assert vectors.shape == (2, 8) and np.allclose(np.linalg.norm(vectors, axis=1), 1, atol=1e-4)


def _one_error_line_and_nothing_written(done, out: Path, *words: str) -> None:
    assert done.returncode == 2, done.stderr[-2000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    assert all(w in lines[0] for w in words), lines[0]
    assert not out.exists()


def test_finetune_on_pairs_without_scores_or_on_an_empty_corpus_is_one_error_line(work, tmp_path):
    where, teacher, _, cache = work
    pairs = tmp_path / "pairs"
    pairs.mkdir()
    texts = [text for text, _ in tiny_sentences(12, seed=2)]
    for split in ("train", "validation", "test"):
        rows = ["sentence1,sentence2"] + [f"{texts[i]},{texts[i + 1]}" for i in range(10)]
        (pairs / f"{split}.csv").write_text("\n".join(rows) + "\n")
    done = run_cli(["finetune", "--model", str(teacher), "--task", str(pairs), "--output-dir", str(tmp_path / "ft")],
                   tmp_path, SHRINKBERT_CACHE=str(cache))
    _one_error_line_and_nothing_written(done, tmp_path / "ft")
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n")
    done = run_cli(["distill", "--objective", "vectors", "--teacher", str(teacher), "--corpus", str(empty),
                    "--output-dir", str(tmp_path / "s")], tmp_path, SHRINKBERT_CACHE=str(cache))
    _one_error_line_and_nothing_written(done, tmp_path / "s")


def test_no_sentence_of_the_tasks_validation_or_test_pairs_is_trained_on(work):
    where, _, corpus, _ = work
    lines = list(dict.fromkeys(line.strip() for line in corpus.read_text().splitlines() if line.strip()))
    task = where / "pairs-task"
    task.mkdir()
    other = [f"a sentence of its own number {i}" for i in range(12)]
    splits = {"train": [(other[i], other[i + 1]) for i in range(0, 8, 2)],  # train pairs may be trained on
              "validation": [(lines[0], other[8]), (lines[1], other[9])],
              "test": [(other[10], lines[2].upper() + " !"), (lines[3], other[11])]}  # a near-duplicate too
    for name, pairs in splits.items():
        rows = ["sentence1,sentence2,score"] + [f'"{a}","{b}",{i % 5}' for i, (a, b) in enumerate(pairs)]
        (task / f"{name}.csv").write_text("\n".join(rows) + "\n")
    done, out = _distill(work, "guarded", "--layers", "1", "--intermediate", "16", "--task", str(task))
    data = read_manifest(out)["data"]
    assert data["leak_guard_removed"] == 4 and data["rows"]["train"] == len(lines) - 4
    assert "leak guard: removed 4 of" in done.stdout + done.stderr
