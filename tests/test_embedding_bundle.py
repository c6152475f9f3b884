"""The static embedding bundle: numpy and tokenizers only (checked with torch blocked), the
student's vectors exactly, embed/similarity/search, `predict.py --embed`, and bad input."""
from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from fixtures import NOT_IN_A_BUNDLE, import_blocker
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers

from shrinkbert.compress import bundle as bundle_stage
from shrinkbert.compress.static_predictor import Predictor
from shrinkbert.core.artifacts import read_manifest
from shrinkbert.core.errors import ShrinkbertError
from shrinkbert.students.static import StaticEmbedder

VOCAB = {"[UNK]": 0, "good": 1, "movie": 2, "bad": 3, "plot": 4, "great": 5, "film": 6}
TEXTS = ["good movie", "great film", "bad plot", "", "movie movie plot"]


def run(model, output_dir, **options):
    """The bundle stage, as `shrinkbert bundle --model MODEL --output-dir OUT` runs it."""
    return bundle_stage.run(bundle_stage.Config(model=str(model), output_dir=str(output_dir), **options))


@pytest.fixture(scope="module")
def student_dir(tmp_path_factory):
    tokenizer = Tokenizer(models.WordLevel(VOCAB, unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.Lowercase()
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    table = np.random.default_rng(0).normal(size=(len(VOCAB), 6)).astype(np.float32)
    table[5], table[6] = table[1] + 0.01, table[2] + 0.01  # great ~ good, film ~ movie
    path = tmp_path_factory.mktemp("static") / "student"
    StaticEmbedder(table, tokenizer).save(path)
    return path


def test_the_bundle_runs_without_torch_and_gives_the_students_vectors(student_dir, tmp_path):
    bundle = run(student_dir, tmp_path / "bundle")
    assert sorted(p.name for p in bundle.iterdir()) == ["bundle_files.py", "predict.py", "requirements-serve.txt",
                                                         "requirements.txt", "serve.py", "shrinkbert.json",
                                                         "token_ids.py", "tokenizer.json", "vectors.npy"]
    assert "torch" not in (bundle / "requirements.txt").read_text()
    script = import_blocker(NOT_IN_A_BUNDLE + ("onnxruntime",)) + f"""
import json, sys
sys.path.insert(0, {str(bundle)!r})
from predict import Predictor
p = Predictor({str(bundle)!r})
vectors = p.embed({TEXTS!r})
print(json.dumps({{"vectors": vectors.tolist(), "dtype": str(vectors.dtype),
                  "search": p.search("good movie", vectors, k=2),
                  "sim": p.similarity(["good movie"], ["great film", "bad plot"]).tolist()}}))
"""
    out = json.loads(subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                                    check=True, timeout=120).stdout)
    expected = StaticEmbedder.load(student_dir).encode(TEXTS)
    np.testing.assert_array_equal(np.asarray(out["vectors"], np.float32), expected)
    assert out["dtype"] == "float32"
    assert [row for row, _ in out["search"]] == [0, 1]  # itself, then its near-synonym
    assert out["sim"][0][0] > 0.99 > out["sim"][0][1]


def test_predict_py_embeds_a_text_file(student_dir, tmp_path):
    bundle = run(student_dir, tmp_path / "bundle")
    (tmp_path / "texts.txt").write_text("good movie\nbad plot\n")
    subprocess.run([sys.executable, str(bundle / "predict.py"), "--embed", str(tmp_path / "texts.txt"),
                    "--out", str(tmp_path / "v.npy")], check=True, capture_output=True, timeout=120)
    np.testing.assert_array_equal(np.load(tmp_path / "v.npy"),
                                  StaticEmbedder.load(student_dir).encode(["good movie", "bad plot"]))
    (tmp_path / "empty.txt").write_text("\n\n")
    done = subprocess.run([sys.executable, str(bundle / "predict.py"), "--embed", str(tmp_path / "empty.txt"),
                           "--out", str(tmp_path / "e.npy")], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and done.stderr.strip().count("\n") == 0 and "holds no text" in done.stderr
    assert not (tmp_path / "e.npy").exists()


def test_a_folder_that_is_no_model_writes_nothing(student_dir, tmp_path):
    (tmp_path / "not-a-model").mkdir()
    with pytest.raises(ShrinkbertError):
        run(tmp_path / "not-a-model", tmp_path / "bundle")
    assert not (tmp_path / "bundle").exists()
    (tmp_path / "no-table").mkdir()  # a sentence-transformers folder with neither a graph nor a table
    (tmp_path / "no-table" / "modules.json").write_text("[]")
    with pytest.raises(ShrinkbertError, match="not a static embedding model"):
        run(tmp_path / "no-table", tmp_path / "bundle")
    assert not (tmp_path / "bundle").exists()


@pytest.mark.parametrize("option", [{"reference": "runs/teacher"}, {"tolerance": 0.1}, {"parity_rows": 8}])
def test_a_logit_bundles_option_is_one_line_for_an_embedding_bundle(student_dir, tmp_path, option):
    """A vector bundle is checked on the kit's texts against its own source: a --reference or a logit
    tolerance would be accepted and never used, so it is refused before any work."""
    with pytest.raises(ShrinkbertError, match="not read for a sentence-embedding bundle"):
        run(student_dir, tmp_path / "bundle", **option)
    assert not (tmp_path / "bundle").exists()


@pytest.fixture(scope="module")
def int8_graph(tmp_path_factory):
    """A tiny encoder exported as one sentence-vector graph, then dynamic int8."""
    from fixtures import make_int8_embedding_graph

    return make_int8_embedding_graph(tmp_path_factory.mktemp("onnx-emb"))


def test_the_onnx_bundle_runs_without_torch_and_gives_the_int8_models_vectors(int8_graph, tmp_path):
    from shrinkbert.compress.embedding_onnx import OnnxEmbedder

    bundle = run(int8_graph, tmp_path / "bundle")
    assert sorted(p.name for p in bundle.iterdir()) == ["bundle_files.py", "embedding.json", "model.onnx",
                                                         "predict.py", "requirements-serve.txt", "requirements.txt",
                                                         "serve.py", "shrinkbert.json", "token_ids.py", "tokenizer.json"]
    requirements = (bundle / "requirements.txt").read_text()
    assert "onnxruntime" in requirements and "torch" not in requirements
    texts = TEXTS + ["a much longer sentence about a good movie with a great plot and a bad ending"]
    script = import_blocker() + f"""
import json, sys
sys.path.insert(0, {str(bundle)!r})
from predict import Predictor
p = Predictor({str(bundle)!r})
vectors = p.embed({texts!r})
print(json.dumps({{"vectors": vectors.tolist(), "search": p.search({texts[0]!r}, vectors, k=2)}}))
"""
    out = json.loads(subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                                    check=True, timeout=120).stdout)
    expected = OnnxEmbedder(int8_graph).encode(texts)
    np.testing.assert_allclose(np.asarray(out["vectors"], np.float32), expected, atol=1e-5)
    assert out["search"][0][0] == 0 and abs(out["search"][0][1] - 1) < 1e-5  # a text finds itself first
    np.testing.assert_allclose(np.linalg.norm(expected, axis=1), 1, atol=1e-5)


@pytest.mark.parametrize("setting, spin", [("on", True), ("off", False)])
def test_a_set_spin_is_written_untimed_and_the_predictor_runs_with_it(int8_graph, tmp_path, setting, spin):
    bundle = run(int8_graph, tmp_path / "bundle", spin=setting, threads="default" if spin else 1)
    assert json.loads((bundle / "embedding.json").read_text())["runtime"] == {"threads": None if spin else 1, "spin": spin, "flush_denormals": True}
    assert Predictor(bundle).graph.runtime == {"threads": None if spin else 1, "spin": spin,  # its defaults, read back
                                               "flush_denormals": True}
    runtime = json.loads((bundle / "shrinkbert.json").read_text())["metrics"]["runtime"]
    assert runtime["spin"] is spin and "p50_ms" not in runtime  # set, not measured
    done = subprocess.run([sys.executable, "predict.py", "--benchmark", "3", "--seq-len", "16"], cwd=bundle,
                          capture_output=True, text=True, timeout=120)
    timing = json.loads(done.stdout.strip().splitlines()[-1])
    assert timing["spin"] is spin and timing["case"] == "b1/s16" and timing["p50_ms"] > 0


def test_auto_times_the_bundle_each_way_and_records_it(int8_graph, tmp_path):
    bundle = run(int8_graph, tmp_path / "bundle")
    runtime = json.loads((bundle / "shrinkbert.json").read_text())["metrics"]["runtime"]
    p50 = runtime["p50_ms"]
    assert set(p50) == {"threads default, spin on", "threads default, spin off", "threads 1, spin on"}
    assert all(v > 0 for v in p50.values())
    chosen = f"threads {runtime['threads'] or 'default'}, spin {'on' if runtime['spin'] else 'off'}"
    assert chosen == "threads default, spin on" or p50[chosen] < 0.9 * p50["threads default, spin on"]
    assert Predictor(bundle).graph.runtime == {"threads": runtime["threads"], "spin": runtime["spin"],
                                               "flush_denormals": runtime["flush_denormals"]}


@pytest.mark.parametrize("which", ["static", "graph"])
def test_artifact_load_gives_the_embedding_bundles_predictor(which, student_dir, int8_graph, tmp_path):
    from shrinkbert import Artifact
    from shrinkbert.compress.static_predictor import Predictor

    bundle = run(student_dir if which == "static" else int8_graph, tmp_path / "bundle", spin="on")
    predictor = Artifact(str(bundle)).load()
    assert isinstance(predictor, Predictor)
    vectors = predictor.embed(["a gripping film", "a dull one"])
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_a_mobile_embedding_bundle_holds_an_ort_file_that_gives_the_bundles_vectors(int8_graph, student_dir, tmp_path):
    """`bundle --target mobile` of an embedding graph: mobile/model.ort beside the graph,
    checked against the bundle's own vectors; a static student (no graph) refuses it and the web target."""
    out = run(int8_graph, tmp_path / "bundle", spin="on", target="mobile")  # what the bundle stage calls
    meta = json.loads((out / "embedding.json").read_text())
    assert meta["mobile"]["model_file"] == "mobile/model.ort"
    assert "mobile/model.ort within" in read_manifest(out)["checks"][0]["detail"]
    texts = ["a good film", "the movie was great " * 40]
    expected = Predictor(out).embed(texts)
    on_ort = Predictor(out, model_file="mobile/model.ort")
    with pytest.raises(Exception, match="ONNXRuntimeError"):  # the named file is the one opened, or none
        Predictor(out, model_file="mobile/none.ort")
    assert np.allclose(on_ort.embed(texts), expected, atol=1e-5)
    for target in ("mobile", "web"):
        with pytest.raises(ShrinkbertError, match=f"--target {target}"):
            run(student_dir, tmp_path / target, target=target)
        assert not (tmp_path / target).exists()


def test_search_loads_a_teacher_built_index_and_checks_it(student_dir, tmp_path):
    """A drop-in student searches an index its teacher built (.npy): the bundle checks its dimension
    and searches by cosine whatever the rows' lengths; predict.py --search does the same."""
    bundle = run(student_dir, tmp_path / "bundle")
    predictor = Predictor(bundle)
    texts = ["good movie", "bad plot", "plot plot"]
    np.save(tmp_path / "index.npy", 3.0 * predictor.embed(texts))  # not unit length: an encode without normalising
    assert [row for row, _ in predictor.search("bad plot", tmp_path / "index.npy", k=3)][0] == 1
    np.save(tmp_path / "wide.npy", np.ones((3, predictor.dim + 1), np.float32))
    with pytest.raises(ValueError, match="dimensions"):
        predictor.search("good movie", str(tmp_path / "wide.npy"))
    done = subprocess.run([sys.executable, str(bundle / "predict.py"), "--search", "bad plot", "--index",
                           str(tmp_path / "index.npy"), "--k", "2"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert [row for row, _ in json.loads(done.stdout)][0] == 1
    done = subprocess.run([sys.executable, str(bundle / "predict.py"), "--search", "good movie", "--index",
                           str(tmp_path / "wide.npy")], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and done.stderr.startswith("error: ") and "dimensions" in done.stderr


def test_a_bad_thread_count_is_one_line_before_any_work(student_dir, tmp_path):
    """A static student's bundle has no graph to give threads, and still refuses a bad --threads, as a
    classifier bundle does."""
    main = bundle_stage.main

    with pytest.raises(Exception, match="threads must be"):
        run(student_dir, tmp_path / "bundle", threads="many")
    assert not (tmp_path / "bundle").exists()
    assert main(["--model", str(student_dir), "--output-dir", str(tmp_path / "cli"), "--threads", "0"]) == 2
    assert not (tmp_path / "cli").exists()


def test_a_graph_bundle_honours_max_length_and_a_table_refuses_it(int8_graph, student_dir, tmp_path):
    """--max-length is read by a graph's vector bundle as by a logit one: it truncates there (and is checked
    there) and the manifest's resolved record says so; a static table averages every token: one line."""
    graph = run(int8_graph, tmp_path / "graph", max_length=8, spin="off", threads=1)
    assert json.loads((graph / "embedding.json").read_text())["max_length"] == 8
    manifest = json.loads((graph / "shrinkbert.json").read_text())
    assert manifest["resolved"] == {"max_length": 8} and manifest["config"]["max_length"] == 8
    with pytest.raises(ShrinkbertError, match="a mean has no length limit"):
        run(student_dir, tmp_path / "table", max_length=3)
    assert not (tmp_path / "table").exists()
