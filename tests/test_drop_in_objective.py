"""`distill --objective drop-in`: documents read from .jsonl, SQuAD and plain corpora, held-out groups
never trained on, queries made from documents, hard negatives the teacher ranks highest, the teacher's
document vectors resumed from their shards, and the epoch kept by held-out drop-in recall, on a tiny
teacher through the CLI."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from fixtures import make_tiny_bert, run_cli
from shrinkbert.core.artifacts import read_manifest
from shrinkbert.core.errors import ShrinkbertError
from shrinkbert.core.qa_data import TRAINING_HALF, article_half
from shrinkbert.students.documents import (Documents, query_pairs, read_documents, sample_pairs,
                                           split_documents)

class Killed(Exception):
    """A pass stopped part-way, as a kill would stop it."""


WORDS = "good bad film plot actor scene story music end great dull fine".split()


def _paragraph(rng, sentences: int = 3) -> str:
    return " ".join(" ".join(rng.choice(WORDS, size=7)).capitalize() + "." for _ in range(sentences))


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    """(work dir, tiny teacher, a SQuAD file of 12 articles, a .jsonl of documents, cache dir)."""
    work = tmp_path_factory.mktemp("drop-in")
    rng = np.random.default_rng(0)
    contexts = [[_paragraph(rng) for _ in range(8)] for _ in range(12)]
    squad = {"version": "1.1", "data": [
        {"title": f"Article_{a}", "paragraphs": [
            {"context": context, "qas": [{"id": f"{a}-{p}", "question": f"what of {WORDS[p]} {a}?",
                                          "answers": [{"text": context.split()[0], "answer_start": 0}]}]}
            for p, context in enumerate(contexts[a])]} for a in range(12)]}
    squad_file = work / "squad.json"
    squad_file.write_text(json.dumps(squad))
    jsonl = work / "docs.jsonl"
    jsonl.write_text("".join(json.dumps({"text": _paragraph(rng, 2), "title": f"title {i}", "group": f"g{i % 10}"}) + "\n"
                             for i in range(60)))
    teacher = make_tiny_bert(work / "teacher", hidden=32, layers=2, intermediate=64)
    return work, teacher, squad_file, jsonl, work / "cache"


def test_documents_come_from_each_source_with_their_own_queries(work):
    _, _, squad_file, jsonl, _ = work
    squad = read_documents(str(squad_file))
    training_articles = {f"article:Article_{a}" for a in range(12) if article_half(f"Article_{a}") == TRAINING_HALF}
    assert set(squad.groups) == training_articles  # the held-out half of the articles is never read
    assert len(squad) == 8 * len(training_articles) and all(len(q) == 1 for q in squad.queries)
    docs = read_documents(str(jsonl))
    assert len(docs) == 60 and docs.queries[3] == ["title 3"] and docs.groups[3] == "g3"
    both = read_documents(f"{squad_file},{jsonl}", max_documents=20)
    assert len(both) == 20 and sum(g.startswith("article:") for g in both.groups) == 10


def test_bad_documents_are_one_error_line(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "one"}\n{"title": "no text"}\n')
    with pytest.raises(ShrinkbertError, match=r"line 2 has no text field"):
        read_documents(str(bad))
    with pytest.raises(ShrinkbertError, match="give --corpus"):
        read_documents("")


def test_the_held_out_split_keeps_groups_whole_and_is_the_same_for_every_seed(work):
    docs = read_documents(str(work[3]))
    training, held = split_documents(docs, held_out=10)
    assert len(training) + len(held) == 60 and len(held) >= 10
    assert not set(training.groups) & set(held.groups)
    assert split_documents(docs, held_out=10)[1].texts == held.texts
    with pytest.raises(ShrinkbertError, match="too few"):
        split_documents(Documents(["a", "b"], ["g", "g"], [[], []]), held_out=1)


def test_queries_are_the_documents_own_then_sentences_and_spans_of_them():
    docs = Documents()
    docs.add("The first sentence is here. The second sentence is there. A third one ends it.", "a", ["what is here"])
    docs.add("short one", "b")
    pairs = query_pairs(docs, generated=2, seed=0)
    first = [q for q, d in zip(pairs.queries, pairs.documents) if d == 0]
    assert first[0] == "what is here"
    origins = dict(zip(pairs.queries, pairs.origins))
    assert {origins[q] for q in first} >= {"log", "sentence"}
    assert all(q in docs.texts[0] or origins[q] == "log" for q in first)  # sentences and spans are cut from it
    assert ("short one", "itself") in zip(pairs.queries, pairs.origins)
    assert query_pairs(docs, generated=2, seed=0) == pairs
    assert len(sample_pairs(pairs, 2, seed=0).queries) == 2


def test_hard_negatives_are_the_teachers_top_documents_other_than_its_own():
    from shrinkbert.students.objectives.drop_in import mine_negatives

    documents = np.eye(4, dtype=np.float32)
    queries = np.asarray([[0.9, 0.4, 0.1, 0.0], [0.0, 0.1, 0.3, 0.9]], np.float32)
    found = mine_negatives(queries, documents, np.asarray([0, 2]), 2)
    assert found.tolist() == [[1, 2], [3, 1]]


def test_the_teachers_vectors_resume_from_their_shards(work, monkeypatch, tmp_path):
    from shrinkbert.core.kinds.embedder import Embedder
    from shrinkbert.students import embedding_distill

    teacher = Embedder.load(work[1], max_length=32)
    texts = [f"line {i} of the film" for i in range(10)]
    monkeypatch.setattr(embedding_distill, "TEACHER_SHARD", 4)
    whole = embedding_distill.teacher_vectors(teacher, work[1], texts, tmp_path / "a")
    encoded, kill_at = [], [2]
    original = teacher.encode

    def encode(rows, **options):
        encoded.append(len(rows))
        if len(encoded) == kill_at[0]:
            raise Killed  # killed during the second shard
        return original(rows, **options)
    monkeypatch.setattr(teacher, "encode", encode)
    with pytest.raises(Killed):
        embedding_distill.teacher_vectors(teacher, work[1], texts, tmp_path / "b")
    assert len(list((tmp_path / "b").rglob("*.parts/*.npy"))) == 1
    encoded.clear()
    kill_at[0] = 0
    stats: dict = {}
    resumed = embedding_distill.teacher_vectors(teacher, work[1], texts, tmp_path / "b", stats=stats)
    assert encoded == [4, 2] and stats["rows"] == 6  # the first shard was not computed again
    assert np.allclose(resumed, whole, atol=1e-5)
    assert not list((tmp_path / "b").rglob("*.parts")) and len(list((tmp_path / "b").rglob("*.npy"))) == 1


def test_distill_drop_in_keeps_the_epoch_of_best_held_out_recall_and_records_it(work):
    where, teacher, squad_file, jsonl, cache = work
    out = where / "student"
    done = run_cli(["distill", "--objective", "drop-in", "--teacher", str(teacher), "--corpus", f"{squad_file},{jsonl}",
                    "--held-out-documents", "20", "--layers", "1", "--intermediate", "32", "--epochs", "2",
                    "--batch-size", "16", "--hard-negatives", "4", "--output-dir", str(out)], where,
                   SHRINKBERT_CACHE=str(cache))
    assert done.returncode == 0, done.stderr[-3000:]
    manifest = read_manifest(out)
    drop_in, training = manifest["drop_in"], manifest["training"]
    assert manifest["kind"] == "embedding" and manifest["dim"] == 32
    assert drop_in["documents"]["held_out"] >= 20 and drop_in["hard_negatives"] == 4
    assert 0 <= drop_in["teacher_held_out"]["recall_at_1"] <= drop_in["teacher_held_out"]["recall_at_10"] <= 1
    assert drop_in["teacher_document_vectors"]["rows_per_s"] > 0
    assert training["kept_by"].startswith("drop-in recall")
    scores = [50 * (e["drop_in_recall_at_1"] + e["drop_in_recall_at_10"]) for e in training["epochs"]]
    kept = training["epoch_kept"]
    kept_score = 50 * (manifest["metrics"]["drop_in_recall_at_1"] + manifest["metrics"]["drop_in_recall_at_10"])
    assert kept_score >= max(scores) - 1e-9 and (kept == 0 or scores[kept - 1] == kept_score)
    assert any("rank_loss" in h for h in training.get("history", [])) or "rank_weight" in manifest["config"]
    assert manifest["data"]["queries"]["log"] > 0 and manifest["data"]["documents"]["train"] > 0


def test_drop_in_refuses_what_it_does_not_read(work):
    where, teacher, _, jsonl, cache = work
    done = run_cli(["distill", "--objective", "drop-in", "--teacher", str(teacher), "--corpus", str(jsonl),
                    "--dim", "8", "--output-dir", str(where / "refused")], where, SHRINKBERT_CACHE=str(cache))
    assert done.returncode != 0 and done.stderr.strip().splitlines()[-1].startswith("error:")
    assert "--dim" in done.stderr and not (where / "refused").exists()


def test_the_mpnet_drop_in_recipe_runs_in_miniature_and_reports_both_students_in_the_teachers_index(work):
    """recipes/mpnet-drop-in.yaml --quick with a tiny MPNet as the teacher, a narrower BERT of the same pieces
    as all-MiniLM-L6-v2's stand-in, the SQuAD file above as documents and as the report's held-out search."""
    from fixtures import make_tiny_family

    where, _, squad_file, jsonl, cache = work
    root = Path(__file__).resolve().parents[1]
    stsb = root.parent / "shared" / "data" / "stsb"
    if not stsb.is_dir():
        pytest.skip(f"{stsb} is absent (../shared/data is not beside the clone)")
    teacher = make_tiny_family(where / "mpnet", "mpnet", hidden=32, layers=2, intermediate=64)
    pretrained = make_tiny_bert(where / "pretrained", hidden=16, heads=2, layers=1, intermediate=32)
    out = where / "recipe"
    sets = {"report.artifacts": [str(teacher), "${student}", "${bundle}", "${slice}", "${slice-bundle}"],
            "report.baseline": str(teacher), "report.retrieval": str(squad_file), "report.timing": "inprocess",
            "report.max_eval_rows": 40, "report.nli": "", "student.student": str(pretrained),
            "slice.layers": 1, "slice-int8.exclude": "encoder.layer.0.output",
            "report.documents": f"{squad_file},{jsonl}", "report.max_documents": 0, "report.held_out_documents": 20}
    for stage in ("student", "slice"):
        sets.update({f"{stage}.teacher": str(teacher), f"{stage}.corpus": f"{squad_file},{jsonl}",
                     f"{stage}.task": str(stsb), f"{stage}.max_eval_rows": 40, f"{stage}.held_out_documents": 20,
                     f"{stage}.batch_size": 16})
    for stage in ("student-int8", "slice-int8"):
        sets.update({f"{stage}.max_eval_rows": 40, f"{stage}.tolerance": 100})
    cmd = ["run", str(root / "recipes" / "mpnet-drop-in.yaml"), "--quick", "--output-dir", str(out)]
    for key, value in sets.items():
        cmd += ["--set", f"{key}={json.dumps(value)}"]
    done = run_cli(cmd, root, SHRINKBERT_CACHE=str(cache))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-4000:]
    for stage in ("student", "slice"):
        assert read_manifest(out / stage)["training"]["kept_by"].startswith("drop-in recall")
    assert read_manifest(out / "slice-int8")["metrics"]["kept_fp32"] == ["encoder.layer.0.output"]
    report = json.loads((out / "report" / "report.json").read_text())
    assert report["retrieval"]["articles"] == "held-out"
    variants = {Path(v["path"]).name: v for v in report["variants"]}
    for name in ("student", "bundle", "slice", "slice-bundle"):
        assert not variants[name].get("error"), variants[name]
        for search in ("retrieval", "documents"):  # SQuAD's held-out articles; the corpus's held-out documents
            drop_in = variants[name]["metrics"][search]["drop_in"]
            assert 0 <= drop_in["recall_at_1"]["value"] <= drop_in["recall_at_10"]["value"] <= 1
    held = report["documents"]
    assert held["paragraphs"] >= 20 and held["questions"] > 0
    assert "## Drop-in on the corpus" in (out / "report" / "report.md").read_text()
