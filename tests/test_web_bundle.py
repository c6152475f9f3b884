"""The web target: `bundle --target web` writes the folder transformers.js loads as it is,
and transformers.js gives the Python bundle's outputs on 100 rows, one call a row: in Node (the same
graph through onnxruntime-node) and in the bundle's own page in a real headless browser (Debian's
chromium driven by puppeteer-core; ONNX Runtime Web's wasm). A classifier: labels equal,
probabilities within 1e-4; a sentence embedder (feature-extraction): every vector at cosine >= 0.999.
Without node, transformers.js or chromium the tests skip, except on CI, where they fail."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
WEB = ROOT / ".web"  # scripts/web_install.sh's npm folder
TRANSFORMERS_JS = WEB / "node_modules" / "@huggingface" / "transformers"


def _missing(reason: str):
    if os.environ.get("CI"):
        pytest.fail(f"the web bundle's test cannot run on CI: {reason}")
    pytest.skip(reason)


def _node_or_skip() -> str:
    node = shutil.which("node")
    if node is None or not (TRANSFORMERS_JS / "package.json").is_file():
        _missing("node is not installed" if node is None
                 else "transformers.js is not installed (bash scripts/web_install.sh)")
    return node


def _browser_or_skip() -> tuple[str, str]:
    node = _node_or_skip()
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        _missing("chromium is not installed (apt-get install chromium)")
    if not (WEB / "node_modules" / "puppeteer-core" / "package.json").is_file():
        _missing("puppeteer-core is not installed (bash scripts/web_install.sh)")
    return node, chromium


def _python_and_web(web_bundle: Path, texts: list[str], web_out: list) -> tuple[np.ndarray, np.ndarray, list, list]:
    """(the Python bundle's probabilities, transformers.js's in the same label order, both top labels)."""
    from shrinkbert.compress.edge_predictor import Predictor

    predictor = Predictor(web_bundle)
    labels = predictor.labels
    python = np.stack([predictor.probabilities(predictor.encode([text]))[0] for text in texts])
    web = np.array([[next(r["score"] for r in row if r["label"] == label) for label in labels] for row in web_out])
    return python, web, [labels[i] for i in python.argmax(1)], [max(row, key=lambda r: r["score"])["label"]
                                                                 for row in web_out]


def _bundled_for_the_web(model_dir: Path, root: Path, name: str, max_length: int, task: str | None = None) -> Path:
    """export -> dynamic int8 -> bundle --target web, into root/site/name."""
    import shrinkbert

    data = {"task": task} if task else {}
    onnx = shrinkbert.export(model=str(model_dir), output_dir=str(root / "onnx"), **data)
    int8 = shrinkbert.quantize(model=str(onnx.path), output_dir=str(root / "int8"), **data)
    return Path(shrinkbert.bundle(model=str(int8.path), output_dir=str(root / "site" / name), target="web",
                                  max_length=max_length, spin="off", **data).path)


@pytest.fixture(scope="module")
def web_bundle(tmp_path_factory) -> Path:
    from fixtures import make_decisive, write_tiny_csv

    root = tmp_path_factory.mktemp("web")
    task = write_tiny_csv(root / "tiny.csv", n=160)
    return _bundled_for_the_web(make_decisive(root / "model"), root, "bundle", 32, str(task))


def test_the_layout_is_what_transformers_js_reads(web_bundle):
    names = {str(p.relative_to(web_bundle)) for p in web_bundle.rglob("*") if p.is_file()}
    assert {"config.json", "tokenizer.json", "tokenizer_config.json", "onnx/model_quantized.onnx", "index.html",
            "app.js", "predict.py", "labels.json"} <= names
    assert "model.onnx" not in names and "calls.mjs" in names  # one copy of the graph, shared with the Python bundle
    assert json.loads((web_bundle / "config.json").read_text())["transformers.js_config"] == {"dtype": "q8"}
    assert "'text-classification'" in (web_bundle / "app.js").read_text()


def _in_node(bundle: Path, inputs: list, tmp_path: Path, options: dict | None = None) -> list[dict]:
    """transformers.js in Node on the bundle: {result, ms} per input, one call each (`options`: the
    pipeline's; default top_k null)."""
    node = _node_or_skip()
    (tmp_path / "inputs.json").write_text(json.dumps(inputs))
    done = subprocess.run([node, str(WEB / "web_node.mjs"), str(bundle.parent), bundle.name,
                           str(tmp_path / "inputs.json"), json.dumps({"top_k": None} if options is None else options)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_node_gives_the_python_bundles_outputs(web_bundle, tmp_path):
    from fixtures import tiny_sentences

    texts = [text for text, _ in tiny_sentences(100, seed=11)]
    python, from_node, python_labels, node_labels = _python_and_web(
        web_bundle, texts, [r["result"] for r in _in_node(web_bundle, texts, tmp_path)])
    assert python_labels == node_labels
    assert np.abs(python - from_node).max() < 1e-4


def _in_browser(bundle: Path, inputs: list, tmp_path: Path, options: dict | None = None) -> list[dict]:
    """The bundle's own index.html, served over HTTP with the runtime copied beside it
    (scripts/web_runtime.sh), loaded in chromium: window.shrinkbert.run's {result, ms} per input."""
    import functools
    import threading
    from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

    node, chromium = _browser_or_skip()
    copied = subprocess.run(["bash", str(ROOT / "scripts" / "web_runtime.sh"), str(bundle)], capture_output=True,
                            text=True, timeout=300)
    assert copied.returncode == 0, copied.stderr[-2000:]
    (tmp_path / "inputs.json").write_text(json.dumps(inputs))

    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(bundle.parent)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/{bundle.name}/index.html"
        done = subprocess.run([node, str(WEB / "web_drive.mjs"), url, str(tmp_path / "inputs.json"), chromium,
                               json.dumps({"top_k": None} if options is None else options)],
                              capture_output=True, text=True, timeout=300)
    finally:
        server.shutdown()
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_page_in_a_headless_browser_gives_the_python_bundles_outputs(web_bundle, tmp_path):
    from fixtures import tiny_sentences

    texts = [text for text, _ in tiny_sentences(100, seed=12)]
    runs = _in_browser(web_bundle, texts, tmp_path)
    python, in_browser, python_labels, browser_labels = _python_and_web(web_bundle, texts, [r["result"] for r in runs])
    assert python_labels == browser_labels
    assert np.abs(python - in_browser).max() < 1e-4
    assert all(r["ms"] > 0 for r in runs)


@pytest.fixture(scope="module")
def web_pair_classifier(tmp_path_factory) -> Path:
    """A tiny decisive classifier on a sentence-pair task, exported, int8, bundled for the web."""
    import csv

    from fixtures import make_decisive, tiny_sentences

    root = tmp_path_factory.mktemp("web-pair")
    sentences = tiny_sentences(320, seed=19)
    with open(root / "pairs.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["text", "text_pair", "label"])
        for i in range(0, 320, 2):
            writer.writerow([sentences[i][0], sentences[i + 1][0], sentences[i][1]])
    return _bundled_for_the_web(make_decisive(root / "model"), root, "pairs", 32, str(root / "pairs.csv"))


def test_node_classifies_sentence_pairs_as_the_python_bundle_does(web_pair_classifier, tmp_path):
    """transformers.js's text-classification tokenizes single texts only: the bundle's calls.mjs feeds the
    pair with text_pair and scores it as the pipeline does; 100 pairs, labels and probabilities equal."""
    from fixtures import tiny_sentences

    from shrinkbert.compress.edge_predictor import Predictor, softmax

    sentences = [text for text, _ in tiny_sentences(200, seed=20)]
    pairs = [[sentences[i], sentences[i + 100]] for i in range(100)]
    runs = _in_node(web_pair_classifier, pairs, tmp_path)
    predictor = Predictor(web_pair_classifier)
    python = np.concatenate([softmax(predictor.logits([a], [b])) for a, b in pairs])  # one call a pair, as in Node
    web = np.array([[next(r["score"] for r in run["result"] if r["label"] == label) for label in predictor.labels]
                    for run in runs])
    assert (python.argmax(1) == web.argmax(1)).all() and np.abs(python - web).max() < 1e-4
    assert python[:, 0].std() > 1e-4  # the pairs score differently: the comparison has something to compare


@pytest.fixture(scope="module")
def web_tagger(tmp_path_factory) -> Path:
    """A tiny tagger (decisive classifier, random biases) exported, int8, bundled for the web."""
    from fixtures import make_decisive

    root = tmp_path_factory.mktemp("web-tok")
    return _bundled_for_the_web(make_decisive(root / "model", token=True), root, "tagger", 32)


def test_node_tags_every_token_as_the_python_bundle_does(web_tagger, tmp_path):
    """transformers.js's token-classification (ignore_labels [] so every token comes back) against the
    Python bundle's logits on the same token positions: same tag, same probability, on 100 texts
    within max_length. (Past it, transformers.js 4.3 cuts the sequence after adding [CLS]/[SEP], so
    its last token is a word, not [SEP]: docs/deploy.md.)"""
    from fixtures import tiny_sentences

    texts = [text for text, _ in tiny_sentences(100, seed=15)]
    assert _same_tags(web_tagger, texts, _in_node(web_tagger, texts, tmp_path, {"ignore_labels": []})) >= 400


def test_the_taggers_page_in_a_headless_browser_tags_as_the_python_bundle_does(web_tagger, tmp_path):
    from fixtures import tiny_sentences

    texts = [text for text, _ in tiny_sentences(20, seed=17)]
    assert _same_tags(web_tagger, texts, _in_browser(web_tagger, texts, tmp_path, {"ignore_labels": []})) >= 80


def _same_tags(bundle: Path, texts: list[str], runs: list[dict]) -> int:
    """Assert that every real token's tag and probability equal the Python bundle's; the tokens checked."""
    from shrinkbert.compress.edge_predictor import Predictor

    predictor = Predictor(bundle)
    tokens = 0
    for text, run in zip(texts, runs, strict=True):
        encoding = predictor.encode([text])
        probabilities = predictor.probabilities(encoding)[0]  # [positions, tags]
        real = [j for j, special in enumerate(encoding[0].special_tokens_mask) if not special]
        assert [token["index"] for token in run["result"]] == real, text
        for token in run["result"]:
            j = token["index"]
            assert token["entity"] == predictor.labels[int(probabilities[j].argmax())]
            assert abs(token["score"] - float(probabilities[j].max())) < 1e-4
        tokens += len(real)
    return tokens


@pytest.fixture(scope="module")
def web_reader(tmp_path_factory) -> Path:
    """A tiny extractive-QA model (MiniLM's vocabulary) exported, int8, bundled for the web."""
    from fixtures import make_tiny_qa

    root = tmp_path_factory.mktemp("web-qa")
    return _bundled_for_the_web(make_tiny_qa(root / "model"), root, "reader", 64)


def _letters(text: str) -> str:
    """A span's letters and digits, lowercased: transformers.js decodes the span's tokens (uncased, spaced
    by its WordPiece decoder), the Python bundle cuts it from the context."""
    return "".join(ch for ch in text.lower() if ch.isalnum())


def test_node_answers_as_the_python_bundle_does(web_reader, tmp_path):
    """transformers.js's question-answering against the bundle's answer() on 100 questions whose
    context fits one window and is shorter than the bundle's longest answer (30 tokens): there both
    pick the span of highest start + end logit, so the spans must be the same. (transformers.js 4.3
    has no windows and no answer-length limit: a longer context is cut, and a longer span may win.)"""
    from fixtures import tiny_sentences

    from shrinkbert.compress.edge_predictor import Predictor

    rng = np.random.default_rng(16)
    sentences = [text for text, _ in tiny_sentences(200, seed=16)]
    questions = ["what was the movie like?", "who liked the plot?", "which film was good?", "what was bad?"]
    inputs = [[questions[i % 4], f"{sentences[i]} {sentences[(i + 1) % 200]}"] for i in rng.permutation(200)[:100]]
    predictor = Predictor(web_reader)
    for question, context in inputs:
        assert len(predictor.tokenizer.encode(question, context).ids) <= 30  # one window, any span allowed
    python = _same_answers(web_reader, inputs, _in_node(web_reader, inputs, tmp_path, {}))
    assert len(set(python)) > 20  # answers that differ from row to row: the check has something to compare


def test_the_readers_page_in_a_headless_browser_answers_as_the_python_bundle_does(web_reader, tmp_path):
    from fixtures import tiny_sentences

    sentences = [text for text, _ in tiny_sentences(40, seed=18)]
    inputs = [["what was the movie like?", f"{sentences[i]} {sentences[i + 20]}"] for i in range(20)]
    _same_answers(web_reader, inputs, _in_browser(web_reader, inputs, tmp_path, {}))


def _same_answers(bundle: Path, inputs: list, runs: list[dict]) -> list[str]:
    """Assert that transformers.js's answers are the Python bundle's answer() spans; those spans."""
    from shrinkbert.compress.edge_predictor import Predictor

    predictor = Predictor(bundle)
    python = [predictor.answer(question, context)["text"] for question, context in inputs]
    assert [_letters(t) for t in python] == [_letters(run["result"]["answer"]) for run in runs]
    return python


@pytest.fixture(scope="module")
def web_embedder(tmp_path_factory) -> Path:
    """A tiny sentence embedder's int8 graph bundled for the web (feature-extraction)."""
    import shrinkbert
    from fixtures import make_int8_embedding_graph

    root = tmp_path_factory.mktemp("web-emb")
    graph = make_int8_embedding_graph(root)
    return Path(shrinkbert.bundle(model=str(graph), output_dir=str(root / "site" / "embedder"), target="web",
                                  spin="off").path)


def _embedding_texts(n: int, seed: int) -> list[str]:
    """n texts, a few of them past the bundle's max_length (128 tokens): truncation must agree too."""
    from fixtures import tiny_sentences

    texts = [text for text, _ in tiny_sentences(n, seed=seed)]
    return texts[:-2] + [" ".join(texts) * 3, "the plot " * 90]


def _cosines(bundle: Path, texts: list[str], runs: list[dict]) -> np.ndarray:
    from shrinkbert.compress.static_predictor import Predictor

    python = np.stack([Predictor(bundle).embed(text)[0] for text in texts])
    web = np.array([run["result"][0] for run in runs], dtype=np.float32)
    assert web.shape == python.shape
    return (python * web).sum(1) / (np.linalg.norm(python, axis=1) * np.linalg.norm(web, axis=1))


def test_an_embedders_web_layout_runs_one_graph_for_python_and_transformers_js(web_embedder):
    names = {str(p.relative_to(web_embedder)) for p in web_embedder.rglob("*") if p.is_file()}
    assert {"config.json", "tokenizer.json", "tokenizer_config.json", "onnx/model_quantized.onnx", "index.html",
            "app.js", "predict.py", "embedding.json"} <= names and "model.onnx" not in names
    meta = json.loads((web_embedder / "embedding.json").read_text())
    assert meta["model_file"] == "onnx/model_quantized.onnx" and meta["output"] == "last_hidden_state"
    assert json.loads((web_embedder / "tokenizer_config.json").read_text())["model_max_length"] == meta["max_length"]
    assert "'feature-extraction'" in (web_embedder / "app.js").read_text()


def test_node_gives_the_python_embedders_vectors(web_embedder, tmp_path):
    texts = _embedding_texts(100, seed=13)
    assert _cosines(web_embedder, texts, _in_node(web_embedder, texts, tmp_path)).min() >= 0.999


def test_the_embedders_page_in_a_headless_browser_gives_its_vectors(web_embedder, tmp_path):
    texts = _embedding_texts(20, seed=14)
    assert _cosines(web_embedder, texts, _in_browser(web_embedder, texts, tmp_path)).min() >= 0.999
