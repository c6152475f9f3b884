"""compress.bundle for token classifiers: word-level parity, the torch-free tagger (predict.py), entities."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from fixtures import import_blocker, restamp

from shrinkbert.core.errors import ShrinkbertError


def metrics(path) -> dict:
    return json.loads((Path(path) / "shrinkbert.json").read_text())["metrics"]


def negate_classifier(model_dir: Path) -> None:
    """Negate a token classifier's output layer in place, so every word's tag flips (a bad reference)."""
    import torch
    from transformers import AutoModelForTokenClassification

    model = AutoModelForTokenClassification.from_pretrained(model_dir)
    with torch.no_grad():
        model.classifier.weight.neg_()
        model.classifier.bias.neg_()
    model.save_pretrained(model_dir, safe_serialization=True)
    restamp(model_dir)


@pytest.fixture(scope="module")
def tok_model(tmp_path_factory) -> Path:
    from fixtures import make_decisive

    return make_decisive(tmp_path_factory.mktemp("tok") / "model", token=True)


@pytest.fixture(scope="module")
def tok_int8(tok_model, tmp_path_factory) -> Path:
    from shrinkbert.compress import export, quantize

    fp32 = export.run(export.Config(model=str(tok_model), output_dir=str(tmp_path_factory.mktemp("tonnx") / "fp32"),
                                    parity_rows=16))
    return quantize.run(quantize.Config(model=str(fp32), output_dir=str(tmp_path_factory.mktemp("tq") / "int8")))


@pytest.fixture(scope="module")
def tok_bundle(tok_int8, tok_model, tmp_path_factory) -> Path:
    from shrinkbert.compress import bundle

    return bundle.run(bundle.Config(model=str(tok_int8), output_dir=str(tmp_path_factory.mktemp("tb") / "edge"),
                                    reference=str(tok_model), parity_rows=16))


def test_token_bundle_parity_is_word_level(tok_bundle, tok_int8):
    from transformers import AutoTokenizer

    from shrinkbert.compress.common import BUILTIN_SENTENCES, ort_logits, ort_session
    from shrinkbert.compress.edge_predictor import Predictor

    m = metrics(tok_bundle)
    words = sum(len(s.split()) for s in BUILTIN_SENTENCES[:16])
    assert m["kind"] == "token" and m["parity_texts"] == 16
    assert m["vs_source"]["passed"] and m["vs_source"]["rows"] == words, m["vs_source"]
    # and words at and past max_length: the long rows score the words that fit
    assert m["vs_source"]["long_texts"]["rows"] > 0 and m["vs_source"]["long_texts"]["max_abs_logit_diff"] < 1e-3
    assert m["vs_reference"]["passed"] and m["vs_reference"]["rows"] == words
    assert m["vs_reference"]["label_agreement"] >= 0.9
    assert m["val_accuracy_bundle"] is None  # built-in sentences carry no tags
    assert json.loads((tok_bundle / "labels.json").read_text())["kind"] == "token"
    # in process: the predictor's word logits are the source graph's, word for word
    rows = [{"tokens": s.split(), "tags": None} for s in BUILTIN_SENTENCES[:4]]
    predictor = Predictor(tok_bundle)
    expected = ort_logits(ort_session(tok_int8), AutoTokenizer.from_pretrained(tok_int8), rows, batch_size=4)
    np.testing.assert_allclose(predictor.word_logits([r["tokens"] for r in rows]), expected, atol=1e-4)
    tagged = predictor.predict_words([r["tokens"] for r in rows])
    assert [[w["word"] for w in row] for row in tagged] == [r["tokens"] for r in rows]
    assert [w["tag"] for row in tagged for w in row] == [predictor.labels[i] for i in expected.argmax(-1)]


TAGGER_RUNNER = import_blocker() + r"""
import json, sys
sys.path.insert(0, sys.argv[1])
from predict import Predictor
p = Predictor(sys.argv[1])
texts = json.loads(sys.argv[2])
print(json.dumps({"logits": [p.logits([t]).tolist() for t in texts], "pred": p.predict(texts),
                  "leaked": sorted(m for m in sys.modules if m.split(".")[0] in ("torch", "transformers"))}))
"""


def expected_entities(text, words):
    """The pipeline's aggregation, written out independently: B-X starts, I-X extends an X, O ends."""
    out = []
    for w in words:
        tag = w["tag"]
        if tag == "O":
            out.append(None)
            continue
        prefix, kind = tag.split("-", 1)
        last = out[-1] if out else None
        if prefix == "I" and last is not None and last["entity_group"] == kind:
            last["end"], last["scores"] = w["end"], last["scores"] + [w["score"]]
        else:
            out.append({"entity_group": kind, "start": w["start"], "end": w["end"], "scores": [w["score"]]})
    return [{"entity_group": e["entity_group"], "word": text[e["start"]:e["end"]], "score": float(np.mean(e["scores"])),
             "start": e["start"], "end": e["end"]} for e in out if e is not None]


def test_token_bundle_tags_words_of_raw_text_without_torch(tok_bundle, tok_int8, tmp_path):
    from transformers import AutoTokenizer

    from shrinkbert.compress.common import ort_logits, ort_session

    copy = shutil.copytree(tok_bundle, tmp_path / "moved")  # the bundle works wherever it is copied
    texts = ["Thé  MOVIE was good, but U.K. plot was dull!", "a very clever, funny film", ""]
    proc = subprocess.run([sys.executable, "-c", TAGGER_RUNNER, str(copy), json.dumps(texts)],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["leaked"] == []
    first = result["pred"][0]["words"]
    assert [w["word"] for w in first] == ["Thé", "MOVIE", "was", "good", ",", "but", "U", ".", "K", ".", "plot",
                                          "was", "dull", "!"]
    assert result["pred"][2] == {"words": [], "entities": []}
    session, tokenizer = ort_session(tok_int8), AutoTokenizer.from_pretrained(tok_int8)
    labels = json.loads((copy / "labels.json").read_text())["id2label"]
    for text, pred, logits in zip(texts, result["pred"], result["logits"]):
        words = pred["words"]
        for w in words:
            assert text[w["start"]:w["end"]] == w["word"] and w["tag"] in labels.values() and 0 < w["score"] <= 1
        # the raw-text path runs the same sub-tokens as the words fed pre-split (one row, one batch)
        if words:
            rows = [{"tokens": [w["word"] for w in words], "tags": None}]
            expected = ort_logits(session, tokenizer, rows, batch_size=1)
            np.testing.assert_allclose(np.asarray(logits), expected, atol=1e-4)
            assert [w["tag"] for w in words] == [labels[str(i)] for i in expected.argmax(-1)]
        got = pred["entities"]
        assert [{k: e[k] for k in ("entity_group", "word", "start", "end")} for e in got] == \
            [{k: e[k] for k in ("entity_group", "word", "start", "end")} for e in expected_entities(text, words)]
        for entity, want in zip(got, expected_entities(text, words)):
            assert entity["word"] == text[entity["start"]:entity["end"]]
            assert entity["score"] == pytest.approx(want["score"])

    cli = subprocess.run([sys.executable, str(copy / "predict.py"), "the movie was good, but the plot was dull"],
                         capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert cli.returncode == 0, cli.stderr
    printed = json.loads(cli.stdout)
    assert set(printed) == {"text", "words", "entities"}
    assert [w["word"] for w in printed["words"]] == ["the", "movie", "was", "good", ",", "but", "the", "plot", "was",
                                                     "dull"]
    assert all(printed["text"][e["start"]:e["end"]] == e["word"] for e in printed["entities"])


def test_token_predictor_truncates_and_pos_bundles_have_no_entities(tok_bundle, tmp_path):
    from shrinkbert.compress.edge_predictor import Predictor

    predictor = Predictor(tok_bundle)
    text = " ".join(["wonderful"] + ["good"] * 200)  # the first word is many sub-tokens
    words = predictor.predict(text)[0]["words"]
    # [CLS], "wonderful" (9 sub-tokens), then "good"s up to [SEP]: words past max_length get no tag
    assert len(predictor.tokenizer.encode("wonderful", add_special_tokens=False).ids) == 9
    assert len(words) == 1 + predictor.max_length - 2 - 9
    assert words[0] == {**words[0], "word": "wonderful", "start": 0, "end": 9}
    assert all(text[w["start"]:w["end"]] == w["word"] for w in words)
    # a word cut by truncation keeps its whole span
    cut = Predictor(tok_bundle)
    cut.tokenizer.enable_truncation(4)
    tail = cut.predict("good wonderful day")[0]["words"]
    assert [w["word"] for w in tail] == ["good", "wonderful"]
    # part-of-speech tags (no B-/I-): words tagged, no entities; an old bundle without "kind" is a sequence one
    pos = shutil.copytree(tok_bundle, tmp_path / "pos")
    meta = json.loads((pos / "labels.json").read_text())
    names = ["NOUN", "VERB", "ADJ", "DET", "."]
    meta["id2label"] = {str(i): n for i, n in enumerate(names)}
    meta["label2id"] = {n: i for i, n in enumerate(names)}
    (pos / "labels.json").write_text(json.dumps(meta))
    out = Predictor(pos).predict(["the movie was good", "a dull plot"])
    assert all(r["entities"] == [] and r["words"] and {w["tag"] for w in r["words"]} <= set(names) for r in out)
    del meta["kind"]
    (pos / "labels.json").write_text(json.dumps(meta))
    assert Predictor(pos).kind == "sequence"


def fake_words(text: str, tags: list[str], scores: list[float] | None = None) -> list[dict]:
    """Predictor output for the text's space-separated words, tagged by hand."""
    words, start = [], 0
    for i, (word, tag) in enumerate(zip(text.split(" "), tags)):
        words.append({"word": word, "tag": tag, "score": scores[i] if scores else 0.9, "start": start,
                      "end": start + len(word)})
        start += len(word) + 1
    assert len(words) == len(tags)
    return words


def test_entities_merge_like_the_pipeline_first_strategy():
    from shrinkbert.core.kinds.edge.token_edge import group_entities  # the token kind's bundle postprocessing

    text = "New York is in United States"
    words = fake_words(text, ["B-LOC", "I-LOC", "O", "O", "B-ORG", "I-ORG"], [0.8, 0.6, 0.9, 0.9, 0.5, 0.7])
    assert group_entities(text, words) == [
        {"entity_group": "LOC", "word": "New York", "score": pytest.approx(0.7), "start": 0, "end": 8},
        {"entity_group": "ORG", "word": "United States", "score": pytest.approx(0.6), "start": 15, "end": 28}]
    # B-X I-X O B-Y
    text = "Ann Lee met Bob"
    got = group_entities(text, fake_words(text, ["B-PER", "I-PER", "O", "B-LOC"]))
    assert [(e["entity_group"], e["word"]) for e in got] == [("PER", "Ann Lee"), ("LOC", "Bob")]
    # an I-X with no B-X/I-X before it starts an entity; after O, or after another type, it starts a new one
    text = "Ann Lee met Bob Smith Jr"
    got = group_entities(text, fake_words(text, ["I-PER", "I-PER", "O", "I-PER", "I-LOC", "I-LOC"]))
    assert [(e["entity_group"], e["word"], e["start"], e["end"]) for e in got] == [
        ("PER", "Ann Lee", 0, 7), ("PER", "Bob", 12, 15), ("LOC", "Smith Jr", 16, 24)]
    # B-X B-X: two entities; O everywhere: none
    text = "Ann Bob"
    assert [e["word"] for e in group_entities(text, fake_words(text, ["B-PER", "B-PER"]))] == ["Ann", "Bob"]
    assert group_entities(text, fake_words(text, ["O", "O"])) == []
    # a part-of-speech tagger (no BIO tags) has no entities
    text = "the film was good"
    assert group_entities(text, fake_words(text, ["DET", "NOUN", "VERB", "ADJ"]), bio=False) == []


def test_flipped_token_reference_fails_agreement_and_writes_nothing(tok_int8, tok_model, tmp_path):
    from shrinkbert.compress import bundle

    flipped = Path(shutil.copytree(tok_model, tmp_path / "flipped"))
    negate_classifier(flipped)
    out = tmp_path / "strict"
    with pytest.raises(ShrinkbertError, match=r"labels agree with .* 0\.0% of the \d+ words it decides .* need 90%; no bundle written") as err:
        bundle.run(bundle.Config(model=str(tok_int8), output_dir=str(out), reference=str(flipped), parity_rows=16))
    assert "\n" not in str(err.value)
    assert not out.exists()
    assert not any(p.name.startswith(out.name) for p in tmp_path.iterdir() if p != flipped)


def test_token_bundle_records_word_accuracy_and_entity_f1(tok_int8, tok_model, tmp_path, monkeypatch):
    """With a seqeval task's rows (here tiny tagged sentences) the bundle records word accuracy and entity F1."""
    from shrinkbert.compress import bundle, bundle_logits
    from shrinkbert.core.data.tasks import Task
    from fixtures import TINY_TAGS, tiny_tagged

    task = Task("tiny-ner", tuple(TINY_TAGS), metrics=("seqeval", "accuracy"), kind="token")
    rows = [{"tokens": words, "tags": [TINY_TAGS.index(t) for t in tags]} for words, tags in tiny_tagged(20, seed=3)]
    seen = {}

    def fake_rows(spec, split="validation", max_rows=None, cache_dir=None, kind=None):
        seen["kind"] = kind
        return rows[:max_rows], task

    monkeypatch.setattr(bundle_logits, "load_rows", fake_rows)
    out = bundle.run(bundle.Config(model=str(tok_int8), output_dir=str(tmp_path / "edge"), reference=str(tok_model),
                                   parity_rows=20))
    m = metrics(out)
    assert seen["kind"].name == "token"  # the rows asked for are the model's kind's (words)
    assert m["vs_source"]["rows"] == sum(len(r["tokens"]) for r in rows)
    assert 0 <= m["val_accuracy_bundle"] <= 1 and 0 <= m["val_entity_f1_bundle"] <= 1
    assert 0 <= m["vs_reference"]["val_accuracy_reference"] <= 1
    assert 0 <= m["vs_reference"]["val_entity_f1_reference"] <= 1


def test_artifact_load_gives_the_token_bundles_predictor(tok_bundle):
    from shrinkbert import Artifact
    from shrinkbert.compress.edge_predictor import Predictor

    predictor = Artifact(str(tok_bundle)).load()
    assert isinstance(predictor, Predictor)
    words = ["the", "film", "was", "good"]
    assert [w["word"] for w in predictor.predict_words([words])[0]] == words


def test_reference_agreement_counts_the_rows_the_reference_decides_not_its_ties():
    from shrinkbert.compress.bundle_logits import decisive_agreement

    reference = np.array([[0.0, 0.005], [0.0, 1.0], [1.0, 0.0], [2.0, 0.0]])
    bundle = np.array([[0.005, 0.0], [0.0, 1.0], [0.0, 1.0], [2.0, 0.0]])  # a tie flipped, one decided row flipped
    agreement = decisive_agreement(reference, bundle)
    assert agreement["decisive_rows"] == 3 and agreement["label_agreement_decisive"] == 2 / 3
    assert decisive_agreement(reference[:1], bundle[:1])["label_agreement_decisive"] == 1.0  # ties only: nothing to judge
