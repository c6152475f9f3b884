"""The teacher as it is: a transformer read as a sentence embedder with the pooling and normalisation
its own sentence-transformers files declare; the artifact is a folder SentenceTransformer loads.

Expected vectors are computed here by hand from the encoder's token outputs, never by the code
under test."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from transformers import AutoModel, AutoTokenizer

from shrinkbert.core.builtin import minilm_path
from shrinkbert.core.kinds.embedder import Embedder, PoolingSpec, read_pooling, write_st_layout
from shrinkbert.core.errors import ShrinkbertError
from fixtures import make_tiny_bert

TEXTS = ["a good movie", "the plot was very dull and the actor was flat", "funny", ""]


@pytest.fixture(scope="module")
def tiny_encoder(tmp_path_factory):
    return make_tiny_bert(tmp_path_factory.mktemp("emb") / "tiny")


def token_outputs(path, texts):
    """Last hidden states and attention masks as numpy, straight from transformers."""
    tokenizer, model = AutoTokenizer.from_pretrained(path), AutoModel.from_pretrained(path).eval()
    batch = tokenizer(texts, padding=True, truncation=True, max_length=128, return_tensors="pt")
    with torch.no_grad():
        hidden = model(**batch).last_hidden_state.numpy().astype(np.float64)
    return hidden, batch["attention_mask"].numpy()


def by_hand(hidden, mask, mode, normalize):
    """sentence-transformers' Pooling definition, one sentence at a time over its real tokens."""
    rows = []
    for tokens, keep in zip(hidden, mask):
        real = tokens[keep.astype(bool)]
        vector = {"mean": real.mean(axis=0), "cls": tokens[0], "max": real.max(axis=0),
                  "mean_sqrt_len": real.sum(axis=0) / np.sqrt(len(real))}[mode]
        rows.append(vector / np.linalg.norm(vector) if normalize else vector)
    return np.stack(rows)


def test_a_plain_bert_is_mean_pooled_and_normalised(tiny_encoder):
    assert read_pooling(tiny_encoder) == PoolingSpec("mean", True)
    hidden, mask = token_outputs(tiny_encoder, TEXTS)
    vectors = Embedder.load(tiny_encoder).encode(TEXTS, batch_size=3)  # two batches, different padding
    assert vectors.dtype == np.float32 and vectors.shape == (len(TEXTS), 32)
    np.testing.assert_allclose(vectors, by_hand(hidden, mask, "mean", True), atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1, atol=1e-5)


@pytest.mark.parametrize("mode,normalize", [("cls", False), ("max", True), ("mean_sqrt_len", False)])
def test_the_declared_pooling_is_the_one_applied(tmp_path, mode, normalize):
    path = make_tiny_bert(tmp_path / "m", with_manifest=False)
    write_st_layout(path, PoolingSpec(mode, normalize), dim=32)
    assert read_pooling(path) == PoolingSpec(mode, normalize)
    hidden, mask = token_outputs(path, TEXTS)
    np.testing.assert_allclose(Embedder.load(path).encode(TEXTS), by_hand(hidden, mask, mode, normalize),
                               atol=1e-5)


def test_the_teacher_declares_mean_pooling_then_normalize():
    # its package ships modules.json + 1_Pooling but no 2_Normalize folder: the module list decides
    assert read_pooling(minilm_path()) == PoolingSpec("mean", True)


def test_a_module_the_kit_cannot_run_is_one_line(tmp_path):
    (tmp_path / "modules.json").write_text(json.dumps([{"idx": 0, "name": "0", "path": "",
                                                        "type": "sentence_transformers.models.LayerNorm"}]))
    with pytest.raises(ShrinkbertError, match="cannot run"):
        read_pooling(tmp_path)
    # a Dense runs only as a linear map (the kit's projection): another activation is refused
    (tmp_path / "2_Dense").mkdir()
    (tmp_path / "2_Dense" / "config.json").write_text(json.dumps({"activation_function": "torch.nn.modules.activation.Tanh"}))
    (tmp_path / "modules.json").write_text(json.dumps([{"idx": 0, "name": "0", "path": "2_Dense",
                                                        "type": "sentence_transformers.models.Dense"}]))
    with pytest.raises(ShrinkbertError, match="linear Dense"):
        read_pooling(tmp_path)


def test_sentence_transformers_loads_the_artifact_and_agrees(tiny_encoder, tmp_path):
    st = pytest.importorskip("sentence_transformers")
    path = make_tiny_bert(tmp_path / "m", with_manifest=False)
    write_st_layout(path, PoolingSpec("mean", True), dim=32, max_seq_length=128)
    theirs = st.SentenceTransformer(str(path), device="cpu").encode(TEXTS[:3], convert_to_numpy=True)
    np.testing.assert_allclose(Embedder.load(path).encode(TEXTS[:3]), theirs, atol=1e-5)


def test_sentence_transformers_and_the_kit_agree_on_the_teacher():
    st = pytest.importorskip("sentence_transformers")
    texts = ["A man is playing a guitar.", "Someone plays an instrument.", "The stock market fell."]
    theirs = st.SentenceTransformer(str(minilm_path()), device="cpu").encode(texts, convert_to_numpy=True)
    ours = Embedder.load("minilm").encode(texts)
    np.testing.assert_allclose(ours, theirs, atol=1e-5)


def test_the_timed_text_is_whole_at_max_length_for_the_baselines_tokenizer():
    from shrinkbert.eval.vector_report import baseline_tokenizer, timed_text

    tokenizer = baseline_tokenizer("minilm")
    sentences = ["An unbelievably overwrought melodrama, saved by its cinematography.", "Short one."]
    text = timed_text(sentences, 128, tokenizer)
    count = lambda t: len(tokenizer.encode(t).ids)  # noqa: E731  [CLS] and [SEP] included
    assert count(text) <= 128
    words = [w for s in sentences for w in s.split()]
    next_word = words[len(text.split()) % len(words)]
    assert count(text + " " + next_word) > 128  # the longest whole-word text that fits
    assert count(text) >= 120
