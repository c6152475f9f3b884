"""The eval harness on token-classification (tagging) variants: PyTorch, ONNX, int8 ONNX, bundle.

A tiny random token classifier is exported and quantized by the compress stages, then measured on
hand-made BIO rows: word accuracy and entity F1 come from core.kinds.token.tag_scores, each word scored
on its first sub-token, words past max_length dropped with their gold tags.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from shrinkbert.core.data.tasks import Task
from fixtures import TINY_TAGS, make_tiny_bert, tiny_tagged, write_tiny_conll

NER = Task("tiny-ner", tuple(TINY_TAGS), metrics=("seqeval", "accuracy"), kind="token")
POS = Task("tiny-pos", tuple(TINY_TAGS), metrics=("accuracy",), kind="token")
MAX_LENGTH = 16  # the long row below does not fit: its last words are not scored
FAST = dict(batch_sizes=[1], seq_lens=["16", "real"], runs=3, warmup=1, threads=1, progress=False,
            memory="off", max_length=MAX_LENGTH, plot=True)


def _words_and_tags(n: int = 12, seed: int = 5):
    index = {name: i for i, name in enumerate(TINY_TAGS)}
    data = tiny_tagged(n, seed=seed)
    words = [w for w, _ in data]
    tags = [[index[t] for t in row] for _, row in data]
    long_row = ["the", "good", "very", "movie", "was", "bad", "and", "the", "plot", "was", "dull"] * 2
    long_tags = [0, 1, 2, 0, 0, 3, 0, 0, 0, 0, 3] * 2
    return words + [long_row], tags + [long_tags]


def _rows(task: Task = NER, empty_word: bool = False):
    """13 rows (the last too long for MAX_LENGTH); with empty_word one more whose middle word the
    tokenizer turns into nothing (a zero-width space): it is not scored, and neither is its tag."""
    from shrinkbert.eval.rows import from_words

    words, tags = _words_and_tags()
    if empty_word:
        words, tags = words + [["good", "\u200b", "bad", "movie"]], tags + [[1, 0, 3, 0]]
    return from_words(task, words, tags, source="tiny_tagged(12) + one long row")


@pytest.fixture(scope="module")
def token_model(tmp_path_factory) -> Path:
    return make_tiny_bert(tmp_path_factory.mktemp("tok") / "tok-pt", num_labels=5, label_names=TINY_TAGS,
                          token=True, seed=1)


@pytest.fixture(scope="module")
def token_onnx(token_model, tmp_path_factory) -> Path:
    from shrinkbert.compress import export

    out = tmp_path_factory.mktemp("tok-onnx") / "tok-onnx"
    return Path(export.run(export.Config(model=str(token_model), output_dir=str(out), parity_rows=8, max_length=32)))


@pytest.fixture(scope="module")
def token_int8(token_onnx, tmp_path_factory) -> Path:
    from shrinkbert.compress import quantize

    out = tmp_path_factory.mktemp("tok-int8") / "tok-int8"
    return Path(quantize.run(quantize.Config(model=str(token_onnx), output_dir=str(out), max_eval_rows=0,
                                             max_length=32)))


def _config(paths, out, task="tiny-ner", **overrides):
    from shrinkbert.eval.harness import EvalConfig

    return EvalConfig(artifacts=[str(p) for p in paths], task=task, output_dir=str(out), **{**FAST, **overrides})


@pytest.fixture(scope="module")
def ner_run(token_model, token_onnx, token_int8, tiny_bert, tmp_path_factory):
    from shrinkbert.eval.harness import run

    out = tmp_path_factory.mktemp("tok-eval")
    rows = _rows()
    report, files = run(_config([token_model, token_onnx, token_int8, tiny_bert], out), rows=rows)
    return {"report": report, "files": files, "out": out, "rows": rows,
            "by_name": {r["name"]: r for r in report["variants"]}}


def _hand_scores(model_dir: Path, rows, task: Task) -> dict[str, float]:
    """The PyTorch model's scores computed here with none of the harness's helpers: the fast
    tokenizer's own word_ids, each word scored at its first sub-token, seqeval's own functions."""
    import torch
    from seqeval.metrics import f1_score, precision_score, recall_score
    from transformers import AutoModelForTokenClassification, AutoTokenizer

    model = AutoModelForTokenClassification.from_pretrained(model_dir, attn_implementation="eager").eval()
    tokenizer = AutoTokenizer.from_pretrained(str(model_dir), use_fast=True)
    encoded = tokenizer(rows.words, is_split_into_words=True, truncation=True, max_length=MAX_LENGTH,
                        padding=True, return_tensors="pt")
    with torch.inference_mode():
        predicted = model(**encoded).logits.argmax(-1).numpy()
    names = task.label_names
    gold_rows, predicted_rows = [], []
    for i, tags in enumerate(rows.labels):
        first = {}
        for position, word in enumerate(encoded.word_ids(i)):
            if word is not None and word not in first:
                first[word] = position  # words cut off by max_length have none: not scored
        gold_rows.append([names[tags[w]] for w in sorted(first)])
        predicted_rows.append([names[predicted[i, first[w]]] for w in sorted(first)])
    pairs = [(g, p) for golds, preds in zip(gold_rows, predicted_rows) for g, p in zip(golds, preds)]
    scores = {"accuracy": sum(g == p for g, p in pairs) / len(pairs)}
    if "seqeval" in task.metrics:
        scores.update(entity_precision=precision_score(gold_rows, predicted_rows, zero_division=0),
                      entity_recall=recall_score(gold_rows, predicted_rows, zero_division=0),
                      entity_f1=f1_score(gold_rows, predicted_rows, zero_division=0))
    return scores


# -- rows ----------------------------------------------------------------------------------------

def test_token_rows_keep_words_and_tags():
    from shrinkbert.core.errors import ShrinkbertError
    from shrinkbert.eval.rows import from_lists, from_words

    rows = _rows()
    assert rows.kind.name == "token" and len(rows) == 13 and rows.num_words == sum(len(w) for w in rows.words)
    assert rows.texts[0] == " ".join(rows.words[0])  # latency inputs: the words joined
    assert all(len(w) == len(t) for w, t in zip(rows.words, rows.labels))
    with pytest.raises(ShrinkbertError, match="words but"):
        from_words(NER, [["a", "b"]], [[0]])
    with pytest.raises(ShrinkbertError, match="sequence task"):
        from_words(Task("seq", ("a", "b")), [["a"]], [[0]])
    # Same joined text, other words or tags or kind: another fingerprint, so no cached result is shared.
    other_split = from_words(NER, [["good", "movie"]], [[1, 0]])
    merged = from_words(NER, [["good movie"]], [[1]])
    assert other_split.texts == merged.texts and other_split.fingerprint != merged.fingerprint
    assert from_words(NER, [["good", "movie"]], [[1, 2]]).fingerprint != other_split.fingerprint
    assert from_words(POS, [["good", "movie"]], [[1, 0]]).fingerprint != other_split.fingerprint
    sequence = from_lists(Task("seq", tuple(TINY_TAGS)), ["good movie"], [1])
    assert sequence.words is None and sequence.kind.name == "sequence" and sequence.fingerprint != other_split.fingerprint


# -- the harness on PyTorch, ONNX and int8 token variants -----------------------------------------

def test_pytorch_and_onnx_report_the_same_word_scores(ner_run, token_model, token_onnx, token_int8):
    by_name = ner_run["by_name"]
    pt, fp32, int8 = by_name[token_model.name], by_name[token_onnx.name], by_name[token_int8.name]
    for row in (pt, fp32, int8):
        assert row["error"] is None, row["error"]
        assert set(row["metrics"]) == {"accuracy", "entity_precision", "entity_recall", "entity_f1"}
        assert 0.0 <= row["metrics"]["entity_f1"] <= 1.0
        assert row["latency_ms"]["b1/s16"]["p50"] > 0 and row["latency_ms"]["b1/real"]["p50"] > 0
        assert row["test_rows"] == 13
    assert fp32["metrics"]["accuracy"] == pytest.approx(pt["metrics"]["accuracy"], abs=1e-12)
    assert fp32["metrics"]["entity_f1"] == pytest.approx(pt["metrics"]["entity_f1"], abs=1e-12)
    assert fp32["agreement_with_baseline"] == pytest.approx(1.0)
    # The long row does not fit in MAX_LENGTH: its last words are not scored, by any variant.
    rows = ner_run["rows"]
    assert pt["words_dropped"] > 0 and pt["test_words"] + pt["words_dropped"] == rows.num_words
    assert fp32["test_words"] == pt["test_words"] == int8["test_words"]
    assert "token classifier" in pt["runtime"]


def test_harness_scores_equal_hand_computed_tag_scores(ner_run, token_model):
    expected = _hand_scores(token_model, ner_run["rows"], NER)
    got = ner_run["by_name"][token_model.name]["metrics"]
    assert set(got) == set(expected)
    for key, value in expected.items():
        assert got[key] == pytest.approx(value, abs=1e-12), key


def test_report_names_entity_f1_and_uses_it_for_retention(ner_run, token_model, token_onnx):
    report, files = ner_run["report"], ner_run["files"]
    assert report["primary_metric"] == "entity_f1" and report["primary_metric_name"] == "entity F1"
    assert report["test_rows"]["words"] == ner_run["rows"].num_words
    markdown = Path(files["md"]).read_text()
    header = next(line for line in markdown.splitlines() if line.startswith("| variant"))
    assert "entity F1" in header and "word accuracy" in header and "| accuracy |" not in header
    assert "variant / baseline on entity F1" in markdown and "share of words" in markdown
    assert "(13 test rows" not in markdown and "13 test rows (" in markdown
    csv_header = Path(files["csv"]).read_text().splitlines()[0].split(",")
    assert {"entity_f1", "entity_precision", "entity_recall", "word_accuracy"} <= set(csv_header)
    base = report["baseline"]
    by_name = ner_run["by_name"]
    base_f1 = by_name[base]["metrics"]["entity_f1"]
    retention = by_name[token_onnx.name]["ratios"]["retention"]
    if base_f1:
        assert retention == pytest.approx(by_name[token_onnx.name]["metrics"]["entity_f1"] / base_f1)
    else:
        assert retention is None  # entity F1 0 for the baseline: no ratio
    assert Path(files["png"]).stat().st_size > 0
    saved = json.loads(Path(files["json"]).read_text())
    assert saved["primary_metric_name"] == "entity F1"


def test_sequence_model_on_token_task_is_a_clear_error(ner_run, tiny_bert):
    row = ner_run["by_name"][tiny_bert.name]
    assert row["error"] and "sequence classifier" in row["error"]
    assert all(r["error"] is None for name, r in ner_run["by_name"].items() if name != tiny_bert.name)


def test_rerun_reuses_token_measurements(ner_run, token_model, token_onnx, token_int8):
    """Same rows: accuracy comes from the cache. Same artifacts on other rows (word accuracy only):
    measured again, never the seqeval result."""
    from shrinkbert.eval.harness import run

    paths = [token_model, token_onnx, token_int8]
    again, _ = run(_config(paths, ner_run["out"], plot=False), rows=ner_run["rows"])
    for row in again["variants"]:
        assert "accuracy" in row["cached"]
        assert row["metrics"] == ner_run["by_name"][row["name"]]["metrics"]
    pos, files = run(_config(paths, ner_run["out"], task="tiny-pos", plot=False), rows=_rows(POS))
    for row in pos["variants"]:
        assert "accuracy" not in row["cached"]
        assert set(row["metrics"]) == {"accuracy"}
        assert row["metrics"]["accuracy"] == pytest.approx(ner_run["by_name"][row["name"]]["metrics"]["accuracy"])
    assert pos["primary_metric"] == "accuracy" and pos["primary_metric_name"] == "word accuracy"
    header = next(line for line in Path(files["md"]).read_text().splitlines() if line.startswith("| variant"))
    assert "word accuracy" in header and "entity" not in header


def test_onnx_runner_predict_words_lines_up_with_gold_words(token_onnx):
    from transformers import AutoTokenizer

    from shrinkbert.core.kinds.tagging import encode_words, encoded_word_ids, gold_words
    from shrinkbert.eval.runners import open_runner

    rows = _rows()
    runner = open_runner(token_onnx, threads=1)
    logits, scored = runner.predict_words(rows.words, MAX_LENGTH)
    tokenizer = AutoTokenizer.from_pretrained(str(token_onnx), use_fast=True)
    golds, counts = gold_words(rows.labels, encoded_word_ids(encode_words(tokenizer, rows.words, MAX_LENGTH),
                                                              len(rows)))
    assert [len(s) for s in scored] == counts and logits.shape == (len(golds), 5)
    assert scored == [list(range(c)) for c in counts]  # a prefix of each row's words
    assert counts[-1] < len(rows.words[-1])  # the long row lost its tail
    runner.close()


def test_a_word_the_tokenizer_drops_loses_its_own_tag_only(token_onnx):
    """A zero-width space makes no sub-token: the word after it keeps its own gold tag."""
    from shrinkbert.core.kinds.token import tag_scores
    from shrinkbert.eval.measure import Settings, _accuracy
    from shrinkbert.eval.runners import open_runner

    rows = _rows(empty_word=True)
    runner = open_runner(token_onnx, threads=1)
    logits, scored = runner.predict_words(rows.words[-1:], MAX_LENGTH)
    assert scored == [[0, 2, 3]] and logits.shape == (3, 5)
    result = _accuracy(runner, rows, Settings(threads=1, max_length=MAX_LENGTH, memory="off"))
    all_logits, all_scored = runner.predict_words(rows.words, MAX_LENGTH)
    runner.close()
    golds = [tags[i] for tags, indices in zip(rows.labels, all_scored) for i in indices]
    assert golds[-3:] == [1, 3, 0]  # good, bad, movie: not the zero-width word's O
    expected = tag_scores(NER, all_logits.argmax(-1), golds, [len(i) for i in all_scored])
    assert result["metrics"] == pytest.approx(expected)
    assert result["word_counts"][-1] == 3
    assert result["words_dropped"] == rows.num_words - result["words"] and result["words_dropped"] >= 2


# -- edge bundle ------------------------------------------------------------------------------

def test_bundle_variant_tags_words(token_model, token_int8, tmp_path):
    from shrinkbert.compress import bundle
    from shrinkbert.eval.harness import run

    out = Path(bundle.run(bundle.Config(model=str(token_int8), output_dir=str(tmp_path / "tok-bundle"),
                                        reference=str(token_int8), parity_rows=8, max_length=MAX_LENGTH)))
    rows = _rows(empty_word=True)
    report, _ = run(_config([token_model, token_int8, out], tmp_path / "eval", plot=False), rows=rows)
    by_name = {r["name"]: r for r in report["variants"]}
    own, int8 = by_name[out.name], by_name[token_int8.name]
    assert own["error"] is None, own["error"]
    assert set(own["metrics"]) == {"accuracy", "entity_precision", "entity_recall", "entity_f1"}
    # The bundle truncates at its own max_length (the same here): the same words are scored.
    assert own["test_words"] == int8["test_words"]
    assert own["metrics"]["accuracy"] == pytest.approx(int8["metrics"]["accuracy"], abs=0.15)


# -- a CoNLL file through --task -------------------------------------------------------------------

def test_conll_task_through_the_command_line(token_model, token_onnx, tmp_path):
    from shrinkbert.core.data.load import load_task
    from shrinkbert.eval.harness import main

    conll = write_tiny_conll(tmp_path / "tiny.conll", n=48, seed=2)
    task, splits = load_task(str(conll))
    assert task.kind == "token"
    out = tmp_path / "eval"
    code = main([str(token_model), str(token_onnx), "--task", str(conll), "--out", str(out), "--batch-sizes", "1",
                 "--seq-lens", "16", "--runs", "2", "--warmup", "1", "--threads", "1", "--memory", "off",
                 "--max-length", str(MAX_LENGTH), "--no-progress", "--no-plot"])
    assert code == 0
    report = json.loads((out / "report.json").read_text())
    assert report["task"]["kind"] == "token" and report["test_rows"]["n"] == len(splits["test"])
    rows = report["variants"]
    assert all(r["error"] is None for r in rows), [r["error"] for r in rows]
    assert rows[0]["metrics"]["accuracy"] == pytest.approx(rows[1]["metrics"]["accuracy"], abs=1e-12)
    # The file's labels are in its own (sorted) order, the model's in TINY_TAGS order: matched by name,
    # so the hand count over the file's rows agrees with the harness.
    from shrinkbert.eval.rows import from_words

    test = splits["test"]
    file_rows = from_words(task, list(test["tokens"]), list(test["tags"]))
    names = [task.label_names.index(n) for n in TINY_TAGS]  # model output i -> file label index
    from shrinkbert.core.kinds.token import tag_scores
    from shrinkbert.core.kinds.tagging import encode_words, encoded_word_ids, gather_words, gold_words
    import torch
    from transformers import AutoModelForTokenClassification, AutoTokenizer

    model = AutoModelForTokenClassification.from_pretrained(token_model, attn_implementation="eager").eval()
    tokenizer = AutoTokenizer.from_pretrained(str(token_model), use_fast=True)
    encoded = encode_words(tokenizer, file_rows.words, MAX_LENGTH, padding=True, return_tensors="pt")
    with torch.inference_mode():
        logits = model(**encoded).logits.numpy()
    word_ids = encoded_word_ids(encoded, len(file_rows))
    golds, counts = gold_words(file_rows.labels, word_ids)
    predicted = [names[p] for p in np.asarray(gather_words(logits, word_ids)).argmax(-1)]
    expected = tag_scores(task, predicted, golds, counts)
    for key, value in expected.items():
        assert rows[0]["metrics"][key] == pytest.approx(value, abs=1e-12), key
    markdown = (out / "report.md").read_text()
    primary_name = "entity F1" if "seqeval" in task.metrics else "word accuracy"
    assert primary_name in markdown
